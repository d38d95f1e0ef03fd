"""Processes Clavain starts and must be able to stop: a process group (a runner, a verify command,
a check) stopped with SIGTERM, a grace period, then SIGKILL; and which process a recorded pid is
(boot id + start time), so a pid the system gave to another process since is never signalled.

Every front door that stops something asks here: a runner past its timeout, a Ctrl-C, a crashed
supervisor's orphans found by the next run (`supervisor.run_record`), and a runner whose claim
is taken back on the same host (`workgraph.stale`), which must be gone before the node is
claimed again.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import time
from typing import NamedTuple

TERM_GRACE_SECONDS = 5.0
# How long a group's members may take to die after SIGKILL.
GONE_WAIT_SECONDS = 5.0


def kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop_group(pgid: int, *, grace: float = TERM_GRACE_SECONDS,
               proc: subprocess.Popen[bytes] | None = None) -> None:
    """SIGTERM to the group, then SIGKILL once `grace` has passed (or at once when the leader
    is gone, for whatever it left behind). For a verify command, a runner, a recovered
    orphan: `bash -c "make test"` leaves the real work in grandchildren."""
    kill_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            break
        if proc is None and not group_running(pgid):
            return
        time.sleep(0.05)
    kill_group(pgid, signal.SIGKILL)
    if proc is not None:
        proc.wait()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    except OverflowError:
        return False  # no such pid can exist
    return True


@functools.cache
def boot_id() -> str:
    """This kernel's boot id ("" where there is none), read once per process."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as handle:
            return handle.read().strip()
    except OSError:
        return ""


class ProcStat(NamedTuple):
    """What `/proc/<pid>/stat` says, the fields Clavain uses."""

    comm: str  # the command's name as the kernel keeps it (may hold spaces and parentheses)
    state: str  # R, S, D, Z (zombie), X (dead), ...
    ppid: int
    pgrp: int
    start_ticks: int  # when it started, in clock ticks since the boot


def proc_stat(pid: int | str) -> ProcStat | None:
    """`/proc/<pid>/stat`, read and parsed once for every question about a process (Linux);
    None where it cannot be read (no `/proc`, the process is gone) or is not what the kernel
    writes."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    return parse_stat(raw.decode("utf-8", "replace"))


def parse_stat(text: str) -> ProcStat | None:
    """The line of `/proc/<pid>/stat`: `pid (comm) state ppid pgrp ...`. The name may hold
    spaces and parentheses, so it runs to the last `)` and the fields are counted from there."""
    opened, closed = text.find("("), text.rfind(")")
    fields = text[closed + 2:].split()
    if opened < 0 or closed < opened or len(fields) < 20:
        return None
    try:
        return ProcStat(text[opened + 1:closed], fields[0], int(fields[1]), int(fields[2]),
                        int(fields[19]))
    except ValueError:
        return None


def process_identity(pid: int) -> str | None:
    """Which process `pid` is: boot id and start time (Linux `/proc`), so a pid the system
    gave to another process since it was recorded is never taken for it. None elsewhere."""
    boot = boot_id()
    stat = proc_stat(pid)
    if not boot or stat is None:
        return None
    return f"{boot}:{stat.start_ticks}"


def same_process(pid: int, identity: object) -> bool:
    """Whether live `pid` is still the process recorded with `identity` (unknown: assume so)."""
    if not isinstance(identity, str):
        return True
    return process_identity(pid) == identity


def group_running(pgid: int) -> bool:
    """Whether any member of the group still runs. Killed members stay zombies until their
    parent reaps them (an orphan's new parent may take seconds), and a zombie does nothing:
    on Linux they are left out by reading `/proc`; elsewhere any member counts."""
    if not group_alive(pgid):
        return False
    try:
        pids = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return True
    for pid in pids:
        stat = proc_stat(pid)
        if stat is not None and stat.pgrp == pgid and stat.state not in ("Z", "X"):
            return True
    return False


def stop_recorded_group(pid: object, identity: object, *, grace: float = TERM_GRACE_SECONDS
                        ) -> bool | None:
    """Stop the process group a record names (its leader's pid and identity) and wait until it
    is gone. True: it was running and is gone now; False: nothing of it was running (or the pid
    belongs to another process now); None: it could not be stopped (it is still there). A group
    whose leader is gone can still be signalled: its id cannot be reused while it has members."""
    if not isinstance(pid, int) or pid <= 1 or not group_running(pid):
        return False
    if pid_alive(pid) and not same_process(pid, identity):
        return False  # the pid belongs to another process now
    stop_group(pid, grace=grace)
    deadline = time.monotonic() + GONE_WAIT_SECONDS
    while group_running(pid):
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.05)
    return True
