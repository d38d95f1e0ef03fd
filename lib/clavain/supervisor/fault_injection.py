"""The fault-injection seam of the supervisor, for its tests and `benchmarks/chaos.py`: a fault
raised (or the process killed) at a named point after a claim, to show that whatever happens
there, the claim is given back or finished and nothing runs twice.

Never active by default: only while `CLAVAIN_FAULT` is set, to comma-separated
`POINT:ACTION[:TIMES]` entries (TIMES: only the first N times the point is reached in this
process; default every time). Points, in the order a node passes them:

  after_claim     supervisor, the node claimed, its worker not started
  worker_start    worker, before anything
  runner_started  worker, the runner process running (its pid recorded)
  runner_ended    worker, the runner exited, nothing recorded
  before_merge    worker, the runner's work committed in its worktree, not merged
  after_merge     worker, merged into the project, not recorded
  before_record   worker, about to record the result
  after_record    worker, recorded, its worktree not removed yet

Actions: `raise` (a RuntimeError: a bug), `locked` (SQLite's "database is locked"),
`malformed` (SQLite's "database disk image is malformed"), `kill` (SIGKILL of this process).
"""

from __future__ import annotations

import os
import signal
import threading

FAULT_VARIABLE = "CLAVAIN_FAULT"
POINTS = ("after_claim", "worker_start", "runner_started", "runner_ended", "before_merge",
          "after_merge", "before_record", "after_record")

_seen: dict[str, int] = {}
_lock = threading.Lock()


class InjectedFault(RuntimeError):
    """A fault raised on purpose (CLAVAIN_FAULT)."""


def inject(point: str) -> None:
    """Raise (or die) if CLAVAIN_FAULT names `point`; nothing otherwise."""
    spec = os.environ.get(FAULT_VARIABLE)
    if not spec:
        return
    for entry in spec.split(","):
        parts = entry.strip().split(":")
        if len(parts) < 2 or parts[0] != point:
            continue
        with _lock:
            _seen[point] = count = _seen.get(point, 0) + 1
        if len(parts) > 2 and parts[2].isdigit() and count > int(parts[2]):
            continue
        _act(point, parts[1])


def _act(point: str, action: str) -> None:
    import sqlite3

    where = f"injected at {point}"
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if action == "locked":
        raise sqlite3.OperationalError(f"database is locked ({where})")
    if action == "malformed":
        raise sqlite3.DatabaseError(f"database disk image is malformed ({where})")
    raise InjectedFault(f"fault {where}")
