"""`clavain run` end to end on real SQLite, real git and real runner processes (the shell runner,
configured runners written as scripts, and a stand-in `claude` that prints the JSON report the
real one prints)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from clavain.errors import ClavainError
from clavain.supervisor.metrics import peak_concurrency
from clavain.workgraph.ownership import ownership_overlaps
from tests.checks import PASSES
from tests.supervisor import kit

# Both workgraph backends (tests/conftest.py `backend`).
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("backend")]


def _tasks(*specs: tuple[str, list[str], list[str]]) -> list[dict]:
    return [{"id": node_id, "type": "task", "title": node_id, "commands": commands,
             "verify": verify} for node_id, commands, verify in specs]


def test_shell_runner_drives_a_graph_to_the_end_with_no_llm(tmp_path: Path) -> None:
    state = kit.make_project(tmp_path / "p")
    kit.add(state, _tasks(("task-a", ["echo a > a.txt"], ["grep -qx a a.txt"]),
                          ("task-b", ["echo b > b.txt"], ["grep -qx b b.txt"])))
    events: list[dict] = []
    report = kit.run(state, events, runner="shell")
    assert report["status"] == "complete", report["message"]
    assert report["exit_code"] == 0
    assert all(n["status"] == "done" for n in kit.nodes(state).values())
    metrics = report["metrics"]
    assert metrics["llm_invocations"] == 0
    assert metrics["verify_without_llm"] == 3  # two verify nodes and the final one
    assert metrics["nodes"] == {"done": 6}  # 2 tasks, 2 verify, integrate, final verify
    on_disk = json.loads((state.runs / report["run_id"] / "metrics.json").read_text())
    for key in ("nodes", "llm_invocations", "llm_invocations_by_role", "verify_without_llm",
                "tokens", "cost_usd", "wall_seconds", "peak_concurrency", "timeline"):
        assert key in on_disk
    assert [e["event"] for e in events].count("started") == 6
    record = json.loads((state.runs / report["run_id"] / "supervisor.json").read_text())
    assert record["status"] == "complete" and record["runners"] == {}


def test_a_failing_command_is_a_failed_attempt_with_its_reason(tmp_path: Path) -> None:
    state = kit.make_project(tmp_path / "p", {"defaults": {"maxAttempts": 1}})
    kit.add(state, _tasks(("task-a", ["echo nope; exit 3"], [PASSES])))
    report = kit.run(state, runner="shell")
    assert report["status"] == "blocked"
    assert kit.node(state, "task-a")["status"] == "failed"
    from clavain.store.graph_db import open_graph_db
    from clavain.workgraph import kv
    from clavain.workgraph.graphs import Graph

    conn = open_graph_db(state)
    summary = kv.get(Graph(conn, "default", state), "task-a", "err.summary")["value"]
    conn.close()
    assert "exited 3" in summary and "echo nope" in summary


@pytest.mark.parametrize(("output", "status", "reason"), [
    ('<result>{"status":"success","summary":"first"}</result> then '
     '<result>{"status":"fail","summary":"second","errors":["x"]}</result>', "open", "second"),
    ("I would print <result> at the end but forgot.", "open", "no valid <result>"),
    ('<result>{"status":"success","summary":"cut</result>', "open", "no valid <result>"),
    ('<result>{"version":1,"status":"finished","summary":"s"}</result>', "open",
     "status"),
    ('<result>{"version":2,"status":"success","summary":"from the future"}</result>', "open",
     "version"),
    ('prose mentions <result>{"status":"fail"}</result> then the real one '
     '<result>{"status":"success","summary":"ok"}</result>', "done", None),
])
def test_the_last_result_block_decides(tmp_path: Path, output: str, status: str,
                                       reason: str | None) -> None:
    runner = kit.script(tmp_path / "runner.py", f"import sys\nsys.stdin.read()\n"
                                                f"print({output!r})\n")
    state = kit.make_project(tmp_path / "p", {"runners": {"fake": {"command": [str(runner)]}}})
    kit.add(state, _tasks(("task-a", [], [PASSES])), scaffold=False)
    kit.run(state, runner="fake", max_iterations=1)
    node = kit.node(state, "task-a")
    assert node["status"] == status
    if reason:
        assert node["attempts"] == 1
        from clavain.store.graph_db import open_graph_db
        from clavain.workgraph import kv
        from clavain.workgraph.graphs import Graph

        conn = open_graph_db(state)
        assert reason in kv.get(Graph(conn, "default", state), "task-a", "err.summary")["value"]
        conn.close()


def test_a_runner_past_its_timeout_is_killed_and_counted(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    runner = kit.script(tmp_path / "slow.py", f"""
        import os, sys, time, subprocess
        sys.stdin.read()
        child = subprocess.Popen(["sleep", "300"])
        open({str(pidfile)!r}, "w").write(f"{{os.getpid()}} {{child.pid}}")
        time.sleep(300)
    """)
    state = kit.make_project(tmp_path / "p", {"runners": {"slow": {"command": [str(runner)],
                                                                   "timeoutSeconds": 1}}})
    kit.add(state, _tasks(("task-a", [], [PASSES])), scaffold=False)
    report = kit.run(state, runner="slow", max_iterations=1)
    node = kit.node(state, "task-a")
    assert node["attempts"] == 1 and node["lock_run_id"] is None
    assert "timed out" in report["metrics"]["timeline"][0]["summary"]
    for pid in map(int, pidfile.read_text().split()):
        assert not _alive(pid), f"pid {pid} survived the timeout"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purpose.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def test_a_rate_limited_runner_releases_its_node_and_the_run_waits(tmp_path: Path) -> None:
    runner = kit.rate_limited_once(tmp_path)
    state = kit.make_project(tmp_path / "p", {"runners": {"lim": {"command": [str(runner)]}}})
    kit.add(state, _tasks(("task-a", [], [PASSES])), scaffold=False)
    events: list[dict] = []
    began = time.monotonic()
    report = kit.run(state, events, runner="lim")
    node = kit.node(state, "task-a")
    assert node["status"] == "done"
    assert node["attempts"] == 0  # the limit spent no attempt
    assert report["metrics"]["nodes"] == {"rate_limited": 1, "done": 1}
    waits = [e for e in events if e["event"] == "waiting"]
    assert waits and waits[0]["why"] == "rate_limit" and waits[0]["seconds_left"] > 0
    assert time.monotonic() - began >= 1.5


def test_parallel_workers_really_run_at_once_and_never_overlap(tmp_path: Path) -> None:
    runner = kit.script(tmp_path / "sleepy.py", """
        import sys, time
        sys.stdin.read()
        time.sleep(1.0)
        print('<result>{"status": "success", "summary": "slept"}</result>')
    """)
    state = kit.make_project(tmp_path / "p", {"runners": {"sleepy": {"command": [str(runner)]}}})
    specs = [{"id": f"task-{n}", "type": "task", "title": n, "ownership": [f"src/{n}/**"],
              "verify": [PASSES]} for n in ("a", "b", "c")]
    specs += [{"id": "task-d", "type": "task", "title": "d", "ownership": ["src/a/x.py"],
               "verify": [PASSES]}]
    kit.add(state, specs, scaffold=False)
    report = kit.run(state, runner="sleepy", workers=3)
    assert report["status"] == "complete", report["message"]
    timeline = report["metrics"]["timeline"]
    assert report["metrics"]["peak_concurrency"] == 3
    assert peak_concurrency(timeline) == 3
    owned = {s["id"]: s["ownership"] for s in specs}
    for one in timeline:
        for other in timeline:
            if one is other or not ownership_overlaps(owned[one["node"]], owned[other["node"]]):
                continue
            assert one["end_epoch"] <= other["start_epoch"] or \
                other["end_epoch"] <= one["start_epoch"], (one["node"], other["node"])
    assert {e["worker"] for e in timeline} == {1, 2, 3}


def test_parallel_work_is_merged_and_a_conflict_fails_the_node(tmp_path: Path) -> None:
    state = kit.make_project(tmp_path / "p", {"defaults": {"maxAttempts": 1}})
    kit.add(state, _tasks(("task-a", ["echo A > shared.txt; echo a > a.txt"], [PASSES]),
                          ("task-b", ["echo B > shared.txt; echo b > b.txt"], [PASSES])),
            scaffold=False)
    report = kit.run(state, runner="shell", workers=2)
    statuses = {n: kit.node(state, n)["status"] for n in ("task-a", "task-b")}
    assert sorted(statuses.values()) == ["done", "failed"], report
    loser = next(n for n, s in statuses.items() if s == "failed")
    winner = next(n for n, s in statuses.items() if s == "done")
    entry = next(e for e in report["metrics"]["timeline"] if e["node"] == loser)
    assert "shared.txt" in entry["summary"]
    assert (state.project / f"{winner[-1]}.txt").exists()
    assert not (state.project / f"{loser[-1]}.txt").exists()
    assert kit.git(state.project, "status", "--porcelain", "--untracked-files=no") == ""
    assert not list(state.worktrees.glob("*/task-*"))


def test_parallel_runs_refuse_a_dirty_tree(tmp_path: Path) -> None:
    state = kit.make_project(tmp_path / "p")
    (state.project / "README.md").write_text("changed by a person\n")
    kit.add(state, _tasks(("task-a", ["true"], [PASSES])), scaffold=False)
    with pytest.raises(ClavainError, match=r"README\.md"):
        kit.run(state, runner="shell", workers=2)
    assert (state.project / "README.md").read_text() == "changed by a person\n"


def test_claude_runner_records_usage_and_the_budget_stops_the_run(tmp_path: Path) -> None:
    fake = kit.script(tmp_path / "claude", kit.FAKE_CLAUDE)
    state = kit.make_project(tmp_path / "p", {"budgets": {"maxCostUsd": 0.6}})
    kit.add(state, _tasks(*[(f"task-{n}", [], [PASSES]) for n in "abcd"]), scaffold=False)
    os.environ["CLAVAIN_CLAUDE_BIN"] = str(fake)
    try:
        report = kit.run(state, runner="claude")
    finally:
        del os.environ["CLAVAIN_CLAUDE_BIN"]
    assert report["status"] == "budget" and report["exit_code"] == 3
    # Reserved before it starts: the third call, projected at the run's own $0.25, does not
    # fit the $0.10 left, so it never starts (the old rule started it and passed the cap).
    assert "task-c needs $0.2500" in report["message"]
    assert "$0.1000 of the $0.6000 cap" in report["message"]
    metrics = report["metrics"]
    assert metrics["llm_invocations"] == 2
    assert metrics["llm_invocations_by_role"] == {"executor": 2}
    assert metrics["tokens"] == 2 * 1200 and metrics["cost_usd"] == pytest.approx(0.5)
    assert len([n for n in report["left"] if n["status"] == "open"]) == 2


def test_max_iterations_and_once_stop_cleanly(tmp_path: Path) -> None:
    state = kit.make_project(tmp_path / "p")
    kit.add(state, _tasks(("task-a", ["true"], [PASSES]), ("task-b", ["true"], [PASSES])),
            scaffold=False)
    report = kit.run(state, runner="shell", max_iterations=1)
    assert report["status"] == "stopped_at_limit" and len(report["done"]) == 1
    assert "--max-iterations" in report["message"]


def test_dry_run_projects_calls_and_cost_per_role(tmp_path: Path) -> None:
    from clavain.supervisor.projection import project

    state = kit.make_project(tmp_path / "p")
    kit.add(state, [{"id": "plan-x", "type": "plan", "title": "plan"},
                    *_tasks(("task-a", [], [PASSES]))])
    plan = project(state, "default")
    roles = {row["id"]: (row["role"], row["runner"], row["model"]) for row in plan["nodes"]}
    assert roles["plan-x"] == ("planner", "claude", "opus")
    assert roles["task-a"] == ("executor", "claude", None)
    assert roles["verify-task-a"] == ("verifier", "shellVerify", None)
    assert roles["integrate"] == ("integrator", "shell", None)
    assert plan["totals"]["llm_calls"] == 2 and plan["source"] == "defaults"
    assert plan["totals"]["cost_usd"] == pytest.approx(0.4)
    assert plan["planned_tasks_not_counted"] == 6
    shell = project(state, "default", runner_override="shell")
    assert shell["totals"]["llm_calls"] == 0


def _wait_for(path: Path, seconds: float = 20) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"{path} never appeared")


def _hanging_runner(tmp_path: Path) -> tuple[Path, Path]:
    pidfile = tmp_path / "runner.pid"
    runner = kit.script(tmp_path / "hang.py", f"""
        import os, sys, time
        sys.stdin.read()
        if os.environ.get("CLAVAIN_NODE_ID") == "task-b":
            open({str(pidfile)!r}, "w").write(str(os.getpid()))
            time.sleep(600)
        print('<result>{{"status": "success", "summary": "quick"}}</result>')
    """)
    return runner, pidfile


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_releases_claims_and_kills_runners(tmp_path: Path, signum: int) -> None:
    runner, pidfile = _hanging_runner(tmp_path)
    state = kit.make_project(tmp_path / "p", {"runners": {"hang": {"command": [str(runner)]}}})
    kit.add(state, _tasks(("task-b", [], [PASSES])), scaffold=False)
    proc = kit.start_cli(state, "run", "--runner", "hang", "--graph", "default")
    runner_pid = int(_wait_for(pidfile))
    os.kill(proc.pid, signum)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    node = kit.node(state, "task-b")
    assert node["status"] == "open" and node["lock_run_id"] is None and node["attempts"] == 0
    assert not _alive(runner_pid)
    assert "interrupted" in out
    final = next(line for line in out.splitlines() if line.startswith("Run "))
    # Only what happened: the worker gave its node back; nothing was left to release.
    assert f"stopped by {signal.Signals(signum).name}" in final and "claim" not in final


def test_kill_9_then_resume_redoes_nothing_and_stops_the_orphan(tmp_path: Path) -> None:
    runner, pidfile = _hanging_runner(tmp_path)
    calls = tmp_path / "calls.log"
    counting = kit.script(tmp_path / "count.py", f"""
        import os, sys
        sys.stdin.read()
        open({str(calls)!r}, "a").write(os.environ["CLAVAIN_NODE_ID"] + "\\n")
        print('<result>{{"status": "success", "summary": "ok"}}</result>')
    """)
    # No budget: a runner killed unmeasured would be charged its share, all that was left
    # (tests/supervisor/test_budget_reserve.py); this is about the runners and claims.
    state = kit.make_project(tmp_path / "p", {"runners": {"hang": {"command": [str(runner)]},
                                                          "count": {"command": [str(counting)]}},
                                              "budgets": {"enabled": False}})
    kit.add(state, [{"id": "task-a", "type": "task", "title": "a", "verify": [PASSES]},
                    {"id": "task-b", "type": "task", "title": "b", "verify": [PASSES],
                     "dependsOn": ["task-a"]}], scaffold=False)
    proc = kit.start_cli(state, "run", "--runner", "hang", "--graph", "default")
    orphan = int(_wait_for(pidfile))
    assert kit.node(state, "task-a")["status"] == "done"
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    assert _alive(orphan), "the runner should outlive a kill -9 of its supervisor"
    run_id = next(p.parent.name for p in state.runs.glob("*/supervisor.json"))
    resumed = subprocess.run(
        [str(kit.REPO / "bin" / "clavain"), "run", "--resume", run_id, "--runner", "count",
         "--json"], cwd=state.project, env=kit.cli_env(state), capture_output=True, text=True,
        timeout=60)
    assert resumed.returncode == 0, resumed.stderr
    report = json.loads(resumed.stdout)
    assert report["recovered"][0]["released"] == ["task-b"]
    assert report["recovered"][0]["stopped_runners"] == ["task-b"]
    assert not _alive(orphan)
    assert calls.read_text().split() == ["task-b"]  # task-a, done before the crash, not redone
    assert kit.node(state, "task-b")["attempts"] == 0
    assert report["metrics"]["sessions"] == 2


def test_report_includes_the_runs_metrics(tmp_path: Path) -> None:
    state = kit.make_project(tmp_path / "p")
    kit.add(state, _tasks(("task-a", ["true"], [PASSES])))
    report = kit.run(state, runner="shell")
    out = subprocess.run([str(kit.REPO / "bin" / "clavain"), "report", "--run",
                          report["run_id"]], cwd=state.project, env=kit.cli_env(state),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert f"Supervised run {report['run_id']}" in out.stdout
    assert "verify nodes with no LLM: 2" in out.stdout


def test_a_long_runner_keeps_its_lease_alive(tmp_path: Path) -> None:
    runner = kit.script(tmp_path / "long.py", """
        import sys, time
        sys.stdin.read()
        time.sleep(4)
        print('<result>{"status": "success", "summary": "slow but alive"}</result>')
    """)
    state = kit.make_project(tmp_path / "p", {"runners": {"long": {"command": [str(runner)]}},
                                              "defaults": {"lockLeaseSeconds": 2}})
    kit.add(state, _tasks(("task-a", [], [PASSES])), scaffold=False)
    import threading

    from clavain.store.graph_db import open_graph_db
    from clavain.workgraph.graphs import Graph
    from clavain.workgraph.schedule import next_node

    released: list[list[str]] = []

    def meddle() -> None:  # a second scheduler looks for stale locks while the runner works
        conn = open_graph_db(state)
        for _ in range(6):
            time.sleep(0.5)
            released.append(next_node(Graph(conn, "default", state))["released"])
        conn.close()

    other = threading.Thread(target=meddle)
    other.start()
    kit.run(state, runner="long")
    other.join()
    node = kit.node(state, "task-a")
    assert node["status"] == "done" and node["attempts"] == 0
    assert not any(released), released


def test_a_node_is_reported_finished_before_what_it_made_ready_starts(tmp_path: Path) -> None:
    state = kit.make_project(tmp_path / "p")
    kit.add(state, _tasks(*((f"task-{n}", ["true"], [PASSES]) for n in "abcdef")))
    events: list[dict] = []
    report = kit.run(state, events, runner="shell", workers=2)
    assert report["status"] == "complete", report["message"]
    order = [(e["event"], e["node"]) for e in events if e["event"] in ("started", "finished")]
    every = kit.nodes(state)
    for index, (kind, node_id) in enumerate(order):
        if kind != "started":
            continue
        for dep in every[node_id]["depends_on"]:
            assert ("finished", dep) in order[:index], (node_id, dep, order)
