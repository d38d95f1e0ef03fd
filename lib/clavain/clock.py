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


def earlier_iso(stamp: str, seconds: int) -> str:
    """A time Clavain wrote, whole `seconds` earlier, in `now_iso`'s form. Without `datetime`
    for `now_iso`'s own form (SubagentStop measures from a run's start on every reviewer):
    milliseconds exact, as `datetime` would give them; any other form through `datetime`."""
    moment = _epoch_ms(stamp)
    if moment is not None:
        moment -= seconds * 1000
        try:  # before 1970 on some systems, or past what `time` holds: `datetime` below
            at = time.gmtime(moment // 1000)
        except (OverflowError, OSError, ValueError):
            at = None
        if at is not None and at.tm_year >= 1000:
            return time.strftime("%Y-%m-%dT%H:%M:%S", at) + f".{moment % 1000:03d}Z"
    from datetime import timedelta

    return now_iso(parse_iso(stamp) - timedelta(seconds=seconds))


def _epoch_ms(stamp: str) -> int | None:
    """`2026-11-21T20:30:00.123Z` (no fraction, or 3 or 6 digits; years 1000-9999) as epoch
    milliseconds, the fraction cut as `now_iso` cuts it; None for anything else."""
    date, _, clock = stamp.partition("T")
    if len(date) != 10 or not clock.endswith("Z") or len(clock) not in (9, 13, 16):
        return None
    fields = (date[:4], date[5:7], date[8:], clock[:2], clock[3:5], clock[6:8])
    fraction = clock[9:-1]
    if (date[4], date[7], clock[2], clock[5]) != ("-", "-", ":", ":") or \
            not all(part.isascii() and part.isdigit() for part in (*fields, fraction or "0")) or \
            (fraction and clock[8] != "."):
        return None
    year, month, day, hour, minute, second = map(int, fields)
    if year < 1000:
        return None
    # Days since 1970-01-01 in the proleptic Gregorian calendar (H. Hinnant's days_from_civil).
    shifted = year - (month <= 2)
    era, year_of_era = divmod(shifted, 400)
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    days = era * 146097 + year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + \
        day_of_year - 719468
    seconds = days * 86400 + hour * 3600 + minute * 60 + second
    try:
        if tuple(time.gmtime(seconds))[:6] != (year, month, day, hour, minute, second):
            return None  # 30 February, 25 o'clock: not a time at all
    except (OverflowError, OSError, ValueError):
        return None
    return seconds * 1000 + int((fraction or "0")[:3].ljust(3, "0"))


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
