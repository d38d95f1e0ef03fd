"""Calls per hour for the loop: a sliding one-hour window of call start times, so unattended
loops cannot start more than `per_hour` agent calls in any hour, across restarts and across
loops — the window is the project's (`limits.calls_path`), shared by every loop run and session.

The window is (now − 3600 s, now]: a call made at t leaves it at exactly t + 3600. Timestamps
live in one JSON file, pruned to the window on every write; a missing or damaged file is an
empty window, never a crash. A timestamp in the future (the clock went back) counts as now, so
it cannot block calls for longer than an hour. The file is read again before every decision and
written under a lock (`limits.locked`): two loops taking a call at once lose neither, and two
loops cannot both take the last free call.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clavain.errors import ClavainError
from clavain.fsutil import read_json_object, write_json_atomic
from clavain.loop.limits import locked

WINDOW_SECONDS = 3600.0
FORMAT_VERSION = 1


def is_time(value: Any) -> bool:
    """A finite number of seconds (JSON may hold true, NaN or text where a time belongs)."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def _load(path: Path) -> tuple[list[float], dict[str, Any] | None]:
    """The saved call times, oldest first, and the last person's reset; ([], None) when the
    file is missing or damaged (any entry that is not a number makes the file untrustworthy)."""
    data = read_json_object(path)
    calls = data.get("calls") if data is not None else None
    if (data is None or data.get("version") != FORMAT_VERSION or not isinstance(calls, list)
            or not all(is_time(at) for at in calls)):
        return [], None
    reset = data.get("reset")
    return sorted(float(at) for at in calls), reset if isinstance(reset, dict) else None


def _window(calls: list[float], now: float) -> list[float]:
    """The calls still inside the window at `now`, oldest first, future ones pulled back."""
    return sorted(min(at, now) for at in calls if at > now - WINDOW_SECONDS)


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

    def _wait(self, calls: list[float], now: float) -> float:
        if len(calls) < self.per_hour:
            return 0.0
        leaving = calls[len(calls) - self.per_hour]  # more than per_hour if it was lowered
        return max(0.0, leaving + WINDOW_SECONDS - now)

    def wait_seconds(self) -> float:
        """0 when a call may start now; else the seconds until enough of the oldest calls leave
        the window (with a full window: until the oldest one leaves it)."""
        now = self._clock()
        return self._wait(_window(_load(self.path)[0], now), now)

    def acquire(self) -> float:
        """Take a call that starts now if the window has room (0.0, recorded), else the seconds
        to wait (nothing recorded): one decision under the lock, so loops running side by side
        never go past `per_hour` together."""
        with locked(self.state_root, self.path):
            calls, reset = _load(self.path)
            now = self._clock()
            calls = _window(calls, now)
            wait = self._wait(calls, now)
            if wait <= 0:
                self._save([*calls, now], reset)
            return wait

    def record_call(self) -> None:
        """Count a call that starts now whatever the window holds (a call already made)."""
        with locked(self.state_root, self.path):
            calls, reset = _load(self.path)
            now = self._clock()
            self._save([*_window(calls, now), now], reset)

    def reset(self, by: str) -> None:
        """Empty the window: a person decided (`by` says who, kept in the file)."""
        from clavain.clock import now_iso

        with locked(self.state_root, self.path):
            self._save([], {"by": by, "at": now_iso()})

    def status(self) -> dict[str, Any]:
        """per_hour, calls in the window, when the next call may start (None: now), and the
        last reset by a person (None: never)."""
        now = self._clock()
        saved, reset = _load(self.path)
        calls = _window(saved, now)
        wait = self._wait(calls, now)
        return {"per_hour": self.per_hour, "calls_in_window": len(calls),
                "next_free_at": now + wait if wait > 0 else None, "last_reset": reset}

    def _save(self, calls: list[float], reset: dict[str, Any] | None) -> None:
        data: dict[str, Any] = {"version": FORMAT_VERSION, "calls": calls}
        if reset is not None:
            data["reset"] = reset
        write_json_atomic(self.path, data, inside=self.state_root)
