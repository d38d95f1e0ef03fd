"""Timestamps, in the two forms Clavain writes: ISO-8601 UTC with milliseconds for stored state
(sorts as text), and whole seconds for log lines and verdicts. Stdlib only."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone


def now_iso(at: datetime | None = None) -> str:
    """`2026-11-21T20:30:00.123Z`."""
    moment = (at or datetime.now(timezone.utc)).astimezone(timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def later_iso(seconds: float, at: datetime | None = None) -> str:
    """`seconds` from now (or `at`); a wait past the calendar's end is the calendar's end."""
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
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)
