"""`.clavain/runs/<run>/supervisor.json`: which supervisor drives a run, and the runner process
groups it has started — written before a runner can do anything, so that after a `kill -9` of
the supervisor the next `clavain run` finds what it left behind, stops those runners and gives
their nodes back without spending an attempt (the supervisor died, not the node's work); their
budget reservations become charged, and measured where their transcripts are.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path
from typing import Any

from clavain.clock import now_iso
from clavain.errors import ClavainError
from clavain.fsutil import read_json_object, write_json_atomic
from clavain.paths import StatePaths, safe_path_part
from clavain.processes import (
    group_running,
    pid_alive,
    process_identity,
    same_process,
    stop_recorded_group,
)
from clavain.workgraph import claims
from clavain.workgraph.claims import this_host

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
                                     "pid": os.getpid(), "identity": process_identity(os.getpid()),
                                     "host": this_host(),
                                     "started_at": now_iso(), "status": "running",
                                     "runners": {}}

    def start(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._write()

    def runner_started(self, node_id: str, pid: int, *, worker: int | None = None) -> None:
        """`worker`: which of the run's workers (its lane on the run's page)."""
        with self._lock:
            self.data["runners"][node_id] = {"pid": pid, "started_at": now_iso(),
                                             "identity": process_identity(pid),
                                             "worker": worker}
            self._write()

    def runner_ended(self, node_id: str) -> None:
        with self._lock:
            self.data["runners"].pop(node_id, None)
            self._write()

    def keep_branch(self, branch: str, why: str) -> None:
        """A branch left on purpose (a conflict's or a dirty tree's only copy of its work):
        the next run's clean-up leaves it for a person."""
        with self._lock:
            self.data.setdefault("kept_branches", {})[branch] = why
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


def resumable(state: StatePaths, run_id: str) -> dict[str, Any]:
    """The record of run `run_id`, refused when it is missing, damaged or still running."""
    path = run_dir(state, run_id) / RECORD_NAME
    record = read_json_object(path)
    if record is None:
        raise ClavainError(f"no run {run_id!r} to resume ({path} is missing or damaged)")
    if not isinstance(record.get("graph_id"), str):
        raise ClavainError(f"{path}: no graph_id; this record cannot be resumed")
    if record.get("status") == "running" and supervisor_alive(record):
        raise ClavainError(f"run {run_id!r} is still running (pid {record.get('pid')} on "
                           f"{record.get('host')}); stop it first")
    return record


def live_runs(state: StatePaths) -> set[str]:
    """Ids of the runs still at work: their supervisor lives (on another host: assumed so), or
    a runner their record names still runs (its supervisor died; recovery has not stopped it
    yet, or could not): its worktree is in use."""
    live = set()
    for path in sorted(state.runs.glob(f"*/{RECORD_NAME}")) if state.runs.is_dir() else []:
        record = read_json_object(path)
        if record is None or record.get("status") != "running" or not isinstance(
                record.get("run_id"), str):
            continue
        runners = record.get("runners") if isinstance(record.get("runners"), dict) else {}
        if supervisor_alive(record) or any(_runner_running(r) for r in runners.values()):
            live.add(record["run_id"])
    return live


def _runner_running(runner: object) -> bool:
    pid = runner.get("pid") if isinstance(runner, dict) else None
    if not isinstance(pid, int) or pid <= 1 or not group_running(pid):
        return False
    return not pid_alive(pid) or same_process(pid, runner.get("identity"))


def kept_branches(state: StatePaths) -> set[str]:
    """Every git branch a run of this project kept on purpose (`RunRecord.keep_branch`)."""
    kept: set[str] = set()
    for path in sorted(state.runs.glob(f"*/{RECORD_NAME}")) if state.runs.is_dir() else []:
        record = read_json_object(path) or {}
        if isinstance(record.get("kept_branches"), dict):
            kept.update(name for name in record["kept_branches"] if isinstance(name, str))
    return kept


def abandoned_runs(state: StatePaths) -> list[dict[str, Any]]:
    """Records of runs whose supervisor died on this host while they were running."""
    found = []
    for path in sorted(state.runs.glob(f"*/{RECORD_NAME}")) if state.runs.is_dir() else []:
        record = read_json_object(path)
        if record is None or record.get("status") != "running" or supervisor_alive(record):
            continue
        found.append({**record, "path": str(path)})
    return found


def _stop_runner(runner: object, *, grace: float | None = None) -> bool | None:
    """Stop one recorded runner's process group (`processes.stop_recorded_group`: True gone
    now, False nothing of it ran, None still there)."""
    if not isinstance(runner, dict):
        return False
    kwargs = {} if grace is None else {"grace": grace}
    return stop_recorded_group(runner.get("pid"), runner.get("identity"), **kwargs)


def kill_runners(state: StatePaths, run_id: str) -> list[str]:
    """Kill every runner a run's record names, now (a second Ctrl-C)."""
    record = read_json_object(run_dir(state, run_id) / RECORD_NAME) or {}
    runners = record.get("runners") if isinstance(record.get("runners"), dict) else {}
    return [node for node, runner in runners.items() if _stop_runner(runner, grace=0)]


def recover(state: StatePaths, conn: Any) -> list[dict[str, Any]]:
    """Stop the runners of every abandoned run and give its claims back as crashes (no attempt
    spent; `claims.give_back_run`). A runner that cannot be stopped keeps its node claimed
    and stays in the record for the next look: never two runners on one node. Returns what was
    done, one entry per run."""
    recovered = []
    for record in abandoned_runs(state):
        runners = record.get("runners") if isinstance(record.get("runners"), dict) else {}
        outcome = {node: _stop_runner(runner) for node, runner in runners.items()}
        stopped = [node for node, gone in outcome.items() if gone]
        running = {node: runners[node] for node, gone in outcome.items() if gone is None}
        released = []
        if isinstance(record.get("run_id"), str) and isinstance(record.get("graph_id"), str):
            released = claims.give_back_run(
                state, conn, record["run_id"], record["graph_id"], crashed=True,
                keep=set(running),
                why=f"supervisor of run {record['run_id']} died (pid {record.get('pid')})")
        spend = _charge_dead_runners(state, record.get("run_id"), frozenset(running))
        record_path = Path(record.pop("path"))
        record.update(status="running" if running else "crashed", recovered_at=now_iso(),
                      runners=running)
        with contextlib.suppress(OSError):
            write_json_atomic(record_path, record, inside=state.root)
        recovered.append({"run_id": record.get("run_id"), "stopped_runners": stopped,
                          "released": released, "still_running": sorted(running), **spend})
    return recovered


def _charge_dead_runners(state: StatePaths, run_id: object,
                         running: frozenset[str]) -> dict[str, Any]:
    """The dead supervisor's runners never reported what they spent: their reservations count
    as spent (charged), and those whose transcript exists are measured now (`run_reserve`). A
    meter out of reach is said, not raised: the next reservation fails closed on it."""
    if not isinstance(run_id, str):
        return {}
    from clavain.supervisor.run_budget import run_key
    from clavain.supervisor.run_reserve import charge_held, measure_charged

    try:
        charged = charge_held(state, run_key(run_id), running=running)
        measured = measure_charged(state, run_key(run_id))
    except Exception as exc:
        return {"budget_problem": f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"}
    return {"charged": charged, "measured": [m["holder"] for m in measured]}
