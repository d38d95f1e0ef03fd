"""Where the loop's limits live, so that no fresh start gives them back: one calls-per-hour
window for the whole project (every `clavain loop` run and every `/clavain:loop` session counts
against it) and one circuit breaker per loop task, in `.clavain/loops/limits/` — not in a run's
folder, so a new run id, a restart or a deleted run folder starts where the last run left off.
Only a person empties the window or closes a breaker (`clavain loop --reset-rate`,
`--reset-circuit`, both asking `clavain.authority`).

A loop's task is what it works toward: the workgraph it works on and, for `/clavain:loop`, the
task the person typed (whitespace collapsed). The automation mode and the iteration cap are
not part of it: changing them must not hand out a fresh breaker.

Every read-modify-write of these files holds an exclusive lock on `<file>.lock` (flock, released
by the kernel if the holder dies), so two loops recording at once lose nothing. The lock is
waited for LOCK_SECONDS at most: anyone may hold it (a read-only open will do), and the Stop
hook must answer well inside its limit; past that the caller gets a ClavainError and the loop
ends rather than going on uncounted. Stdlib only: the Stop hook uses it for a session's loop.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

LIMITS_FOLDER = ("loops", "limits")
CALLS_NAME = "calls.json"
KEY_CHARS = 16
# Two locks in one Stop (the breaker's, the window's): both waits fit the Stop hook's margin
# past its checks (session_loop.CHECKS_SECONDS).
LOCK_SECONDS = 5.0
_KEY = re.compile(rf"[0-9a-f]{{{KEY_CHARS}}}")


def limits_dir(state: Any) -> Path:
    return Path(state.root).joinpath(*LIMITS_FOLDER)


def calls_path(state: Any) -> Path:
    """The project's calls-per-hour window."""
    return limits_dir(state) / CALLS_NAME


def task_text(task: str | None) -> str:
    return " ".join((task or "").split())


def _graph(graph_id: str | None) -> str:
    """No database yet means the default graph: the run that creates the database (its budget
    does) must not turn the next run of the same work into another task."""
    from clavain.workgraph.graphs import DEFAULT_GRAPH

    return graph_id or DEFAULT_GRAPH


def task_key(graph_id: str | None, task: str | None = "") -> str:
    """A stable short id for a loop task (module docstring)."""
    text = f"graph:{_graph(graph_id)}\ntask:{task_text(task)}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:KEY_CHARS]


def task_label(graph_id: str | None, task: str | None = "") -> str:
    """The task in a few words, for a person reading a breaker's status."""
    text = task_text(task)
    where = f"the checks and graph {_graph(graph_id)}"
    return f"{text[:60]!r} on {where}" if text else where


def checked_key(key: object) -> str:
    """`key` when it is a task key (it names a file), else ClavainError."""
    from clavain.errors import ClavainError

    if not isinstance(key, str) or not _KEY.fullmatch(key):
        raise ClavainError(f"loop task key {str(key)[:40]!r} is not {KEY_CHARS} hex digits")
    return key


def breaker_path(state: Any, key: str) -> Path:
    """The circuit breaker of one loop task."""
    return limits_dir(state) / f"breaker-{checked_key(key)}.json"


@contextlib.contextmanager
def locked(root: Path, path: Path) -> Iterator[None]:
    """An exclusive lock for one read-modify-write of `path` (inside the state folder `root`).
    Not re-entrant. Without fcntl (not POSIX) filelock stands in."""
    from clavain.fsutil import open_inside

    lock = path.with_name(path.name + ".lock")
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        from filelock import FileLock

        from clavain.fsutil import real_folder

        real_folder(root, lock.parent)
        with FileLock(str(lock), timeout=LOCK_SECONDS):
            yield
        return
    from clavain.fsutil import lock_within

    with open_inside(root, lock, "ab") as handle:
        lock_within(handle.fileno(), lock, LOCK_SECONDS)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
