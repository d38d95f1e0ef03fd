"""SIGINT and SIGTERM as calls to a handler (the supervisor's stop), not exceptions."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import Any


class Signals:
    """SIGINT/SIGTERM call `handler` instead of raising (main thread only)."""

    def __init__(self, handler: Callable[[int], None]) -> None:
        self.handler = handler
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> Signals:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.previous[sig] = signal.signal(sig, lambda s, _f: self.handler(s))
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
