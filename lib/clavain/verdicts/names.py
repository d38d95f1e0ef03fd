"""How a verdict file's name splits: `<agent>--<dispatch>` (`files` makes the names). Apart
from `files` so that SessionStart, which only reads names from the folder, never imports the
verdict parser and the `re` its patterns need."""

from __future__ import annotations

# Between the agent's and the dispatch's part of a file name. Safe names never hold two dashes
# in a row, so a name splits back unambiguously.
DISPATCH_SEPARATOR = "--"


def split_name(stem: str) -> tuple[str, str | None]:
    """`clavain-reviewer-safety--a1` → ("clavain-reviewer-safety", "a1"); an old
    `clavain-reviewer-safety` → ("clavain-reviewer-safety", None)."""
    agent, separator, dispatch = stem.partition(DISPATCH_SEPARATOR)
    return agent, (dispatch if separator else None)
