"""Reading `git status --porcelain -z`: shared by the session's handoff (what changed) and the
supervisor's worktrees (is the tree clean enough to merge into)."""

from __future__ import annotations


def changed_paths(porcelain_z: bytes) -> list[str]:
    """Paths of `git status --porcelain -z` (a rename's second, old path is skipped)."""
    paths = []
    fields = porcelain_z.split(b"\0")
    index = 0
    while index < len(fields):
        entry = fields[index]
        index += 1
        if len(entry) < 4:
            continue
        paths.append(entry[3:].decode("utf-8", "replace"))
        if b"R" in entry[:2] or b"C" in entry[:2]:
            index += 1
    return paths
