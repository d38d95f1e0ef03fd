"""UserPromptSubmit: when the prompt is `/clavain:sprint …`, `/clavain:loop …` or
`/clavain:budget …`, record what follows the command for this session
(`clavain.sprint.typed_request`) with a one-time value whose hash the state database keeps
(`typed_once`), so the command's `clavain … --from-prompt` gets what the person typed without
any shell parsing it, once, in this turn, and `clavain.authority` knows a person asked.
bin/clavain-hook starts no interpreter for any other prompt. Never fails the host: a failure is
one line in hooks.log, and the command then says the request was not recorded."""

from __future__ import annotations

import os

from clavain.locate import payload_cwd

TYPE_CHECKING = False
if TYPE_CHECKING:  # `typing` costs the hook an import (and `re`)
    from typing import Any


def state_root(cwd: str) -> str:
    """The state folder `StatePaths.discover(cwd)` names, made first as `project.ensure_state`
    makes it: with `os.path` and `clavain.locate` alone unless it must be made (`pathlib` and
    the `re` it imports would cost this hook ~7 ms on every recorded prompt)."""
    from clavain import locate

    root = locate.state_dir(locate.project_dir(cwd, os.environ), os.environ)
    if not os.path.exists(os.path.join(root, "verdicts")):  # `ensure_state`'s own test
        from clavain.paths import StatePaths
        from clavain.project import ensure_state

        return str(ensure_state(StatePaths.discover(cwd)).root)
    return root


def handle(payload: dict[str, Any]) -> dict[str, Any] | None:
    try:
        from clavain.sprint import typed_request

        for kind, command in typed_request.COMMANDS.items():
            arguments = typed_request.arguments_of(payload.get("prompt"), command)
            if arguments is not None:
                typed_request.record_in(state_root(payload_cwd(payload)),
                                        payload.get("session_id"), arguments, kind,
                                        payload.get("prompt_id"))
                break
    except Exception as exc:
        from clavain.hook_log import log_failure  # only once something failed

        log_failure("UserPromptSubmit", f"{type(exc).__name__}: {exc}", payload)
    return None
