"""Aligned text tables for people: the CLI's tables and a supervised run's progress lines.

Below the CLI so that the supervisor prints the same tables without importing a front door.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

# A table cell never grows past this many characters: one long list (the integrate node depends on
# every verify node) must not pad every row to its width (146 MB of output at 2,000 tasks).
# The whole value stays in `--json` and in `show` commands.
CELL_MAX_CHARS = 60


def _cell(value: Any, limit: int = CELL_MAX_CHARS) -> str:
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        text = ", ".join(str(v) for v in value[:limit])
        if len(value) > 1 and len(text) > limit:
            text = f"({len(value)}) {text}"
    else:
        text = str(value).replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render_table(rows: Iterable[Mapping[str, Any]], columns: Sequence[str],
                 unclipped: Sequence[str] = ()) -> str:
    """Left-aligned columns under upper-case headers, each cell at most CELL_MAX_CHARS long
    except in the `unclipped` columns (a last column of few rows, like doctor's details);
    empty input gives just the header."""
    cells = [[_cell(row.get(col), sys.maxsize if col in unclipped else CELL_MAX_CHARS)
              for col in columns] for row in rows]
    headers = [col.upper() for col in columns]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines)
