"""One runner process: started in its own process group with the packet on stdin, its output in
log files, its lease renewed while it lives, and the whole group stopped — SIGTERM, a grace
period, SIGKILL — when it runs past its timeout or the supervisor is told to stop.

A runner's descendants (a test run a model started, a dev server) share its group, so stopping
the group leaves nothing behind; runners that start their own groups (the shell runner's
commands) stop those themselves on SIGTERM.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clavain.errors import ClavainError
from clavain.processes import kill_group, stop_group

POLL_SECONDS = 0.2


class RunnerNotStarted(ClavainError):
    """The runner's program could not be started (missing, not executable)."""


@dataclass(frozen=True)
class ProcessOutcome:
    exit_code: int | None  # None when it was stopped or timed out
    timed_out: bool
    stopped: bool  # the supervisor stopped it (Ctrl-C, SIGTERM, a budget)
    seconds: float
    stdout: str
    stderr: str
    stdout_path: Path
    stderr_path: Path


def _feed(proc: subprocess.Popen[bytes], data: bytes) -> None:
    """Write stdin from a thread: a runner that does not read it must not block the wait."""
    assert proc.stdin is not None
    with contextlib.suppress(BrokenPipeError, OSError):
        proc.stdin.write(data)
    with contextlib.suppress(BrokenPipeError, OSError):
        proc.stdin.close()


def _read(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return ""


def run_process(argv: list[str], *, stdin_text: str, cwd: Path, env: dict[str, str],
                log_dir: Path, timeout: float, stop: Any,
                on_start: Callable[[int], None] | None = None,
                renew: Callable[[], None] | None = None, renew_every: float = 60.0
                ) -> ProcessOutcome:
    """Run `argv` to the end, past `timeout` (killed, `timed_out`) or until `stop` is set
    (killed, `stopped`). `on_start(pid)` is told the process group as soon as it exists, so a
    supervisor can stop it, or find it after a crash."""
    log_dir.mkdir(parents=True, exist_ok=True)
    stdout_path, stderr_path = log_dir / "stdout.log", log_dir / "stderr.log"
    started = time.monotonic()
    with stdout_path.open("wb") as out, stderr_path.open("wb") as err:
        try:
            proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=out,
                                    stderr=err, start_new_session=True)
        except OSError as exc:  # the runner's program cannot start: the setup, not the node
            raise RunnerNotStarted(f"runner could not start: {exc}") from exc
        if on_start is not None:
            try:
                on_start(proc.pid)
            except BaseException:  # never a runner nobody knows about
                stop_group(proc.pid, grace=0, proc=proc)
                raise
        feeder = threading.Thread(target=_feed, args=(proc, stdin_text.encode("utf-8")),
                                  daemon=True)
        feeder.start()
        timed_out, stopped = _wait(proc, started + timeout, stop, renew, renew_every)
        if timed_out or stopped:
            stop_group(proc.pid, proc=proc)
        # Background leftovers of a finished runner would hold files and ports.
        kill_group(proc.pid, signal.SIGKILL)
        feeder.join(timeout=1)
    return ProcessOutcome(None if (timed_out or stopped) else proc.returncode, timed_out,
                          stopped, time.monotonic() - started, _read(stdout_path),
                          _read(stderr_path), stdout_path, stderr_path)


def _wait(proc: subprocess.Popen[bytes], deadline: float, stop: Any,
          renew: Callable[[], None] | None, renew_every: float) -> tuple[bool, bool]:
    """(timed out, stopped) once the process ends or must be stopped."""
    next_renewal = time.monotonic() + renew_every
    while proc.poll() is None:
        now = time.monotonic()
        if stop.is_set():
            return False, True
        if now >= deadline:
            return True, False
        if renew is not None and now >= next_renewal:
            renew()
            next_renewal = now + renew_every
        stop.wait(min(POLL_SECONDS, max(0.0, deadline - now)))
    return False, False
