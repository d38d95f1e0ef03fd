"""Calls per hour for the loop: a sliding one-hour window of call start times, so an unattended
loop cannot start more than `per_hour` agent calls in any hour, even across restarts.

The window is (now − 3600 s, now]: a call made at t leaves it at exactly t + 3600. Timestamps
live in one JSON file, pruned to the window on every write; a missing or damaged file is an
empty window, never a crash. A timestamp in the future (the clock went back) counts as now, so
it cannot block calls for longer than an hour. One loop writes the file at a time.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clavain.errors import ClavainError
from clavain.fsutil import read_json_object, write_json_atomic

WINDOW_SECONDS = 3600.0
FORMAT_VERSION = 1


def is_time(value: Any) -> bool:
    """A finite number of seconds (JSON may hold true, NaN or text where a time belongs)."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def _load(path: Path) -> list[float]:
    """The saved call times, oldest first; [] when the file is missing or damaged (any entry
    that is not a number makes the whole file untrustworthy)."""
    data = read_json_object(path)
    calls = data.get("calls") if data is not None else None
    if (data is None or data.get("version") != FORMAT_VERSION or not isinstance(calls, list)
            or not all(is_time(at) for at in calls)):
        return []
    return sorted(float(at) for at in calls)


class CallRate:
    """See the module docstring. `clock` is injected so tests never sleep."""

    def __init__(self, path: Path, *, state_root: Path, per_hour: int = 100,
                 clock: Callable[[], float] = time.time) -> None:
        if isinstance(per_hour, bool) or not isinstance(per_hour, int) or per_hour < 1:
            raise ClavainError(f"calls per hour must be a whole number ≥ 1, got {per_hour!r}")
        self.path = Path(path)
        self.state_root = Path(state_root)
        if not self.path.is_relative_to(self.state_root):
            raise ClavainError(f"call-rate state file {self.path} is not inside the state "
                               f"folder {self.state_root}")
        self.per_hour = per_hour
        self._clock = clock
        self._calls = _load(self.path)

    def _window(self, now: float) -> list[float]:
        """The calls still inside the window at `now`, oldest first, future ones pulled back to
        now."""
        return sorted(min(at, now) for at in self._calls if at > now - WINDOW_SECONDS)

    def wait_seconds(self) -> float:
        """0 when a call may start now; else the seconds until enough of the oldest calls leave
        the window (with a full window: until the oldest one leaves it)."""
        now = self._clock()
        calls = self._window(now)
        if len(calls) < self.per_hour:
            return 0.0
        leaving = calls[len(calls) - self.per_hour]  # more than per_hour if it was lowered
        return max(0.0, leaving + WINDOW_SECONDS - now)

    def record_call(self) -> None:
        """Count a call that starts now (the caller checked `wait_seconds` first) and save the
        pruned window."""
        now = self._clock()
        self._calls = [*self._window(now), now]
        write_json_atomic(self.path, {"version": FORMAT_VERSION, "calls": self._calls},
                          inside=self.state_root)

    def status(self) -> dict[str, Any]:
        """per_hour, calls in the window, and when the next call may start (None: now)."""
        now = self._clock()
        wait = self.wait_seconds()
        return {"per_hour": self.per_hour, "calls_in_window": len(self._window(now)),
                "next_free_at": now + wait if wait > 0 else None}
