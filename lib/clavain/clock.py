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
    parts = stamp_parts(stamp) if stamp.isascii() else None
    if parts is None or parts[7] is not None or len(parts[6] or "") not in (0, 3, 6):
        return None
    year, month, day, hour, minute, second = map(int, parts[:6])
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
    return seconds * 1000 + int((parts[6] or "0")[:3].ljust(3, "0"))


def stamp_parts(text: str) -> tuple[str | None, ...] | None:
    """The fields of a stored time as `verdicts.files.TIMESTAMP_PATTERN` allows it, read
    without `re`: year, month, day, hour, minute, second, the fraction's digits (or None),
    then the offset's sign, hours and minutes (None for `Z`); None for anything else."""
    fields = tuple(text[at:at + 4 if at == 0 else at + 2] for at in (0, 5, 8, 11, 14, 17))
    if len(text) < 20 or (text[4], text[7], text[10], text[13], text[16]) != \
            ("-", "-", "T", ":", ":") or not all(field.isdecimal() for field in fields):
        return None
    at = 19
    fraction = None
    if text[at] == ".":
        end = at + 1
        while end < len(text) and text[end].isdecimal():
            end += 1
        if end == at + 1:
            return None
        fraction, at = text[at + 1:end], end
    zone = text[at:]
    if zone == "Z":
        return (*fields, fraction, None, None, None)
    if len(zone) == 6 and zone[0] in "+-" and zone[3] == ":" and zone[1:3].isdecimal() \
            and zone[4:].isdecimal():
        return (*fields, fraction, zone[0], zone[1:3], zone[4:])
    return None


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
