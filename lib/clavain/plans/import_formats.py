"""Work from where it lives, as Clavain node specs: GitHub issues (`gh issue list --json
number,title,body,labels`), a markdown PRD or plan, beads (`.beads/issues.jsonl`) and Task
Master (`.taskmaster/tasks/tasks.json`). Files only, no network, no database: each parser is a
pure function of the file's bytes (`clavain.plans.imports.<format>`, imported only when asked).

Every spec is `{"id", "type": "task", "title", "dependsOn", "verify", "acceptance", "origin"}`
with `origin` = `{"format", "source_id", "status", "priority", "url", "unresolved"}` (`None` where
the source has no such thing; `unresolved` lists references the file makes to items it does not
hold, so they are dropped from `dependsOn` visibly). Ids are derived from the source's own ids,
so importing the same file again gives the same ids and the same specs.

A bad file is one `ClavainError` line naming the file and the place (`issues.json: item 3:
"number" is missing`).
"""

from __future__ import annotations

import importlib
from typing import Any

from clavain.errors import ClavainError

FORMATS = ("github", "markdown", "beads", "taskmaster")


def parse(fmt: str, raw: bytes | str, where: str) -> list[dict[str, Any]]:
    """The node specs in `raw` (the file's bytes, or its text already decoded), read as
    `fmt`; `where` names the file in errors."""
    from clavain.textio import BadText, check, decode

    if fmt not in FORMATS:
        raise ClavainError(f"unknown import format {fmt!r} (formats: {', '.join(FORMATS)})")
    try:
        text = decode(raw, where) if isinstance(raw, bytes) else check(raw, where)
        module = importlib.import_module(f"clavain.plans.imports.{fmt}")
        return module.parse(text, where)
    except BadText as exc:
        raise ClavainError(str(exc)) from None
