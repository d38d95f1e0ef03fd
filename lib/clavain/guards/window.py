"""The subscription's usage windows (5-hour, weekly), as the host last reported them, and the
share of them (`budgets.windowShareMax`, a percent) past which no new work starts.

Only the host's structured fields are read, never message text: the status line's payload
(`rate_limits.five_hour.used_percentage` 0-100, `resets_at` epoch seconds), a runner's
`rate_limit_event` (`rate_limit_info.utilization`, a fraction, per window under
`unifiedWindows`; `supervisor.claude_output.windows`) and StopFailure's `error`.

The latest reading of each window is kept in `.clavain/window.json` (one small JSON object,
replaced atomically, written only when a reading changed: the status line runs every 300 ms).
Within one window (the same reset, give or take `SAME_WINDOW_SECONDS`) the share only grows: an
idle session's status line keeps repeating an old figure, which must not lower a newer one.
A window whose reset has passed is no longer used. Two writers at once may lose one reading,
never tear the file; the next reading (the next refresh, the next runner) puts it back.

Readers never block and never raise on the file: a FIFO, a symlink, a huge or hand-written file
reads as no windows (`fsutil.read_json_object`). Stdlib only, imported lazily: the PreToolUse
hook asks `share_denial` on fan-out calls, the status line calls `record` on every refresh.
"""

from __future__ import annotations

import os
import time

FILE_NAME = "window.json"
VERSION = 1
# What each window is called, in a denial line and in the status line.
NAMES = {"five_hour": "5-hour", "seven_day": "weekly", "seven_day_opus": "weekly Opus",
         "seven_day_sonnet": "weekly Sonnet", "seven_day_overage_included": "weekly"}
SHORT = {"five_hour": "5h", "seven_day": "7d", "seven_day_opus": "7d opus",
         "seven_day_sonnet": "7d sonnet", "seven_day_overage_included": "7d"}
# The longest a window lasts (plus a margin): a reset further ahead than this is a hand-written
# or broken figure, and a headless run must not wait on it for a month.
LONGEST = {"five_hour": 6 * 3600}
LONGEST_OTHER = 8 * 86400
# Two readings of one window whose resets differ by this much or less are the same window.
SAME_WINDOW_SECONDS = 120
# Sources of a reading, as recorded.
STATUSLINE, RUNNER, STOP_FAILURE = "statusline", "runner", "stop_failure"
MAX_WINDOWS = 16  # a file listing more is not ours


def path(root: str) -> str:
    return os.path.join(root, FILE_NAME)


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if value == value and abs(value) != float("inf") else None


def reading(name: object, used_percent: object, resets_at: object, now: float
            ) -> dict | None:
    """{"used_percent", "resets_at"} when the figures are a window's (a known-looking name, a
    percent from 0 — over 100 counts as 100 —, a reset within the window's length from
    `now`), else None."""
    used, reset = _number(used_percent), _number(resets_at)
    if not isinstance(name, str) or not 0 < len(name) <= 64 or used is None or reset is None:
        return None
    if used < 0 or reset > now + LONGEST.get(name, LONGEST_OTHER):
        return None
    # Past 100 % is over the limit, not garbage: kept as 100, so it still denies.
    return {"used_percent": round(min(used, 100.0), 2), "resets_at": round(reset)}


def load(root: str) -> dict:
    """{"windows": {name: record}, "stop": record | None} as the file holds them; an entry that
    is not a window's figures is dropped, and a file that cannot be read safely (missing, a
    FIFO, a symlink, too big, not JSON) holds nothing."""
    from clavain.fsutil import read_json_object

    data = read_json_object(path(root), 64 << 10) or {}
    stored = data.get("windows")
    windows: dict = {}
    if isinstance(stored, dict) and len(stored) <= MAX_WINDOWS:
        for name, record in stored.items():
            if not isinstance(record, dict):
                continue
            # Validated against the reset itself: a stored reading is checked for shape here,
            # for being live in `current`.
            figures = reading(name, record.get("used_percent"), record.get("resets_at"),
                              _number(record.get("seen_at")) or 0.0)
            seen = _number(record.get("seen_at"))
            if figures is None or seen is None:
                continue
            source = record.get("source")
            windows[name] = {**figures, "source": source if isinstance(source, str) else "",
                             "seen_at": seen}
    stop = data.get("stop")
    if not (isinstance(stop, dict) and isinstance(stop.get("error"), str)
            and _number(stop.get("seen_at")) is not None):
        stop = None
    return {"windows": windows, "stop": stop}


def current(root: str, now: float) -> dict:
    """{name: {"used_percent", "resets_at", "source", "seen_at"}} of the windows still live
    at `now` (their reset not passed)."""
    return _live(load(root)["windows"], now)


def _live(windows: dict, now: float) -> dict:
    # A reset further ahead than the window lasts is a hand-written figure: not waited on.
    return {name: record for name, record in windows.items()
            if now < record["resets_at"] <= now + LONGEST.get(name, LONGEST_OTHER)}


def record(root: str, windows: dict, source: str, now: float) -> bool:
    """Merge readings `{name: {"used_percent", "resets_at"}}` from `source` into the file;
    whether it changed. Never raises for a bad reading (it is left out) — only for a state
    folder that cannot be written (OSError), which a caller on the hook path catches."""
    if not isinstance(windows, dict) or not windows:
        return False
    data = load(root)
    stored = _live(data["windows"], now)
    merged = dict(stored)
    for name, given in windows.items():
        if not isinstance(given, dict):
            continue
        figures = reading(name, given.get("used_percent"), given.get("resets_at"), now)
        if figures is None or figures["resets_at"] <= now:
            continue
        old = stored.get(name)
        if old is not None:
            gap = figures["resets_at"] - old["resets_at"]
            if abs(gap) <= SAME_WINDOW_SECONDS:
                if figures["used_percent"] <= old["used_percent"]:
                    continue  # the same window, no higher: an idle session's old figure
                figures["resets_at"] = max(figures["resets_at"], old["resets_at"])
            elif gap < 0:
                continue  # a reading of a window that has since been replaced
        merged[name] = {**figures, "source": source, "seen_at": round(now, 3)}
    if merged == data["windows"]:
        return False
    _write(root, {"version": VERSION, "windows": merged, "stop": data["stop"]})
    return True


def record_stop(root: str, error: str, session_id: object, now: float) -> bool:
    """The host stopped a turn on an API error (StopFailure's structured `error`). Kept for
    `clavain budget status`; it names no window and no reset, so it denies nothing."""
    data = load(root)
    stop = {"error": error[:64], "seen_at": round(now, 3),
            "session_id": session_id[:200] if isinstance(session_id, str) else None}
    _write(root, {"version": VERSION, "windows": data["windows"], "stop": stop})
    return True


def _write(root: str, value: dict) -> None:
    from pathlib import Path

    from clavain import fastjson
    from clavain.fsutil import write_atomic

    write_atomic(Path(path(root)), fastjson.dumps(value) + "\n", inside=Path(root),
                 create_root=False)


# ------------------------------------------------------------------ the share


def _share(limits: dict) -> float | None:
    share = limits.get("windowShareMax") if isinstance(limits, dict) else None
    if share is None or (isinstance(limits, dict) and limits.get("enabled") is False):
        return None
    return _number(share)


def over_share(root: str, limits: dict, now: float) -> list[tuple[str, dict]]:
    """The live windows at or over the share, the one that resets last first."""
    share = _share(limits)
    if share is None:
        return []
    over = [(name, rec) for name, rec in current(root, now).items()
            if rec["used_percent"] >= share]
    return sorted(over, key=lambda item: -item[1]["resets_at"])


def resume_at(root: str, limits: dict, now: float) -> float | None:
    """When every window past the share has reset (epoch seconds), or None when none is."""
    over = over_share(root, limits, now)
    return float(over[0][1]["resets_at"]) if over else None


def describe(name: str, rec: dict, share: float, now: float) -> str:
    """`the subscription's 5-hour window is 95% used (the share is 80%, budgets.windowShareMax);
    it resets at 15:42 (in 2 h 13 min)`."""
    return (f"the subscription's {NAMES.get(name, name)} window is {percent(rec['used_percent'])}"
            f" used (the share is {percent(share)}, budgets.windowShareMax); it resets at "
            f"{when(rec['resets_at'], now)}")


def share_denial(root: str, limits: dict, now: float) -> str | None:
    """None when `limits["windowShareMax"]` is None or no live window is at or over it; else
    one line for a denied fan-out call naming the window, its use, the share and its reset."""
    over = over_share(root, limits, now)
    if not over:
        return None
    name, rec = over[0]
    return f"clavain: no new fan-out: {describe(name, rec, _share(limits) or 0.0, now)}"


def percent(value: float) -> str:
    return f"{round(float(value), 1):g}%"


def when(epoch: float, now: float) -> str:
    """`15:42 (in 2 h 13 min)` in local time; half a day ahead or more also names the day."""
    moment = time.localtime(epoch)
    shown = time.strftime("%H:%M" if epoch - now < 12 * 3600 else "%a %d %b %H:%M", moment)
    return f"{shown} {time.strftime('%Z', moment)} ({until(epoch - now)})".replace("  ", " ")


def until(seconds: float) -> str:
    """`in 2 h 13 min`, `in 45 s`, `in 3 d 4 h`."""
    seconds = max(0, int(seconds + 0.5))
    if seconds < 60:
        return f"in {seconds} s"
    minutes = (seconds + 59) // 60  # never "in 0 min" for a wait still under way
    if minutes < 60:
        return f"in {minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"in {hours} h {minutes} min" if minutes else f"in {hours} h"
    days, hours = divmod(hours, 24)
    return f"in {days} d {hours} h" if hours else f"in {days} d"


# ------------------------------------------------------------------ the readings' sources


def from_statusline(payload: object, now: float) -> dict:
    """The windows of the status line's payload: `rate_limits: {five_hour: {used_percentage,
    resets_at}, seven_day: {...}}` (subscribers only, after the first API response)."""
    limits = payload.get("rate_limits") if isinstance(payload, dict) else None
    found: dict = {}
    if not isinstance(limits, dict):
        return found
    for name, given in list(limits.items())[:MAX_WINDOWS]:
        if name == "spend_limit" or not isinstance(given, dict):
            continue  # a gateway's dollar limit is not a window of the subscription
        figures = reading(name, given.get("used_percentage"), given.get("resets_at"), now)
        if figures is not None:
            found[name] = figures
    return found


def from_rate_limit_info(info: object, now: float) -> dict:
    """The windows of a `rate_limit_event`'s `rate_limit_info`: each of `unifiedWindows`
    (utilization is a fraction 0-1), else the one `rateLimitType` it is about; a window whose
    status is `rejected` is used up whatever its utilization says."""
    if not isinstance(info, dict):
        return {}
    found: dict = {}
    unified = info.get("unifiedWindows")
    entries = list(unified.items())[:MAX_WINDOWS] if isinstance(unified, dict) else []
    if not entries and isinstance(info.get("rateLimitType"), str):
        entries = [(info["rateLimitType"], info)]
    for name, given in entries:
        if not isinstance(given, dict) or name == "overage":
            continue
        fraction = _number(given.get("utilization"))
        used = 100.0 if given.get("status") == "rejected" else \
            None if fraction is None else min(fraction, 1.0) * 100
        figures = reading(name, used, given.get("resetsAt"), now)
        if figures is not None:
            found[name] = figures
    return found


def status(root: str, now: float, limits: dict | None = None) -> dict:
    """For `clavain budget status`: {"share_max", "windows": [{window, used_percent,
    resets_at, resets, over, source}], "stop"}; `limits` default: the project's (`counting`)."""
    if limits is None:
        from clavain.guards.counting import run_context

        limits = run_context(root, None)["limits"]
    share = _share(limits)
    rows = [{"window": name, "used_percent": rec["used_percent"],
             "resets_at": rec["resets_at"], "resets": when(rec["resets_at"], now),
             "over": share is not None and rec["used_percent"] >= share,
             "source": rec["source"]}
            for name, rec in sorted(current(root, now).items())]
    return {"share_max": share, "windows": rows, "stop": load(root)["stop"]}
