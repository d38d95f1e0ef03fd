"""SIGINT and SIGTERM noted for the supervisor's main loop, never raised and never acted on in
the handler itself.

The handler only counts the signal and sets the stop: printing from a handler can raise
"reentrant call" when the signal lands inside a print, and a lock taken there can be the one
the interrupted code holds (see `clavain.stop_flag`). The main loop calls `answer` on each
turn, which runs `on_first` for the first signal and `on_again` for each later one, outside
the handler."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import Any

from clavain.stop_flag import StopFlag


class Signals:
    """SIGINT/SIGTERM set `stop` and are counted (main thread only); `answer` acts on them."""

    def __init__(self, stop: StopFlag, on_first: Callable[[], None],
                 on_again: Callable[[], None]) -> None:
        self.stop = stop
        self.on_first = on_first
        self.on_again = on_again
        self.first: int | None = None  # the first signal's number
        self.seen = 0
        self.answered = 0
        self.previous: dict[int, Any] = {}

    def _note(self, signum: int, _frame: object) -> None:
        # One assignment each, no call that could block or print: see the module docstring.
        self.first = self.first or signum
        self.seen += 1
        self.stop.set()

    def answer(self) -> None:
        """What the signals seen since the last answer ask: a graceful stop for the first, no
        more grace for any later one (once per answer, however many came meanwhile)."""
        seen = self.seen
        if seen == self.answered:
            return
        if self.answered == 0:
            self.on_first()
        if seen >= 2:
            self.on_again()
        self.answered = seen

    def __enter__(self) -> Signals:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.previous[sig] = signal.signal(sig, self._note)
        return self

    def __exit__(self, *exc: object) -> None:
        try:  # a signal during the run's last steps (settling, recording) is answered too
            self.answer()
        finally:
            for sig, handler in self.previous.items():
                signal.signal(sig, handler)
