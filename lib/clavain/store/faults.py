"""What a failed statement says about the workgraph store, for the code that must decide what to
do next: the store is damaged (stop at once, name the file and the fix), unavailable for now (a
server restarting, a connection lost, a busy lock: wait it out, bounded), or neither (the
statement itself failed: an error of the caller's).

`wait_out` is the one bounded wait: the supervisor at start and between claims, and its workers
recording a result, all wait for the store the same way and for the same configured time
(`store.outageWaitSeconds`), with a countdown, then stop with the cause.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from clavain.errors import ClavainError

T = TypeVar("T")

DAMAGED, UNAVAILABLE = "damaged", "unavailable"
DEFAULT_OUTAGE_WAIT_SECONDS = 120.0

# SQLite's words for a file that is not (or no longer) a valid database.
_DAMAGE_WORDS = ("malformed", "not a database", "database corruption", "disk image")
# SQLite's words for a file another process holds a moment too long.
_BUSY_WORDS = ("database is locked", "database table is locked", "database is busy")
# PostgreSQL SQLSTATEs of a server that is going away, coming back or full: class 08
# (connection exception), admin/crash shutdown, cannot connect now, too many connections,
# and the deadlock / serialization failures the server says to simply run again.
_PG_TRANSIENT = ("57P01", "57P02", "57P03", "53300", "40P01", "40001")


class StoreDamaged(ClavainError):
    """The workgraph database is damaged: nothing more may be claimed or written in it."""


def kind(exc: BaseException) -> str | None:
    """DAMAGED, UNAVAILABLE or None (see the module docstring)."""
    from clavain.store.postgres import StoreUnavailable

    if isinstance(exc, StoreDamaged):
        return DAMAGED
    if isinstance(exc, StoreUnavailable):
        return UNAVAILABLE if exc.transient else None
    module = type(exc).__module__ or ""
    text = str(exc).lower()
    if module.startswith(("sqlite3", "_sqlite3")):
        if any(word in text for word in _DAMAGE_WORDS):
            return DAMAGED
        if any(word in text for word in _BUSY_WORDS):
            return UNAVAILABLE
        return None
    if module.startswith("psycopg"):
        state = getattr(exc, "sqlstate", None) or ""
        if state.startswith("08") or state in _PG_TRANSIENT:
            return UNAVAILABLE
        if type(exc).__name__ in ("OperationalError", "InterfaceError") and not state:
            return UNAVAILABLE  # the connection went away (no server answer to classify)
    return None


def outage_seconds(cfg: dict[str, Any]) -> float:
    from clavain import config as config_mod

    return float(config_mod.get(cfg, "store.outageWaitSeconds", DEFAULT_OUTAGE_WAIT_SECONDS))


def wait_out(action: Callable[[], T], *, seconds: float,
             on_wait: Callable[[float, BaseException], None] | None = None,
             stopped: Callable[[], bool] | None = None) -> T:
    """Run `action`; while it fails because the store is unavailable, run it again (backing
    off to 2 s) until `seconds` have passed, telling `on_wait(seconds left, why)` before each
    pause. Raises the last failure once the time is up, `stopped()` says so, or the failure is
    not an outage."""
    deadline = time.monotonic() + seconds
    delay = 0.25
    while True:
        try:
            return action()
        except Exception as exc:
            left = deadline - time.monotonic()
            if kind(exc) != UNAVAILABLE or left <= 0 or (stopped is not None and stopped()):
                raise
            if on_wait is not None:
                on_wait(left, exc)
            time.sleep(min(delay, left))
            delay = min(delay * 2, 2.0)
