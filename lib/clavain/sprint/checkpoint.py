"""The active sprint's checkpoint, `.clavain/checkpoint.json`: read, changed under a lock,
written atomically, archived when the sprint ends, set aside when it is damaged.

Stdlib only, and cheap to import: `read_in` is the one reader of the active checkpoint, and the
PreToolUse hook and the status line ask it on every call (so json, subprocess, pathlib, datetime
and typing are imported where they are used, not here). Every change is a read-modify-write
inside an exclusive `flock` on `checkpoint.json.lock`, so two writers (two sessions, a hook
and the CLI) never lose each other's step; the file is replaced atomically, so a reader sees
the old or the new checkpoint, never half of one. Whatever acts on a sprint (a step recorded,
the archive, an abandon) re-reads the file under that lock and acts only if it still holds the
same sprint: a stale copy never deletes a newer sprint's checkpoint. Reading takes no lock, so
read-only commands work on a read-only `.clavain/`. A checkpoint that does not match
`schemas/checkpoint.schema.json` is refused with one line naming what is wrong and the fix.
"""

from __future__ import annotations

import os

from clavain.errors import ClavainError
from clavain.fsutil import open_inside, read_json_object, real_folder, write_atomic

TYPE_CHECKING = False
if TYPE_CHECKING:
    import contextlib
    import subprocess
    from collections.abc import Callable, Iterator
    from pathlib import Path
    from typing import Any

    from clavain.paths import StatePaths

SCHEMA = "checkpoint.schema.json"
DECISIONS_KEPT = 5
MAX_BYTES = 1 << 20
# A sprint's id (and its graph's, and its runs/ folder's) is `sprint-<UTC stamp>-<hex>`.
SPRINT_ID_PREFIX = "sprint"


class DamagedCheckpoint(ClavainError):
    """checkpoint.json is there but not a checkpoint (not a regular file, too big, unreadable,
    bad bytes, bad JSON, wrong shape): `problem` says what is wrong; the message adds the fix.
    A wrong shape is put in words only when asked (that imports jsonschema), so a hook that
    only needs "damaged" pays nothing for it."""

    FIX = ("`clavain sprint abandon` sets it aside (kept as checkpoint.corrupt-<time>.json) so a "
           "new sprint can start")

    def __init__(self, problem: str | Callable[[], str]) -> None:
        self._problem = problem
        super().__init__("")

    @property
    def problem(self) -> str:
        if not isinstance(self._problem, str):
            self._problem = self._problem()
        return self._problem

    def __str__(self) -> str:
        return f"{self.problem}; {self.FIX}"


def read_in(root: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The active sprint's checkpoint in state folder `root`: the one reader, for the CLI and
    the hooks alike. None when there is no checkpoint file (no sprint is active); anything else
    that is not a checkpoint raises DamagedCheckpoint, whatever the reason: a FIFO, device or
    symlink there (never opened, so never waited on), a file over MAX_BYTES, one that cannot be
    read, bad UTF-8, bad JSON, or a document that does not match the schema. Never OSError."""
    from clavain.fsutil import UnsafePathError, open_regular, read_up_to

    path = os.path.join(os.fspath(root), "checkpoint.json")
    try:
        fd = open_regular(path, os.O_RDONLY)  # never blocks, never follows a symlink
    except FileNotFoundError:
        return None
    except UnsafePathError:
        raise DamagedCheckpoint(f"{path} is not a regular file") from None
    except OSError as exc:
        raise DamagedCheckpoint(f"{path} cannot be read ({exc.strerror or exc})") from None
    try:
        raw = read_up_to(fd, MAX_BYTES + 1)
    except OSError as exc:
        raise DamagedCheckpoint(f"{path} cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if len(raw) > MAX_BYTES:
        raise DamagedCheckpoint(f"{path} is over {MAX_BYTES} bytes, no checkpoint")
    from clavain.schema_check import explain, schema, valid
    from clavain.textio import BadText, decode, load_json

    try:
        document = load_json(decode(raw, path), path)
    except BadText as exc:
        raise DamagedCheckpoint(str(exc)) from None
    rules = schema(SCHEMA)
    if not valid(document, rules, rules):
        raise DamagedCheckpoint(lambda: explain(path, document, rules, SCHEMA, one_line=True))
    return document


def read(state: StatePaths) -> dict[str, Any] | None:
    """`read_in(state.root)`: the active sprint's checkpoint, None when no sprint is active."""
    return read_in(state.root)


def active_sprint_id(state: StatePaths, notes: list[str]) -> str | None:
    """The active sprint's id for what a hook files under it (None outside a sprint, or when
    the checkpoint cannot be read: that is appended to `notes` for the hook's log line)."""
    try:
        active = read(state)
    except DamagedCheckpoint as exc:
        notes.append(f"sprint checkpoint unreadable, filed under no sprint: {exc}")
        return None
    return active["sprint_id"] if active else None


def graph_of(checkpoint: dict[str, Any] | None) -> str:
    """The sprint's workgraph: its own, or the default graph for a checkpoint made before one
    graph per sprint."""
    from clavain.workgraph.graphs import DEFAULT_GRAPH

    return (checkpoint or {}).get("graph_id") or DEFAULT_GRAPH


def write(state: StatePaths, checkpoint: dict[str, Any]) -> None:
    from clavain import fastjson
    from clavain.clock import now_iso
    from clavain.schema_check import check

    checkpoint = {**checkpoint, "updated_at": now_iso()}
    problem = check(checkpoint, SCHEMA, "checkpoint")
    if problem:  # a bug of ours, not bad input: never write a file the next read refuses
        raise ValueError(problem)
    write_atomic(state.sprint_checkpoint, fastjson.dumps(checkpoint, indent=2) + "\n",
                 inside=state.root)


# How long a change waits for another writer: a sprint command's change takes milliseconds,
# and a lock held longer is someone holding it on purpose (a read-only open will do).
LOCK_SECONDS = 30.0


def locked(state: StatePaths) -> contextlib.AbstractContextManager[None]:
    """An exclusive flock on the checkpoint's lock file for one read-modify-write (released by
    the kernel if the holder dies), waited for LOCK_SECONDS at most, then ClavainError naming
    the file: nothing is changed. Not re-entrant: take it once per change."""
    import contextlib  # here: the PreToolUse hook reads the checkpoint and never locks it

    return contextlib.contextmanager(_locked)(state)


def _locked(state: StatePaths) -> Iterator[None]:
    from clavain.fsutil import lock_within

    lock = state.root / "checkpoint.json.lock"
    with open_inside(state.root, lock, "ab") as handle:
        lock_within(handle.fileno(), lock, LOCK_SECONDS)
        yield


def change(state: StatePaths, edit: Callable[[dict[str, Any] | None], dict[str, Any] | None]
           ) -> dict[str, Any] | None:
    """Apply `edit` to the current checkpoint under the lock and write what it returns (None:
    leave the file as it is). Returns the checkpoint as written."""
    with locked(state):
        updated = edit(read(state))
        if updated is not None:
            write(state, updated)
        return updated


def require_same(current: dict[str, Any] | None, sprint_id: str) -> dict[str, Any]:
    """The checkpoint read under the lock, if it is still sprint `sprint_id`'s."""
    if current is None or current["sprint_id"] != sprint_id:
        now = f"sprint {current['sprint_id']} is active" if current else "no sprint is active"
        raise ClavainError(f"sprint {sprint_id} changed while this command ran ({now}); "
                           "nothing was recorded: `clavain sprint status` shows where it stands")
    return current


def archive_locked(state: StatePaths, checkpoint: dict[str, Any], outcome: str) -> str:
    """Move the checkpoint (and the sprint's verdicts and handoff note) under
    `.clavain/runs/<sprint>/`; the sprint is no longer active. The caller holds the lock and has
    just read `checkpoint` under it. Returns the archive folder, relative to the project."""
    import contextlib
    import json

    from clavain.clock import now_iso

    folder = state.runs / checkpoint["sprint_id"]
    real_folder(state.root, folder)
    write_atomic(folder / "checkpoint.json",
                 json.dumps({**checkpoint, "outcome": outcome, "archived_at": now_iso()},
                            indent=2) + "\n", inside=state.root)
    move_verdicts(state, folder / "verdicts")
    with contextlib.suppress(FileNotFoundError):
        os.replace(state.handoff_note, folder / state.handoff_note.name)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(state.sprint_checkpoint)
    return os.path.relpath(folder, state.project)


def last_archived(state: StatePaths) -> tuple[Path, dict[str, Any]] | None:
    """(the archived checkpoint of the sprint that ended last, its contents), or None."""
    from pathlib import Path

    found = []
    try:
        entries = list(os.scandir(state.runs))
    except OSError:
        entries = []
    for entry in entries:
        path = os.path.join(entry.path, "checkpoint.json")
        if not entry.name.startswith(f"{SPRINT_ID_PREFIX}-"):
            continue
        # A regular file or nothing: a FIFO left here must not hang `sprint start`.
        archived = read_json_object(path)
        if archived is not None:
            found.append((str(archived.get("archived_at", "")), path, archived))
    if not found:
        return None
    _, path, archived = max(found, key=lambda item: (item[0], item[1]))
    return Path(path), archived


def set_aside(state: StatePaths) -> str | None:
    """Move a damaged checkpoint to `checkpoint.corrupt-<UTC>.json` beside it (nothing is
    deleted: a person may want to read it). The caller holds the lock. Returns the new name,
    relative to the project, or None when there was no file."""
    from clavain.clock import utc_stamp

    stem = f"checkpoint.corrupt-{utc_stamp().replace(':', '')}"
    target, n = state.root / f"{stem}.json", 1
    while target.exists():  # two set aside within a second
        n += 1
        target = state.root / f"{stem}-{n}.json"
    try:
        os.replace(state.sprint_checkpoint, target)
    except FileNotFoundError:
        return None
    return os.path.relpath(target, state.project)


def set_aside_files(state: StatePaths) -> list[str]:
    """Damaged checkpoints set aside so far (for `clavain doctor`)."""
    try:
        return sorted(entry.name for entry in os.scandir(state.root)
                      if entry.name.startswith("checkpoint.corrupt-"))
    except OSError:
        return []


def move_verdicts(state: StatePaths, into: Any) -> int:
    """Move every file of `.clavain/verdicts/` (verdicts, answers, resolutions, pending token
    markers) into `into`; returns how many."""
    from clavain.verdicts.files import FOLDER_SUFFIXES

    source = state.verdicts
    if not source.is_dir() or source.is_symlink():
        return 0
    moved = 0
    for path in sorted(source.iterdir()):
        if path.is_file() and path.suffix in FOLDER_SUFFIXES:
            real_folder(state.root, into)
            os.replace(path, into / path.name)
            moved += 1
    return moved


def _run_git(project: Any, *args: str) -> subprocess.CompletedProcess[str] | None:
    import subprocess

    try:
        return subprocess.run(["git", "--no-optional-locks", *args], cwd=project,
                              capture_output=True, text=True, timeout=10,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None


def _git(project: Any, *args: str) -> str | None:
    """The command's output, or None when it failed or printed nothing."""
    result = _run_git(project, *args)
    out = result.stdout.strip() if result else ""
    return out if result and result.returncode == 0 and out else None


def git_head(project: Any) -> str | None:
    """HEAD of the project's git repository, or None outside one (or without git)."""
    return _git(project, "rev-parse", "HEAD")


def git_branch(project: Any) -> str | None:
    """The checked-out branch, or None when HEAD is detached or outside git."""
    return _git(project, "symbolic-ref", "--quiet", "--short", "HEAD")


def commits_since(project: Any, sha: str) -> int | None:
    """How many commits HEAD is ahead of `sha`, or None when `sha` is not an ancestor of HEAD
    (history rewritten, another line of work)."""
    ancestor = _run_git(project, "merge-base", "--is-ancestor", sha, "HEAD")
    if ancestor is None or ancestor.returncode != 0:
        return None
    count = _git(project, "rev-list", "--count", f"{sha}..HEAD")
    return int(count) if count and count.isdigit() else None


def remember(decisions: list[str], decision: str | None) -> list[str]:
    """The last DECISIONS_KEPT decisions, newest last."""
    if not decision or not decision.strip():
        return decisions
    return [*decisions, " ".join(decision.split())][-DECISIONS_KEPT:]
