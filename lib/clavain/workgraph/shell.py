"""Running shell commands the way Clavain's runners must: `bash -c` in its own process group,
output streamed to a log inside the state folder, a timeout that kills the whole group, and
SIGTERM/SIGINT that never leave a command running.

`SignalGuard` covers a runner's whole claim-to-record span: while a command runs, a signal kills
its group and raises `Interrupted`; at any other moment it is held until the runner may stop
(after recording a result it cannot lose), so a signal never strands a claim or a result.
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clavain.fsutil import open_inside
from clavain.processes import kill_group, stop_group


@dataclass(frozen=True)
class CommandOutcome:
    index: int
    command: str
    exit_code: int | None  # None when the command was killed for running too long
    timed_out: bool
    log_path: Path

    @property
    def passed(self) -> bool:
        return not self.timed_out and self.exit_code == 0

    def as_dict(self) -> dict[str, Any]:
        return {"index": self.index, "command": self.command, "exit_code": self.exit_code,
                "timed_out": self.timed_out, "log": str(self.log_path)}


class Interrupted(Exception):
    """SIGTERM or SIGINT arrived; the running command's process group is already killed."""

    def __init__(self, signum: int, *, recorded: bool = False) -> None:
        name = signal.Signals(signum).name
        super().__init__(f"interrupted by {name}" + (" after the result was recorded"
                                                      if recorded else ""))
        self.signum = signum
        self.recorded = recorded


class SignalGuard:
    """SIGTERM/SIGINT handling for one runner (module docstring). `pgids` holds the process
    groups of running commands; `interruptible` says whether a signal may stop the runner now
    (else it is kept in `pending`)."""

    def __init__(self) -> None:
        self.pgids: list[int] = []
        self.interruptible = False
        self.pending: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> SignalGuard:
        if threading.current_thread() is threading.main_thread():  # else handlers cannot be set
            self._previous = {sig: signal.signal(sig, self._on_signal)
                              for sig in (signal.SIGTERM, signal.SIGINT)}
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _on_signal(self, signum: int, _frame: object) -> None:
        for pgid in self.pgids:
            kill_group(pgid, signal.SIGKILL)
        if self.interruptible:
            raise Interrupted(signum)
        self.pending = self.pending or signum

    def allow(self) -> None:
        """Signals stop the runner from now on; one that came meanwhile stops it now."""
        self.interruptible = True
        if self.pending is not None:
            raise Interrupted(self.pending)

    def hold(self) -> None:
        """Signals wait from now on (the runner is recording)."""
        self.interruptible = False


def run_command(index: int, command: str, *, cwd: Path, log_path: Path, timeout: float,
                env: dict[str, str], state_root: Path, guard: SignalGuard | None = None,
                renew: Callable[[], None] | None = None, renew_every: float = 60.0
                ) -> CommandOutcome:
    """Run one command, its output (stdout and stderr interleaved) streamed to `log_path`;
    `renew` is called every `renew_every` seconds while it runs (a runner's lease)."""
    from clavain.confine import confine

    pgids = guard.pgids if guard is not None else []
    # In hard mode an agent's verify command gets its Bash's limits, though Clavain runs it.
    argv = confine(["bash", "-c", command], cwd, state_root)
    with open_inside(state_root, log_path, "wb") as log:
        log.write(f"$ {command}\n".encode())
        log.flush()
        # A signal while the command starts waits until its group is known: the handler
        # kills only known groups, and the command runs before Popen returns (on a loaded
        # machine, long enough to be signalled), so it would outlive the runner.
        interruptible = guard is not None and guard.interruptible
        if guard is not None:
            guard.hold()
        proc = subprocess.Popen(
            argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        pgids.append(proc.pid)
        try:
            if interruptible and guard is not None:
                guard.allow()  # a signal that came meanwhile stops it now
            timed_out = _wait(proc, timeout, renew, renew_every)
            if timed_out:
                stop_group(proc.pid, proc=proc)
        finally:
            # Background leftovers of a finished command would hold ports and this log open;
            # an interrupted command's group goes with them.
            kill_group(proc.pid, signal.SIGKILL)
            pgids.remove(proc.pid)
        footer = (f"[timed out after {timeout:g}s; process group killed]" if timed_out
                  else f"[exit {proc.returncode}]")
        log.write(f"\n{footer}\n".encode())
    return CommandOutcome(index, command, None if timed_out else proc.returncode, timed_out,
                          log_path)


def _wait(proc: subprocess.Popen[bytes], timeout: float, renew: Callable[[], None] | None,
          renew_every: float) -> bool:
    """Wait for `proc`; True when it ran past `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return True
        try:
            proc.wait(timeout=min(left, renew_every) if renew else left)
            return False
        except subprocess.TimeoutExpired:
            if renew is not None and time.monotonic() < deadline:
                renew()


def run_commands(commands: list[str], *, cwd: Path, log_dir: Path, timeout: float,
                 env: dict[str, str], state_root: Path, guard: SignalGuard | None = None,
                 renew: Callable[[], None] | None = None, renew_every: float = 60.0,
                 before: Callable[[str], bool] | None = None) -> list[CommandOutcome]:
    """Run in order, stopping after the first command that fails or times out, or before the
    first one `before` refuses (returns False for: the verifier's test-run budget)."""
    outcomes: list[CommandOutcome] = []
    for index, command in enumerate(commands, start=1):
        if before is not None and not before(command):
            break
        outcome = run_command(index, command, cwd=cwd, log_path=log_dir / f"cmd-{index}.log",
                              timeout=timeout, env=env, state_root=state_root, guard=guard,
                              renew=renew, renew_every=renew_every)
        outcomes.append(outcome)
        if not outcome.passed:
            break
    return outcomes
