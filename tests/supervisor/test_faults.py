"""A headless run survives every fault: whatever a worker meets after its claim (a bug, a busy or
damaged database, a kill -9 at any step), the claim is given back or finished, no node runs
twice at once, a crash spends no attempt, and git is left clean.

Faults are raised through the supervisor's seam (`CLAVAIN_FAULT`, never set outside tests) or
made for real: kill -9 of `clavain run` subprocesses, a page of the database overwritten."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from clavain.supervisor import fault_injection, run_record
from tests.checks import PASSES
from tests.supervisor import kit
from tests.supervisor.test_run import _alive

pytestmark = [pytest.mark.slow]
both_backends = pytest.mark.usefixtures("backend")


@pytest.fixture(autouse=True)
def _fresh_fault_counts() -> None:
    """`POINT:ACTION:N` counts per process: each test starts from zero."""
    fault_injection._seen.clear()


def _held(state) -> dict[str, str]:
    return {node_id: node["lock_run_id"] for node_id, node in kit.nodes(state).items()
            if node["lock_run_id"]}


def _done_counts(state) -> dict[str, int]:
    from clavain.store.graph_db import open_graph_db

    conn = open_graph_db(state)
    try:
        return dict(conn.execute("SELECT node_id, count(*) FROM events WHERE to_status = 'done' "
                                 "GROUP BY node_id").fetchall())
    finally:
        conn.close()


# ---------------------------------------------------------------- a fault at every point

@pytest.mark.parametrize("point", [p for p in fault_injection.POINTS if p != "after_claim"])
def test_a_worker_fault_at_any_point_gives_the_claim_back_and_the_run_goes_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, point: str) -> None:
    """The fault is ours, not the node's: its claim goes back unspent at once (never held
    until a lease runs out), the node runs again, and the run completes."""
    state = kit.make_project(tmp_path / "p")
    specs, logs = kit.flock_tasks(tmp_path, {"task-a": 0.1, "task-b": 0.1})
    kit.add(state, specs)
    monkeypatch.setenv(fault_injection.FAULT_VARIABLE, f"{point}:raise:1")
    events: list[dict] = []
    began = time.monotonic()
    report = kit.run(state, events, runner="shell", workers=2)
    assert report["status"] == "complete", report["message"]
    assert time.monotonic() - began < 60  # never a wait on its own claim
    every = kit.nodes(state)
    assert {n["status"] for n in every.values()} == {"done"}
    assert all((n["attempts"], n["crashes"]) == (0, 0) for n in every.values())
    assert _held(state) == {}
    assert kit.overlaps(logs) == []
    assert all(count == 1 for count in _done_counts(state).values())
    faulted = [e for e in events if e["event"] == "finished" and e["outcome"] == "error"]
    assert len(faulted) == 1 and f"injected at {point}" in faulted[0]["summary"]
    assert kit.branches(state) == [] and kit.worktree_folders(state) == []


@both_backends
@pytest.mark.parametrize("action", ["raise", "locked"])
def test_a_fault_while_recording_is_never_held_on_either_backend(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, action: str) -> None:
    state = kit.make_project(tmp_path / "p")
    specs, _logs = kit.flock_tasks(tmp_path, {"task-a": 0.1})
    kit.add(state, specs, scaffold=False)
    monkeypatch.setenv(fault_injection.FAULT_VARIABLE, f"before_record:{action}:1")
    events: list[dict] = []
    report = kit.run(state, events, runner="shell")
    assert report["status"] == "complete", report["message"]
    node = kit.node(state, "task-a")
    assert (node["status"], node["attempts"], node["crashes"]) == ("done", 0, 0)
    first = next(e for e in events if e["event"] == "finished")
    assert first["outcome"] == ("error" if action == "raise" else "store_unavailable")
    assert "no attempt spent" not in first["summary"]  # the summary is the cause itself
    assert "claim is kept" not in first["summary"]  # it was given back at once


def test_a_worker_that_cannot_give_its_claim_back_is_reconciled_by_the_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Even when the give-back itself fails, the supervisor gives the claim back as soon as the
    worker is gone: the run never waits on a claim of its own ("1 node(s) in progress")."""
    from clavain.supervisor import worker

    # A short lease: without the reconciling, the claim would be freed only as a stale crash.
    state = kit.make_project(tmp_path / "p", {"defaults": {"lockLeaseSeconds": 5}})
    specs, _ = kit.flock_tasks(tmp_path, {"task-a": 0.1})
    kit.add(state, specs, scaffold=False)
    monkeypatch.setenv(fault_injection.FAULT_VARIABLE, "runner_ended:raise:1")
    failed_once: list[str] = []

    def cannot_give_back(ctx, conn, node, why):
        failed_once.append(node["id"])
        return f"{why}; its claim is kept until the store answers (the run gives it back)"

    real = worker.give_back
    monkeypatch.setattr(worker, "give_back",
                        lambda *a: cannot_give_back(*a) if not failed_once else real(*a))
    events: list[dict] = []
    began = time.monotonic()
    report = kit.run(state, events, runner="shell")
    assert report["status"] == "complete", report["message"]
    assert time.monotonic() - began < 60
    assert [e["released"] for e in events if e["event"] == "reconciled"] == [["task-a"]]
    assert (kit.node(state, "task-a")["attempts"], kit.node(state, "task-a")["crashes"]) == (0, 0)


def test_a_bug_in_every_worker_stops_the_run_with_every_claim_given_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state = kit.make_project(tmp_path / "p")
    specs, _ = kit.flock_tasks(tmp_path, {"task-a": 0.1, "task-b": 0.1})
    kit.add(state, specs, scaffold=False)
    monkeypatch.setenv(fault_injection.FAULT_VARIABLE, "worker_start:raise")
    report = kit.run(state, runner="shell", workers=2)
    assert report["status"] == "blocked" and report["reason"] == "worker_errors"
    # Two workers: a fourth error can land while the third is being reported.
    assert re.search(r"\b[34] worker errors in a row", report["message"]), report["message"]
    assert _held(state) == {}
    assert all(n["attempts"] == 0 for n in kit.nodes(state).values())


def test_no_worker_starts_once_a_worker_that_ended_meanwhile_reached_the_error_limit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The timing a loaded machine makes: every running worker fails while the supervisor
    claims the next node (after its look at what workers said). The limit (3 in a row) is
    reached before that node's worker would start, so it never starts: exactly 3 errors."""
    import threading

    from clavain.supervisor import supervise, worker

    state = kit.make_project(tmp_path / "p")
    specs, _ = kit.flock_tasks(tmp_path, {"task-a": 0.1, "task-b": 0.1})
    kit.add(state, specs, scaffold=False)
    events: list[dict] = []
    go = threading.Semaphore(0)  # lets one waiting worker fail
    reported = threading.Condition()
    put: list[str] = []  # the events workers put in, in order
    real_work = supervise.Supervisor._work

    def work(self, ctx, node, number, share):
        real_work(self, ctx, node, number, share)
        with reported:
            put.append(node["id"])
            reported.notify_all()

    def in_worker(point: str) -> None:
        if point == "worker_start":
            go.acquire(timeout=2)  # the worker a fixed supervisor never starts waits in vain
            raise fault_injection.InjectedFault("fault injected at worker_start")

    def in_supervisor(point: str) -> None:
        started = sum(e["event"] == "started" for e in events)
        if point == "after_claim" and started > len(put):  # a worker is running: it fails now
            go.release()
            with reported:
                assert reported.wait_for(lambda: len(put) == started, timeout=30)

    monkeypatch.setattr(supervise.Supervisor, "_work", work)
    monkeypatch.setattr(worker, "inject", in_worker)
    monkeypatch.setattr(supervise, "inject", in_supervisor)
    report = kit.run(state, events, runner="shell", workers=2)
    assert report["status"] == "blocked" and report["reason"] == "worker_errors"
    assert "3 worker errors in a row" in report["message"], report["message"]
    assert sum(e["event"] == "started" for e in events) == 3
    assert _held(state) == {}
    assert all(n["attempts"] == 0 for n in kit.nodes(state).values())


def test_a_fault_in_the_supervisor_after_its_claim_gives_the_claim_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state = kit.make_project(tmp_path / "p")
    specs, _ = kit.flock_tasks(tmp_path, {"task-a": 0.1})
    kit.add(state, specs, scaffold=False)
    monkeypatch.setenv(fault_injection.FAULT_VARIABLE, "after_claim:raise:1")
    with pytest.raises(fault_injection.InjectedFault):
        kit.run(state, runner="shell")
    node = kit.node(state, "task-a")
    assert (node["status"], node["lock_run_id"], node["attempts"]) == ("open", None, 0)


# ---------------------------------------------------------------- a damaged database

def _overwrite_index_page(db: Path, index: str) -> None:
    """Overwrite the root page of `index` with bytes no b-tree page has (after moving the WAL
    into the main file, so no newer copy of the page hides it)."""
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?",
                        (index,)).fetchone()[0]
    conn.close()
    with open(db, "r+b") as handle:
        handle.seek((root - 1) * page_size)
        handle.write(bytes([0x0D]) + b"\xff" * (page_size - 1))


def test_a_damaged_database_stops_the_run_at_the_first_damage(tmp_path: Path) -> None:
    state = kit.make_project(tmp_path / "p")
    specs, _ = kit.flock_tasks(tmp_path, {f"task-{n:02d}": 0.0 for n in range(25)})
    kit.add(state, specs, scaffold=False)
    from clavain.store.db import connect

    conn = connect(state.db)
    index = conn.execute("SELECT name FROM sqlite_master WHERE type = 'index' "
                         "AND tbl_name = 'kv_history' AND sql IS NOT NULL").fetchone()[0]
    conn.close()
    _overwrite_index_page(state.db, index)
    done, report = kit.run_cli_json(state, "run", "--runner", "shell", "--workers", "2",
                                    "--graph", "default")
    assert done.returncode == 1, done.stderr
    assert report["reason"] == "store_damaged"
    assert str(state.db) in report["message"] and "damaged" in report["message"]
    assert "clavain db recover" in report["message"]
    raw = sqlite3.connect(state.db)
    claims = raw.execute("SELECT count(*) FROM events WHERE note = 'claimed'").fetchone()[0]
    assert claims <= 2  # the workers' first claims only: none after the first damage
    doctor = json.loads(kit.run_cli_json(state, "doctor")[0].stdout)
    row = next(r for r in doctor["checks"] if r["check"] == "database")
    assert row["status"] == "fail" and str(state.db) in row["detail"]


# ---------------------------------------------------------------- kill -9

def _quick_work(tmp_path: Path) -> None:
    """From now on the node's work takes a moment (a runner already at work keeps its code)."""
    (tmp_path / "work.py").write_text(
        (tmp_path / "work.py").read_text().replace("time.sleep(seconds)", "time.sleep(0.1)"))


def _start_run(state, *args: str, **env: str):
    return kit.start_cli(state, "run", "--runner", "shell", "--graph", "default", *args, **env)


def _kill_when_started(proc, logs: Path, node: str, count: int) -> int:
    """kill -9 the supervisor once `node`'s work started `count` times; its runner's pid."""
    started = kit.wait_until(lambda: [pid for kind, n, pid in kit.executions(logs)
                                      if kind == "start" and n == node][count - 1:],
                             what=f"start #{count} of {node}")
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    return started[0]


@both_backends
def test_a_successor_never_runs_a_node_beside_a_dead_supervisors_runner(
        tmp_path: Path, backend: str | None) -> None:
    """Supervisor A dies (kill -9) and is not restarted; its runner lives on. B — another
    project folder on the same server, or the same folder without A's record — finds A's
    claim through the database alone, stops A's runner and only then runs the node."""
    state = kit.make_project(tmp_path / "a")
    specs, logs = kit.flock_tasks(tmp_path, {"task-a": 30})
    kit.add(state, specs, scaffold=False)
    orphan = _kill_when_started(_start_run(state), logs, "task-a", 1)
    assert _alive(orphan)
    if backend:  # a second machine's folder on the same host
        successor = kit.make_project(tmp_path / "b")
    else:  # the same folder, the crashed run's record gone: only the database knows
        successor = state
        for record in state.runs.glob("*/supervisor.json"):
            record.unlink()
    _quick_work(tmp_path)
    done, _report = kit.run_cli_json(successor, "run", "--runner", "shell", "--graph",
                                    "default")
    assert done.returncode == 0, done.stderr
    assert not _alive(orphan)
    assert kit.overlaps(logs) == []
    node = kit.node(state, "task-a")
    assert (node["status"], node["attempts"], node["crashes"]) == ("done", 0, 1)


@both_backends
def test_three_supervisor_kills_never_fail_a_task(tmp_path: Path) -> None:
    state = kit.make_project(tmp_path / "p")
    specs, logs = kit.flock_tasks(tmp_path, {"task-a": 30})
    kit.add(state, specs, scaffold=False)
    for kill in range(1, 4):
        orphan = _kill_when_started(_start_run(state), logs, "task-a", kill)
        assert kit.node(state, "task-a")["status"] == "in_progress"
    _quick_work(tmp_path)
    done, _report = kit.run_cli_json(state, "run", "--runner", "shell", "--graph", "default")
    assert done.returncode == 0, done.stderr
    assert not _alive(orphan)
    node = kit.node(state, "task-a")
    assert (node["status"], node["attempts"], node["crashes"]) == ("done", 0, 3)
    assert kit.overlaps(logs) == []
    shown = kit.run_cli_json(state, "graph", "show", "task-a")[1]
    assert shown["crashes"] == 3


def test_a_kill_between_recording_and_clean_up_leaves_no_git_clutter(tmp_path: Path) -> None:
    state = kit.make_project(tmp_path / "p")
    specs, _ = kit.flock_tasks(tmp_path, {"task-a": 0.1, "task-b": 0.1})
    kit.add(state, specs, scaffold=False)
    proc = _start_run(state, "--workers", "2",
                      **{fault_injection.FAULT_VARIABLE: "after_record:kill:1"})
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert kit.branches(state) and kit.worktree_folders(state)  # what the kill left
    # An orphaned runner still at work keeps its worktree in use: wait until none is left.
    kit.wait_until(lambda: not run_record.live_runs(state), what="the orphans' end")
    doctor = json.loads(kit.run_cli_json(state, "doctor")[0].stdout)
    row = next(r for r in doctor["checks"] if r["check"] == "git")
    assert row["status"] == "warn" and "the next `clavain run` removes them" in row["detail"]
    done, _report = kit.run_cli_json(state, "run", "--runner", "shell", "--workers", "2",
                                    "--graph", "default")
    assert done.returncode == 0, done.stderr
    assert kit.branches(state) == [] and kit.worktree_folders(state) == []
    assert "removed what crashed runs left in git" in done.stderr
    assert {n["status"] for n in kit.nodes(state).values()} == {"done"}


# ---------------------------------------------------------------- the store is away

def test_a_store_that_never_answers_ends_the_run_with_its_cause(tmp_path: Path) -> None:
    from tests.pgserver import free_port

    state = kit.make_project(tmp_path / "p", {"store": {"outageWaitSeconds": 2}})
    closed = f"postgresql://someone@127.0.0.1:{free_port()}/nowhere"
    began = time.monotonic()
    done = kit.start_cli(state, "run", "--runner", "shell", CLAVAIN_DB=closed)
    _out, err = done.communicate(timeout=60)
    assert done.returncode == 2, err
    assert time.monotonic() - began >= 2  # waited, with a countdown
    assert "waiting (store)" in err
    last = err.strip().splitlines()[-1]
    assert "did not answer for 2 s" in last and "store.outageWaitSeconds" in last


def test_a_verify_that_cannot_reach_the_store_says_so(tmp_path: Path) -> None:
    """The shell verifier says in its JSON that the store was at fault, so a supervisor gives
    the node back instead of charging a failed check (`worker_claims.settle_verify`)."""
    pytest.importorskip("psycopg")
    from tests.pgserver import free_port

    state = kit.make_project(tmp_path / "p")
    closed = f"postgresql://someone@127.0.0.1:{free_port()}/nowhere"
    done = kit.start_cli(state, "verify", "v-x", "--json", CLAVAIN_DB=closed)
    out, _ = done.communicate(timeout=60)
    assert json.loads(out)["store"] == "unavailable"


# ---------------------------------------------------------------- text no backend refuses

@both_backends
def test_a_result_holding_nul_is_recorded_alike_on_both_backends(tmp_path: Path) -> None:
    runner = kit.script(tmp_path / "nul.py", r"""
        import json, sys
        sys.stdin.read()
        result = {"status": "success", "summary": "bad" + chr(0) + "byte",
                  "errors": ["lone " + chr(0xD800) + " surrogate"]}
        print("<result>" + json.dumps(result) + "</result>")  # \u0000 and \ud800 escapes
    """)
    state = kit.make_project(tmp_path / "p", {"runners": {"nul": {"command": [str(runner)]}}})
    kit.add(state, [{"id": "task-a", "type": "task", "title": "a", "verify": [PASSES]}],
            scaffold=False)
    report = kit.run(state, runner="nul")
    assert report["status"] == "complete", report["message"]
    from clavain.store.graph_db import open_graph_db
    from clavain.workgraph import kv
    from clavain.workgraph.graphs import DEFAULT_GRAPH, Graph

    conn = open_graph_db(state)
    try:
        summary = kv.get(Graph(conn, DEFAULT_GRAPH, state), "task-a", "out.summary")["value"]
    finally:
        conn.close()
    assert summary.startswith("bad\u2400byte") and "NUL bytes" in summary


@both_backends
def test_a_kv_value_holding_nul_comes_back_exactly(tmp_path: Path) -> None:
    state = kit.make_project(tmp_path / "p")
    kit.add(state, [{"id": "task-a", "type": "task"}], scaffold=False)
    value = "before\x00after"
    done = subprocess.run(
        [str(kit.REPO / "bin" / "clavain"), "kv", "put", "--node", "task-a", "--key", "out.raw",
         "--value-file", "-"], input=value, text=True, capture_output=True,
        cwd=state.project, env=kit.cli_env(state), timeout=60)
    assert done.returncode == 0, done.stderr
    got, entry = kit.run_cli_json(state, "kv", "get", "--node", "task-a", "--key", "out.raw")
    assert got.returncode == 0, got.stderr
    assert entry["value"] == value


@both_backends
def test_a_worker_whose_claim_is_taken_back_stops_its_runner(tmp_path: Path) -> None:
    """Another host took the node (its lease judged ours gone): our runner is stopped at the
    next renewal instead of working on beside the new one, and nothing of it is recorded."""
    import threading

    from clavain.store.graph_db import open_graph_db

    state = kit.make_project(tmp_path / "p", {"defaults": {"lockLeaseSeconds": 3}})
    specs, logs = kit.flock_tasks(tmp_path, {"task-a": 60})
    kit.add(state, specs, scaffold=False)

    def take_it() -> None:
        kit.wait_until(lambda: kit.executions(logs), what="the runner's start")
        conn = open_graph_db(state)
        try:
            conn.execute("UPDATE nodes SET lock_run_id = 'thief', lock_host = 'elsewhere', "
                         "lock_generation = lock_generation + 1 WHERE id = 'task-a'")
        finally:
            conn.close()

    thief = threading.Thread(target=take_it)
    thief.start()
    events: list[dict] = []
    began = time.monotonic()
    kit.run(state, events, runner="shell", max_iterations=1)
    thief.join(30)
    assert time.monotonic() - began < 30  # not the runner's 60 s
    finished = next(e for e in events if e["event"] == "finished")
    assert finished["outcome"] == "not_recorded" and "taken back" in finished["summary"]
    [(kind, _, pid)] = kit.executions(logs)
    assert kind == "start" and not _alive(pid)
    node = kit.node(state, "task-a")
    assert (node["lock_run_id"], node["status"], node["attempts"]) == ("thief", "in_progress", 0)
