"""`.clavain/runs/<run>/supervisor.json`: which supervisor drives a run, and the runner process
groups it has started — written before a runner can do anything, so that after a `kill -9` of
the supervisor the next `clavain run` finds what it left behind, stops those runners and gives
their nodes back without spending an attempt (the supervisor died, not the node's work).
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path
from typing import Any

from clavain.clock import now_iso
from clavain.fsutil import read_json_object, write_json_atomic
from clavain.paths import StatePaths
from clavain.store.db import transaction
from clavain.workgraph.graphs import Graph
from clavain.workgraph.leases import boot_id, pid_alive, this_host
from clavain.workgraph.nodes import release_claim
from clavain.workgraph.shell import group_alive, stop_group
from clavain.workgraph.verifier import safe_path_part

RECORD_NAME = "supervisor.json"


def process_identity(pid: int) -> str | None:
    """Which process `pid` is: boot id and start time (Linux `/proc`), so a pid the system
    gave to another process since it was recorded is never taken for it. None elsewhere."""
    boot = boot_id()
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            stat = handle.read()
    except OSError:
        return None
    if not boot:
        return None
    fields = stat[stat.rfind(")") + 2:].split()  # the name may hold spaces and parentheses
    return f"{boot}:{fields[19]}" if len(fields) > 19 else None


def same_process(pid: int, identity: object) -> bool:
    """Whether live `pid` is still the process recorded with `identity` (unknown: assume so)."""
    if not isinstance(identity, str):
        return True
    return process_identity(pid) == identity


def run_dir(state: StatePaths, run_id: str) -> Path:
    return state.runs / safe_path_part(run_id)


class RunRecord:
    """The live record of one supervisor; every change is written at once (atomically)."""

    def __init__(self, state: StatePaths, run_id: str, graph_id: str) -> None:
        self.state = state
        self.path = run_dir(state, run_id) / RECORD_NAME
        self._lock = threading.Lock()
        self.data: dict[str, Any] = {"run_id": run_id, "graph_id": graph_id,
                                     "pid": os.getpid(), "identity": process_identity(os.getpid()),
                                     "host": this_host(),
                                     "started_at": now_iso(), "status": "running",
                                     "runners": {}}

    def start(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._write()

    def runner_started(self, node_id: str, pid: int) -> None:
        with self._lock:
            self.data["runners"][node_id] = {"pid": pid, "started_at": now_iso(),
                                             "identity": process_identity(pid)}
            self._write()

    def runner_ended(self, node_id: str) -> None:
        with self._lock:
            self.data["runners"].pop(node_id, None)
            self._write()

    def finish(self, status: str, *, keep_runners: bool = False) -> None:
        """`keep_runners`: some runner may outlive this supervisor; the next run stops it."""
        with self._lock:
            self.data.update(status="running" if keep_runners else status,
                             finished_at=now_iso(), ending=status)
            if not keep_runners:
                self.data["runners"] = {}
            self._write()

    def _write(self) -> None:
        write_json_atomic(self.path, self.data, inside=self.state.root)


def supervisor_alive(record: dict[str, Any]) -> bool:
    """Whether the record's supervisor still runs (on another host: assumed so)."""
    if record.get("host") != this_host():
        return True
    pid = record.get("pid")
    if record.get("ending"):  # it finished and left runners behind on purpose
        return False
    return (isinstance(pid, int) and pid != os.getpid() and pid_alive(pid)
            and same_process(pid, record.get("identity")))


def abandoned_runs(state: StatePaths) -> list[dict[str, Any]]:
    """Records of runs whose supervisor died on this host while they were running."""
    found = []
    for path in sorted(state.runs.glob(f"*/{RECORD_NAME}")) if state.runs.is_dir() else []:
        record = read_json_object(path)
        if record is None or record.get("status") != "running" or supervisor_alive(record):
            continue
        found.append({**record, "path": str(path)})
    return found


def _stop_runner(runner: object, *, grace: float | None = None) -> bool:
    """Stop one recorded runner's process group; False when it is gone or no longer ours. A
    group whose leader is gone can still be signalled: its id cannot be reused while it has
    members."""
    pid = runner.get("pid") if isinstance(runner, dict) else None
    if not isinstance(pid, int) or pid <= 1 or not group_alive(pid):
        return False
    if pid_alive(pid) and not same_process(pid, runner.get("identity")):
        return False  # the pid belongs to another process now
    if grace is None:
        stop_group(pid)
    else:
        stop_group(pid, grace=grace)
    return True


def kill_runners(state: StatePaths, run_id: str) -> list[str]:
    """Kill every runner a run's record names, now (a second Ctrl-C)."""
    record = read_json_object(run_dir(state, run_id) / RECORD_NAME) or {}
    runners = record.get("runners") if isinstance(record.get("runners"), dict) else {}
    return [node for node, runner in runners.items() if _stop_runner(runner, grace=0)]


def recover(state: StatePaths, conn: Any) -> list[dict[str, Any]]:
    """Stop the runners of every abandoned run and release its claims unspent. Returns what was
    done, one entry per run."""
    recovered = []
    for record in abandoned_runs(state):
        runners = record.get("runners") if isinstance(record.get("runners"), dict) else {}
        stopped = [node for node, runner in runners.items() if _stop_runner(runner)]
        released = []
        if isinstance(record.get("run_id"), str) and isinstance(record.get("graph_id"), str):
            released = release_run_claims(
                state, conn, record["run_id"], record["graph_id"],
                why=f"supervisor of run {record['run_id']} died (pid {record.get('pid')})")
        record_path = Path(record.pop("path"))
        record.update(status="crashed", recovered_at=now_iso(), runners={})
        with contextlib.suppress(OSError):
            write_json_atomic(record_path, record, inside=state.root)
        recovered.append({"run_id": record.get("run_id"), "stopped_runners": stopped,
                          "released": released})
    return recovered


def release_run_claims(state: StatePaths, conn: Any, run_id: str, graph_id: str, *,
                       why: str) -> list[str]:
    """Give back every node `run_id` holds in `graph_id`, no attempt spent."""
    g = Graph(conn, graph_id, state)
    at = now_iso()
    released = []
    with transaction(conn):
        held = [row[0] for row in conn.execute(
            "SELECT id FROM nodes WHERE graph_id = ? AND lock_run_id = ?", (g.id, run_id))]
        for node_id in held:
            if release_claim(g, node_id, run_id, at=at, why=why):
                released.append(node_id)
    return released
