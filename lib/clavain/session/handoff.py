"""The handoff note, `.clavain/scratch/handoff.md`: what one session leaves the next.

SessionStart shows its first lines; Stop asks for it once per session, only when a sprint is
active and the working tree has uncommitted changes (the moment work would otherwise be lost
between sessions). `sprint.checkpoint.archive` takes it when the sprint ships or is abandoned,
so an old note never greets a later session. Stdlib only, and no `typing`: Stop runs after every
turn of every session.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from clavain.gitstatus import changed_paths
from clavain.paths import StatePaths

ASKED_NAME = "handoff-asked"
# "<sprint id> <session id>" per line: the sessions that ran a sprint command (start, done,
# resume) for that sprint. Only those are asked for a handoff: a session that merely opened the
# project while a sprint was active has nothing of the sprint to hand over.
WORKED_NAME = "sprint-sessions"
SHOWN_LINES = 40
LINE_CHARS = 200
MAX_READ_BYTES = 64 * 1024
ASKED_MAX_BYTES = 1 << 20
GIT_TIMEOUT_SECONDS = 5.0


def handoff_section(state: StatePaths, now: float | None = None) -> str:
    """The note's first lines (each whitespace-collapsed and clipped), with its age; '' when
    there is none, it is empty, or it is not a regular file."""
    from clavain.fsutil import read_regular

    raw = read_regular(state.handoff_note, MAX_READ_BYTES)
    if raw is None:
        return ""
    lines = [" ".join(line.split())[:LINE_CHARS]
             for line in raw.decode("utf-8", "replace").splitlines()[:SHOWN_LINES]]
    while lines and not lines[-1]:
        lines.pop()
    if not any(lines):
        return ""
    return (f"Handoff from the last session (.clavain/scratch/handoff.md, written "
            f"{_age(state.handoff_note, now)}):\n" + "\n".join(lines))


def _age(path: Path, now: float | None) -> str:
    try:
        seconds = max(0, (time.time() if now is None else now) - os.lstat(path).st_mtime)
    except OSError:
        return "at an unknown time"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit} ago"
    return "just now"


def tree_is_dirty(project: Path) -> bool:
    """Uncommitted changes outside `.clavain/` and besides Clavain's own `.gitignore` block;
    False outside a git repository or without git. `--no-optional-locks`: never take the
    index lock from under the user's or an agent's git command."""
    import subprocess  # only with a sprint active

    try:
        done = subprocess.run(
            ["git", "--no-optional-locks", "status", "--porcelain", "-z", "--", ".",
             ":(exclude).clavain"], cwd=project, capture_output=True,
            timeout=GIT_TIMEOUT_SECONDS, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    if done.returncode != 0:
        return False
    paths = changed_paths(done.stdout)
    if paths == [".gitignore"]:
        return not only_clavain_block(project)
    return bool(paths)


def only_clavain_block(project: Path) -> bool:
    """True when `.gitignore` differs from HEAD's only by the block `clavain init` appends."""
    import subprocess

    from clavain.project import GITIGNORE_MARKER

    try:
        current = (project / ".gitignore").read_text(encoding="utf-8")
        committed = subprocess.run(["git", "--no-optional-locks", "show", "HEAD:.gitignore"],
                                   cwd=project, capture_output=True,
                                   timeout=GIT_TIMEOUT_SECONDS, check=False)
    except (OSError, UnicodeDecodeError, subprocess.SubprocessError):
        return False
    before = committed.stdout.decode("utf-8", "replace") if committed.returncode == 0 else ""
    if GITIGNORE_MARKER not in current or GITIGNORE_MARKER in before:
        return False
    kept, skipping = [], False
    for line in current.splitlines():
        if line == GITIGNORE_MARKER:
            skipping = True
            continue
        if skipping and line.startswith("/"):
            continue
        skipping = False
        kept.append(line)
    return "\n".join(kept).strip() == before.strip()


def worked_on(state: StatePaths, sprint_id: str, session_id: str) -> bool:
    from clavain.fsutil import read_regular

    raw = read_regular(state.scratch / WORKED_NAME, ASKED_MAX_BYTES, from_end=True)
    line = f"{sprint_id} {session_id}".encode()
    return raw is not None and line in raw.splitlines()


def mark_worked(state: StatePaths, sprint_id: str, session_id: object) -> None:
    """Record that this session worked on the sprint (a no-op outside a session, or when it is
    recorded already)."""
    if not _usable_session(session_id) or worked_on(state, sprint_id, session_id):
        return
    from clavain.fsutil import open_inside, real_folder

    real_folder(state.root, state.scratch)
    with open_inside(state.root, state.scratch / WORKED_NAME, "ab") as handle:
        handle.write(f"{sprint_id} {session_id}\n".encode())


def _usable_session(session_id: object) -> bool:
    return isinstance(session_id, str) and 0 < len(session_id) <= 200 and not any(
        c in session_id for c in " \n\r")


def already_asked(state: StatePaths, session_id: str) -> bool:
    from clavain.fsutil import read_regular

    raw = read_regular(state.scratch / ASKED_NAME, ASKED_MAX_BYTES)
    return raw is not None and session_id.encode("utf-8") in raw.splitlines()


def mark_asked(state: StatePaths, session_id: str) -> None:
    from clavain.fsutil import open_inside, real_folder

    real_folder(state.root, state.scratch)
    with open_inside(state.root, state.scratch / ASKED_NAME, "ab") as handle:
        handle.write(session_id.encode("utf-8") + b"\n")


def ask_for_handoff(state: StatePaths, payload: dict) -> str | None:
    """The reason a Stop should be blocked with, or None to let the session stop. Asks at most
    once per session: the first ask is recorded before it is returned."""
    session_id = payload.get("session_id")
    if payload.get("stop_hook_active") or not _usable_session(session_id):
        return None
    from clavain.sprint import checkpoint

    try:
        active = checkpoint.read(state)
    except checkpoint.DamagedCheckpoint:
        return None
    if not active or active["current_step"] is None \
            or not worked_on(state, active["sprint_id"], session_id) \
            or already_asked(state, session_id) or not tree_is_dirty(state.project):
        return None
    mark_asked(state, session_id)
    return (f"Clavain: sprint {active['sprint_id']} is at step {active['current_step']} and the "
            "working tree has uncommitted changes. Before you stop, write a handoff note to "
            ".clavain/scratch/handoff.md (at most 40 lines: what is done, what is next, what is "
            "uncommitted and why); the next session starts from it. Asked once per session.")
