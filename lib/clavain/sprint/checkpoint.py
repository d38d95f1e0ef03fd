"""The active sprint's checkpoint, `.clavain/checkpoint.json`: read, changed under a lock,
written atomically, archived when the sprint ends.

Stdlib only (SessionStart and PreCompact read it). Every change is a read-modify-write inside an
exclusive `flock` on `checkpoint.json.lock`, so two writers (two sessions, a hook and the CLI)
never lose each other's step; the file is replaced atomically, so a reader sees the old or the
new checkpoint, never half of one. A checkpoint that does not match
`schemas/checkpoint.schema.json` is refused with one line naming what is wrong.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Callable
from typing import Any

from clavain.clock import now_iso
from clavain.errors import ClavainError
from clavain.fsutil import open_inside, real_folder, write_atomic
from clavain.paths import StatePaths

SCHEMA = "checkpoint.schema.json"
DECISIONS_KEPT = 5


def read(state: StatePaths) -> dict[str, Any] | None:
    """The active sprint's checkpoint, or None when no sprint is active."""
    from clavain.schema_check import check
    from clavain.textio import BadText, decode, load_json

    path = state.sprint_checkpoint
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except FileNotFoundError:
        return None
    try:
        document = load_json(decode(raw, str(path)), str(path))
    except BadText as exc:
        raise ClavainError(f"{exc}; `clavain sprint abandon` sets it aside") from None
    problem = check(document, SCHEMA, str(path))
    if problem:
        raise ClavainError(f"{problem}; `clavain sprint abandon` sets it aside")
    return document


def write(state: StatePaths, checkpoint: dict[str, Any]) -> None:
    from clavain.schema_check import check

    checkpoint = {**checkpoint, "updated_at": now_iso()}
    problem = check(checkpoint, SCHEMA, "checkpoint")
    if problem:  # a bug of ours, not bad input: never write a file the next read refuses
        raise ValueError(problem)
    write_atomic(state.sprint_checkpoint, json.dumps(checkpoint, indent=2) + "\n",
                 inside=state.root)


class _Locked:
    """An exclusive flock on the checkpoint's lock file for one read-modify-write."""

    def __init__(self, state: StatePaths) -> None:
        self.state = state
        self.handle: Any = None

    def __enter__(self) -> None:
        import fcntl

        self.handle = open_inside(self.state.root, self.state.root / "checkpoint.json.lock", "ab")
        fcntl.flock(self.handle.fileno(), fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        self.handle.close()  # closing releases the flock


def change(state: StatePaths, edit: Callable[[dict[str, Any] | None], dict[str, Any] | None]
           ) -> dict[str, Any] | None:
    """Apply `edit` to the current checkpoint under the lock and write what it returns (None:
    leave the file as it is). Returns the checkpoint as written."""
    with _Locked(state):
        updated = edit(read(state))
        if updated is not None:
            write(state, updated)
        return updated


def archive(state: StatePaths, checkpoint: dict[str, Any], outcome: str) -> str:
    """Move the checkpoint (and the sprint's verdicts and handoff note) under
    `.clavain/runs/<sprint>/`; the sprint is no longer active. Returns the archive folder,
    relative to the project."""
    folder = state.runs / checkpoint["sprint_id"]
    real_folder(state.root, folder)
    with _Locked(state):
        write_atomic(folder / "checkpoint.json",
                     json.dumps({**checkpoint, "outcome": outcome, "archived_at": now_iso()},
                                indent=2) + "\n", inside=state.root)
        move_verdicts(state, folder / "verdicts")
        with contextlib.suppress(FileNotFoundError):
            os.replace(state.handoff_note, folder / state.handoff_note.name)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(state.sprint_checkpoint)
    return os.path.relpath(folder, state.project)


def move_verdicts(state: StatePaths, into: Any) -> int:
    """Move every verdict pair from `.clavain/verdicts/` into `into`; returns how many files."""
    source = state.verdicts
    if not source.is_dir() or source.is_symlink():
        return 0
    moved = 0
    for path in sorted(source.iterdir()):
        if path.is_file() and path.suffix in (".json", ".md"):
            real_folder(state.root, into)
            os.replace(path, into / path.name)
            moved += 1
    return moved


def git_head(project: Any) -> str | None:
    """HEAD of the project's git repository, or None outside one (or without git)."""
    try:
        result = subprocess.run(["git", "rev-parse", "HEAD"], cwd=project, capture_output=True,
                                text=True, timeout=10, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    head = result.stdout.strip()
    return head if result.returncode == 0 and head else None


def remember(decisions: list[str], decision: str | None) -> list[str]:
    """The last DECISIONS_KEPT decisions, newest last."""
    if not decision or not decision.strip():
        return decisions
    return [*decisions, " ".join(decision.split())][-DECISIONS_KEPT:]
