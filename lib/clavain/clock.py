"""Timestamps, in the two forms Clavain writes: ISO-8601 UTC with milliseconds for stored state
(sorts as text), and whole seconds for log lines and verdicts. The one writer of each: nothing
else formats them. Stdlib only, and `datetime` only where it is used: the PreToolUse hook stamps
every call with `iso_at` and never needs it."""

from __future__ import annotations

import os
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from datetime import datetime


def now_iso(at: datetime | None = None) -> str:
    """`2026-11-21T20:30:00.123Z`: now, or the moment `at`."""
    if at is None:  # no `datetime` import: the hooks that stamp a record need only now
        return iso_at(time.time())
    from datetime import timezone

    moment = at.astimezone(timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def iso_at(seconds: float) -> str:
    """`now_iso`'s form for an epoch time (`time.time()`), without `datetime`."""
    whole = int(seconds)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + \
        f".{int((seconds - whole) * 1000):03d}Z"


def later_iso(seconds: float, at: datetime | None = None) -> str:
    """`seconds` from now (or `at`); a wait past the calendar's end is the calendar's end."""
    from datetime import datetime, timedelta, timezone

    start = at or datetime.now(timezone.utc)
    try:
        return now_iso(start + timedelta(seconds=seconds))
    except OverflowError:
        return now_iso(datetime.max.replace(tzinfo=timezone.utc))


def utc_stamp() -> str:
    """`2026-11-21T20:30:00Z`."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def parse_iso(text: str) -> datetime:
    """A time Clavain wrote (`…Z` or with an offset); ValueError for anything else."""
    from datetime import datetime, timezone

    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def launcher_started() -> float | None:
    """When bin/clavain-hook started this call, on the `time.perf_counter()` clock: from the
    CLAVAIN_HOOK_STARTED epoch it exports (bash's EPOCHREALTIME), so a call's recorded cost
    includes the interpreter start. None when absent or implausible (not within the last
    minute)."""
    stamp = os.environ.get("CLAVAIN_HOOK_STARTED", "").replace(",", ".")
    try:
        age = time.time() - float(stamp)
    except ValueError:
        return None
    return time.perf_counter() - age if 0 <= age < 60 else None
