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
from clavain.supervisor.process import group_alive, stop_group
from clavain.workgraph.graphs import Graph
from clavain.workgraph.leases import pid_alive, this_host
from clavain.workgraph.nodes import release_claim
from clavain.workgraph.verifier import safe_path_part

RECORD_NAME = "supervisor.json"


def run_dir(state: StatePaths, run_id: str) -> Path:
    return state.runs / safe_path_part(run_id)


class RunRecord:
    """The live record of one supervisor; every change is written at once (atomically)."""

    def __init__(self, state: StatePaths, run_id: str, graph_id: str) -> None:
        self.state = state
        self.path = run_dir(state, run_id) / RECORD_NAME
        self._lock = threading.Lock()
        self.data: dict[str, Any] = {"run_id": run_id, "graph_id": graph_id,
                                     "pid": os.getpid(), "host": this_host(),
                                     "started_at": now_iso(), "status": "running",
                                     "runners": {}}

    def start(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._write()

    def runner_started(self, node_id: str, pid: int) -> None:
        with self._lock:
            self.data["runners"][node_id] = {"pid": pid, "started_at": now_iso()}
            self._write()

    def runner_ended(self, node_id: str) -> None:
        with self._lock:
            self.data["runners"].pop(node_id, None)
            self._write()

    def finish(self, status: str) -> None:
        with self._lock:
            self.data.update(status=status, finished_at=now_iso(), runners={})
            self._write()

    def _write(self) -> None:
        write_json_atomic(self.path, self.data, inside=self.state.root)


def supervisor_alive(record: dict[str, Any]) -> bool:
    """Whether the record's supervisor still runs (on another host: assumed so)."""
    if record.get("host") != this_host():
        return True
    pid = record.get("pid")
    return isinstance(pid, int) and pid != os.getpid() and pid_alive(pid)


def abandoned_runs(state: StatePaths) -> list[dict[str, Any]]:
    """Records of runs whose supervisor died on this host while they were running."""
    found = []
    for path in sorted(state.runs.glob(f"*/{RECORD_NAME}")) if state.runs.is_dir() else []:
        record = read_json_object(path)
        if record is None or record.get("status") != "running" or supervisor_alive(record):
            continue
        found.append({**record, "path": str(path)})
    return found


def recover(state: StatePaths, conn: Any) -> list[dict[str, Any]]:
    """Stop the runners of every abandoned run and release its claims unspent. Returns what was
    done, one entry per run."""
    recovered = []
    for record in abandoned_runs(state):
        stopped = []
        for node_id, runner in (record.get("runners") or {}).items():
            pid = runner.get("pid") if isinstance(runner, dict) else None
            if isinstance(pid, int) and pid > 1 and group_alive(pid):
                stop_group(pid)
                stopped.append(node_id)
        released = _release_claims(state, conn, record)
        record_path = Path(record.pop("path"))
        record.update(status="crashed", recovered_at=now_iso(), runners={})
        with contextlib.suppress(OSError):
            write_json_atomic(record_path, record, inside=state.root)
        recovered.append({"run_id": record["run_id"], "stopped_runners": stopped,
                          "released": released})
    return recovered


def _release_claims(state: StatePaths, conn: Any, record: dict[str, Any]) -> list[str]:
    run_id, graph_id = record.get("run_id"), record.get("graph_id")
    if not isinstance(run_id, str) or not isinstance(graph_id, str):
        return []
    g = Graph(conn, graph_id, state)
    at = now_iso()
    released = []
    with transaction(conn):
        held = [row[0] for row in conn.execute(
            "SELECT id FROM nodes WHERE graph_id = ? AND lock_run_id = ?", (g.id, run_id))]
        for node_id in held:
            if release_claim(g, node_id, run_id, at=at,
                             why=f"supervisor of run {run_id} died (pid {record.get('pid')})"):
                released.append(node_id)
    return released
