"""A stop a signal handler may set (Ctrl-C, SIGTERM) for `clavain loop`, `clavain run` and
`report --html --watch`.

A Python signal handler runs in the main thread between two bytecodes, possibly while that
thread holds a lock. `threading.Event.set` takes the Event's lock, so a Ctrl-C landing while the
main thread is inside `Event.wait` (between taking its lock and letting it go) leaves the
handler waiting for a lock its own thread holds, for ever: `clavain loop` was found hung that
way, stopped during its wait for the calls-per-hour window. Here setting is one assignment and
waiting polls, so a handler never waits for anything. Threads read it as they would an Event.
"""

from __future__ import annotations

import time

# How long a wait sleeps between looks at the flag: a stop is seen within this.
POLL_SECONDS = 0.05


class StopFlag:
    """`set`, `is_set` and `wait(timeout)` as `threading.Event` has them, without a lock."""

    __slots__ = ("_stopped",)

    def __init__(self) -> None:
        self._stopped = False

    def set(self) -> None:
        self._stopped = True

    def is_set(self) -> bool:
        return self._stopped

    def wait(self, timeout: float | None = None) -> bool:
        """True once set; False when `timeout` seconds passed first (None: no limit)."""
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        while not self._stopped:
            left = POLL_SECONDS if deadline is None else \
                min(POLL_SECONDS, deadline - time.monotonic())
            if left <= 0:
                break
            time.sleep(left)
        return self._stopped
