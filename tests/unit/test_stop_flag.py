"""A stop set from a signal handler (`clavain.stop_flag`): the handler never waits for a lock,
wherever the main thread was when the signal landed."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

from clavain.stop_flag import StopFlag

LIB = str(Path(__file__).resolve().parents[2] / "lib")

# The handler runs at the first bytecode after the signal, here while the main thread holds
# the stop's own lock if it has one (an Event's, inside its wait): the stop is set from there.
SIGNAL_INSIDE_THE_LOCK = textwrap.dedent("""
    import os, signal, sys, threading
    sys.path.insert(0, sys.argv[1])
    from clavain.stop_flag import StopFlag
    stop = StopFlag() if sys.argv[2] == "flag" else threading.Event()
    signal.signal(signal.SIGUSR1, lambda s, f: stop.set())
    lock = getattr(stop, "_cond", None)
    if lock is not None:
        lock.acquire()  # where Event.wait holds it
    os.kill(os.getpid(), signal.SIGUSR1)
    held = True  # the handler ran by now
    if lock is not None:
        lock.release()
    print("stopped" if stop.wait(2) else "not stopped")
""")


def _run(kind: str) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run([sys.executable, "-c", SIGNAL_INSIDE_THE_LOCK, LIB, kind],
                              capture_output=True, text=True, timeout=4)
    except subprocess.TimeoutExpired:
        return None


def test_a_handler_landing_inside_the_wait_never_waits() -> None:
    assert _run("event") is None  # why: an Event set there waits for its own thread, for ever
    done = _run("flag")
    assert done is not None and done.stdout.strip() == "stopped", done


def test_it_waits_as_an_event_does() -> None:
    stop = StopFlag()
    began = time.monotonic()
    assert stop.wait(0.2) is False and time.monotonic() - began >= 0.2
    threading.Timer(0.1, stop.set).start()
    assert stop.wait(10) is True and stop.is_set()
    assert time.monotonic() - began < 5
    assert StopFlag().wait(0) is False and StopFlag().wait(-1) is False
