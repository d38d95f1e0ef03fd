"""Reading a rate or usage limit from text: the fallback when `claude -p` JSON (or a configured
runner's output) names a limit only in words — "429 Too Many Requests", "try again in 30
seconds", "You've hit your 5-hour limit · resets 3:59pm (UTC)", "resets Nov 27, 10:32pm",
an ISO time, or the older `…limit reached|<epoch>`."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

# A `resets 3pm` time that has just passed is the reset happening now, not tomorrow's.
JUST_PASSED = timedelta(minutes=5)


def from_epoch(value: Any) -> datetime | None:
    """An epoch in seconds or milliseconds (a number or digits), else None."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        return None
    seconds = value / 1000 if value > 1e12 else value  # milliseconds, as some hosts send
    try:
        return datetime.fromtimestamp(seconds, timezone.utc)
    except (OverflowError, OSError, ValueError):
        return None


_LIMIT_LINE = re.compile(
    r"rate[ _-]?limit|usage limit|hit your .{0,40}limit|too many requests|rate_limit_error"
    r"|\(429\)|\b(?:http|status|error|code|api error)[\s:]*429\b|\b429\s+too many", re.I)


def limit_line(text: str) -> str | None:
    for line in text.splitlines():
        if _LIMIT_LINE.search(line):
            return line
    return None


_UNIT_SECONDS = {"s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
                 "m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60,
                 "h": 3600, "hr": 3600, "hrs": 3600, "hour": 3600, "hours": 3600}
_RETRY_AFTER = re.compile(
    r"(?:try again|retry|resets?|available again)\s+(?:in|after)\s+(?:about\s+|~)?"
    r"(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>seconds?|secs?|s|minutes?|mins?|m|hours?|hrs?|h)\b"
    r"|retry-after[\s:=]+(?P<header>\d+(?:\.\d+)?)", re.I)


def retry_after(text: str) -> float | None:
    match = _RETRY_AFTER.search(text)
    if match is None:
        return None
    if match.group("header"):
        return float(match.group("header"))
    return float(match.group("n")) * _UNIT_SECONDS[match.group("unit").lower()]


_MONTHS = {name: number for number, name in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1)}
# Claude Code's old `Claude AI usage limit reached|1745000000`.
_PIPE_EPOCH = re.compile(r"limit reached\|(\d{9,13})", re.I)
_RESET_ISO = re.compile(
    r"\breset(?:s|ting)?\s+(?:at|on)?\s*"
    r"(?P<iso>\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?"
    r"(?:\s*(?:Z|UTC|[+-]\d{2}:?\d{2}))?)", re.I)
_RESET_CLOCK = re.compile(
    r"\breset(?:s|ting)?\s+(?:at\s+|on\s+)?"
    r"(?:(?P<month>jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+"
    r"(?P<day>\d{1,2})(?:st|nd|rd|th)?,?\s*(?:(?P<year>\d{4}),?\s*)?(?:at\s+)?)?"
    r"(?:(?P<hour>\d{1,2})(?::(?P<minute>\d{2}))?\s*(?P<ampm>[ap]\.?m\.?)"
    r"|(?P<hour24>\d{1,2}):(?P<minute24>\d{2}))?"
    r"(?:\s*\((?P<zone>[A-Za-z0-9_+\-/ ]{1,64})\))?", re.I)


def reset_from_text(text: str, now: datetime) -> datetime | None:
    match = _PIPE_EPOCH.search(text)
    if match:
        return from_epoch(int(match.group(1)))
    match = _RESET_ISO.search(text)
    if match:
        found = _from_iso(match.group("iso"))
        if found is not None:
            return found
    for match in _RESET_CLOCK.finditer(text):
        found = _from_clock(match, now)
        if found is not None:
            return found
    return None


def _from_iso(value: str) -> datetime | None:
    cleaned = re.sub(r"\s*(Z|UTC)$", "+00:00", value.strip(), flags=re.I)
    cleaned = re.sub(r"\s+([+-]\d{2}):?(\d{2})$", r"\1:\2", cleaned)
    try:
        moment = datetime.fromisoformat(cleaned.replace(" ", "T", 1))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc)


def _zone(name: str | None, now: datetime) -> tzinfo:
    """The zone a clock time is in: the one named in brackets, else `now`'s (the runner ran on
    this machine, so it printed in this machine's zone)."""
    if name:
        cleaned = name.strip()
        if cleaned.upper() in ("UTC", "GMT", "Z"):
            return timezone.utc
        try:
            return ZoneInfo(cleaned)
        except (ZoneInfoNotFoundError, ValueError):
            pass
    local = now.astimezone().tzinfo
    return local or timezone.utc


def _from_clock(match: re.Match[str], now: datetime) -> datetime | None:
    month, hour = match.group("month"), match.group("hour") or match.group("hour24")
    if month is None and hour is None:
        return None
    zone = _zone(match.group("zone"), now)
    local_now = now.astimezone(zone)
    if match.group("hour"):
        hour_value = int(match.group("hour")) % 12
        if match.group("ampm").lower().startswith("p"):
            hour_value += 12
        minute = int(match.group("minute") or 0)
    elif match.group("hour24"):
        hour_value, minute = int(match.group("hour24")), int(match.group("minute24"))
    else:
        hour_value, minute = 0, 0
    try:
        if month is None:
            moment = local_now.replace(hour=hour_value, minute=minute, second=0, microsecond=0)
            if moment < local_now - JUST_PASSED:
                moment = _same_clock_next_day(moment, zone)
        else:
            year = int(match.group("year") or local_now.year)
            moment = datetime(year, _MONTHS[month[:3].lower()], int(match.group("day")),
                              hour_value, minute, tzinfo=zone)
            if match.group("year") is None and moment < local_now - timedelta(days=1):
                moment = moment.replace(year=year + 1)  # "resets Jan 3" said in December
    except ValueError:
        return None
    return moment.astimezone(timezone.utc)


def _same_clock_next_day(moment: datetime, zone: tzinfo) -> datetime:
    following = moment.date() + timedelta(days=1)
    return datetime(following.year, following.month, following.day, moment.hour, moment.minute,
                    tzinfo=zone)
