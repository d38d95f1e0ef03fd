import json
import os
import sqlite3
import time
from pathlib import Path

import pytest

from clavain.errors import ClavainError
from clavain.paths import StatePaths
from clavain.store.db import connect
from clavain.workgraph import edits, kv, nodes
from clavain.workgraph.graphs import DEFAULT_GRAPH, Graph
from clavain.workgraph.verifier import result_line, run_verify, safe_path_part


@pytest.fixture
def state(project: Path) -> StatePaths:
    return StatePaths.discover()


@pytest.fixture
def conn(state: StatePaths) -> sqlite3.Connection:
    connection = connect(state.db)
    yield connection
    connection.close()


def _verify_node(g: Graph, commands: list[str], node_id: str = "verify-a") -> str:
    edits.add_nodes(g, [{"id": node_id, "type": "verify", "verify": commands}])
    return node_id


def test_all_commands_pass(g, state, project) -> None:
    node = _verify_node(g, ["echo first", "pwd; echo node=$CLAVAIN_NODE_ID"])
    report = run_verify(g, node, apply=False, run_id="run-1")

    assert report["result"] == {"status": "success", "summary": "all 2 verify commands passed",
                                "errors": []}
    run_dir = state.runs / "run-1" / node
    assert "first" in (run_dir / "cmd-1.log").read_text()
    second = (run_dir / "cmd-2.log").read_text()
    # Commands run in the project root with the runner's pointers.
    assert str(project) in second and f"node={node}" in second
    assert json.loads((run_dir / "result.json").read_text()) == report["result"]
    assert [c["exit_code"] for c in report["commands"]] == [0, 0]
    # --no-apply leaves the graph alone.
    assert nodes.get_node(g, node)["status"] == "open"
    assert kv.ls(g, node) == []


def test_first_failure_is_reported_and_stops_the_rest(g, state) -> None:
    node = _verify_node(g, ["true", "echo boom >&2; exit 3", "touch ran-third"])
    report = run_verify(g, node, apply=False, run_id="run-2")

    result = report["result"]
    assert result["status"] == "fail"
    assert "exited 3" in result["summary"] and "exit 3" in result["summary"]
    [error] = result["errors"]
    assert "echo boom >&2; exit 3" in error and "boom" in error  # the command and its output
    assert not (state.project / "ran-third").exists()
    assert not (state.runs / "run-2" / node / "cmd-3.log").exists()
    assert [c["index"] for c in report["commands"]] == [1, 2]


def _running(pid: int) -> bool:
    """Alive and not a zombie: a killed orphan stays a zombie until init gets round to it."""
    stat = Path(f"/proc/{pid}/stat")
    if stat.parent.parent.joinpath("self").exists():
        try:
            return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except FileNotFoundError:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _settle(pid: int, limit: float = 10.0) -> int:
    """SIGKILL is delivered asynchronously: right after killpg the target can still show as
    running for a moment. Give it time to die (never a timing assertion: just a bound)."""
    deadline = time.monotonic() + limit
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    return pid


def test_timeout_kills_the_whole_process_group(g, state, tmp_path) -> None:
    pid_file = tmp_path / "child.pid"
    # The child outlives bash unless the group is killed.
    node = _verify_node(g, [f"sleep 300 & echo $! > {pid_file}; wait"])
    report = run_verify(g, node, apply=False, run_id="run-3", timeout=1)

    result = report["result"]
    assert result["status"] == "fail"
    assert "timed out after 1s" in result["summary"]
    assert report["commands"][0]["timed_out"] is True
    assert report["commands"][0]["exit_code"] is None
    assert not _running(_settle(int(pid_file.read_text())))
    assert "timed out" in (state.runs / "run-3" / node / "cmd-1.log").read_text()


def test_background_leftovers_of_a_passing_command_are_killed(g, state, tmp_path) -> None:
    pid_file = tmp_path / "leftover.pid"
    node = _verify_node(g, [f"sleep 300 & echo $! > {pid_file}"])
    assert run_verify(g, node, apply=False)["result"]["status"] == "success"
    assert not _running(_settle(int(pid_file.read_text())))


def test_ids_cannot_escape_the_runs_folder() -> None:
    assert safe_path_part("../../etc") == "_.._etc"
    assert safe_path_part("task-a:1") == "task-a:1"
    assert safe_path_part("") == "_"


def test_timeout_comes_from_config(g, state) -> None:
    state.config.write_text(json.dumps({"defaults": {"verifyTimeoutSeconds": 1}}))
    node = _verify_node(g, ["sleep 300"])
    report = run_verify(g, node, apply=False, run_id="run-4")
    assert "timed out after 1s" in report["result"]["summary"]


def test_no_commands_is_a_failure(g, state) -> None:
    node = _verify_node(g, [])
    result = run_verify(g, node, apply=False, run_id="r")["result"]
    assert result["status"] == "fail" and "no commands" in result["summary"]


def test_apply_success_marks_the_node_done(g, state) -> None:
    node = _verify_node(g, ["true"])
    report = run_verify(g, node, run_id="run-5")
    assert report["applied"] is True
    assert nodes.get_node(g, node)["status"] == "done"
    assert kv.get(g, node, "out.summary")["value"] == "all 1 verify commands passed"
    assert kv.get(g, node, "out.last_result_path")["value"] == report["result_path"]


def test_apply_failure_records_the_error_and_retries(g, state) -> None:
    node = _verify_node(g, ["exit 1"])
    run_verify(g, node, run_id="run-6")
    after = nodes.get_node(g, node)
    assert after["status"] == "open" and after["attempts"] == 1
    assert "exit 1" in kv.get(g, node, "err.summary")["value"]
    log = kv.get(g, node, "out.last_stdout_path")["value"]
    assert log.endswith("cmd-1.log") and Path(log).exists()


def test_apply_refuses_a_task_node_before_running_anything(g, state) -> None:
    edits.add_nodes(g, [{"id": "task-a", "type": "task", "verify": ["touch ran"]}])
    with pytest.raises(ClavainError, match="decides only verify and final_verify nodes"):
        run_verify(g, "task-a", run_id="run-7")
    assert not (state.project / "ran").exists()
    assert not (state.runs / "run-7").exists()
    # Just running a task's commands is fine.
    assert run_verify(g, "task-a", apply=False)["result"]["status"] == "success"


def test_apply_refuses_a_node_that_is_already_done(g, state) -> None:
    node = _verify_node(g, ["true"])
    run_verify(g, node, run_id="run-8")
    with pytest.raises(ClavainError, match="is done"):
        run_verify(g, node, run_id="run-9")
    assert not (state.runs / "run-9").exists()


def test_unknown_node_and_bad_timeout(g, state) -> None:
    with pytest.raises(ClavainError, match="unknown node 'nope'"):
        run_verify(g, "nope")
    node = _verify_node(g, ["true"])
    with pytest.raises(ClavainError, match="positive"):
        run_verify(g, node, timeout=0)


def test_result_line_is_one_parseable_line() -> None:
    line = result_line({"status": "fail", "summary": "a\nb", "errors": ["x"]})
    assert "\n" not in line
    assert json.loads(line.removeprefix("<result>").removesuffix("</result>"))["summary"] == "a\nb"


def test_missing_bash_is_one_error_before_anything_runs(g, state, tmp_path,
                                                        monkeypatch) -> None:
    node = _verify_node(g, ["true"])
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(ClavainError, match="bash"):
        run_verify(g, node, run_id="run-nobash")
    assert not (state.runs / "run-nobash").exists()
    after = nodes.get_node(g, node)
    assert (after["status"], after["attempts"]) == ("open", 0)


def test_a_timeout_that_is_not_a_number_is_refused(g, state) -> None:
    node = _verify_node(g, ["true"])
    with pytest.raises(ClavainError, match="positive"):
        run_verify(g, node, timeout=float("nan"), run_id="run-nan")
    assert not (state.runs / "run-nan").exists()


def test_a_very_long_failing_command_still_gives_an_applicable_result(g, state) -> None:
    command = "exit 3 #" + "x" * 30_000
    node = _verify_node(g, [command])
    report = run_verify(g, node, run_id="run-long")
    assert report["applied"] is True and report["result"]["status"] == "fail"
    assert nodes.get_node(g, node)["attempts"] == 1


def test_state_dir_elsewhere_does_not_move_where_commands_run(
        project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """CLAVAIN_STATE_DIR moves the state, never the project the checks run in."""
    monkeypatch.setenv("CLAVAIN_STATE_DIR", str(tmp_path / "state-elsewhere"))
    state = StatePaths.discover()
    assert state.project == project
    conn = connect(state.db)
    try:
        g = Graph(conn, DEFAULT_GRAPH, state)
        node = _verify_node(g, ["pwd > where.txt"])
        run_verify(g, node, apply=False, run_id="run-elsewhere")
    finally:
        conn.close()
    assert (project / "where.txt").read_text().strip() == str(project)
    assert not (tmp_path / "where.txt").exists()


def test_a_long_verify_renews_its_lease(g, state) -> None:
    """A verify that runs longer than the lease is alive: another scheduling step must not
    release it as stale (and then refuse its result)."""
    state.config.write_text(json.dumps({"defaults": {"lockLeaseSeconds": 2}}))
    node = _verify_node(g, ["sleep 3.5; clavain graph next --json > next.json; true"])
    report = run_verify(g, node, run_id="long")
    assert report["apply"]["to"] == "done"
    seen = json.loads((state.project / "next.json").read_text())
    assert seen["released"] == []


def test_a_signal_while_the_result_is_recorded_waits_for_it(g, state, monkeypatch) -> None:
    import signal

    from clavain.workgraph import verifier
    from clavain.workgraph.shell import Interrupted

    real_apply = verifier.apply_result

    def apply_then_signalled(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)  # lands while recording: held, not lost
        return real_apply(*args, **kwargs)

    monkeypatch.setattr(verifier, "apply_result", apply_then_signalled)
    node = _verify_node(g, ["true"])
    with pytest.raises(Interrupted) as stopped:
        run_verify(g, node, run_id="r-sig")
    assert stopped.value.recorded and stopped.value.signum == signal.SIGTERM
    assert nodes.get_node(g, node)["status"] == "done"
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # handlers restored


def test_a_signal_while_the_command_starts_still_kills_its_process_group(
        g, state, tmp_path, monkeypatch) -> None:
    """The command runs before Popen returns (on a loaded machine, for a while): a signal
    then must still stop its group, not leave it running with the claim given back."""
    import signal
    import subprocess

    from clavain.workgraph.shell import Interrupted

    pid_file = tmp_path / "child.pid"
    real_popen = subprocess.Popen

    def popen_then_signalled(argv, *args, **kwargs):
        proc = real_popen(argv, *args, **kwargs)
        if str(pid_file) not in " ".join(map(str, argv)):
            return proc  # git, for the tree's fingerprint
        deadline = time.monotonic() + 60
        while not (pid_file.exists() and pid_file.read_text().strip()):  # the command runs
            assert time.monotonic() < deadline, "the command never started"
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGTERM)  # handled before Popen's caller goes on
        return proc

    monkeypatch.setattr(subprocess, "Popen", popen_then_signalled)
    node = _verify_node(g, [f"sleep 300 & echo $! > {pid_file}; wait"])
    with pytest.raises(Interrupted) as stopped:
        run_verify(g, node, run_id="r-start")
    assert stopped.value.signum == signal.SIGTERM and not stopped.value.recorded
    assert not _running(_settle(int(pid_file.read_text())))
    held = nodes.get_node(g, node)
    assert (held["status"], held["attempts"], held["lock_run_id"]) == ("open", 0, None)


def test_a_verify_decides_its_own_graphs_node_only(g, conn, state) -> None:
    """Node ids are unique per graph: verifying a sprint's `verify-a` leaves the default graph's
    `verify-a` alone, and its commands are told which graph they run in."""
    sprint = Graph(conn, "sprint-1", state)
    _verify_node(g, ["true"])
    node = _verify_node(sprint, ["echo graph=$CLAVAIN_GRAPH"])
    report = run_verify(sprint, node, run_id="run-sprint")
    assert report["applied"] is True and report["graph_id"] == "sprint-1"
    assert nodes.get_node(sprint, node)["status"] == "done"
    assert kv.get(sprint, node, "out.summary")["value"] == "all 1 verify commands passed"
    assert nodes.get_node(g, node)["status"] == "open"
    assert kv.get(g, node, "out.summary") is None
    assert "graph=sprint-1" in (state.runs / "run-sprint" / node / "cmd-1.log").read_text()


# ---------------------------------------------------------------- the test-run budget

@pytest.fixture
def fake_pytest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `pytest` on PATH that only appends a line to `pytest-runs` in the project: a real
    process the budget recognises as a test run, and a record of each time it really ran."""
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    script = bin_dir / "pytest"
    script.write_text("#!/bin/sh\necho run >> pytest-runs\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return bin_dir


def _budgets(state: StatePaths, **budgets: object) -> None:
    state.config.write_text(json.dumps({"defaults": {"retryBackoffSeconds": 0},
                                        "budgets": budgets}))


def _runs(state: StatePaths) -> int:
    runs = state.project / "pytest-runs"
    return len(runs.read_text().splitlines()) if runs.exists() else 0


def _budget_row(conn: sqlite3.Connection, run_key: str) -> sqlite3.Row | None:
    return conn.execute("SELECT * FROM budget_runs WHERE run_key = ?", (run_key,)).fetchone()


def _budget_calls(conn: sqlite3.Connection) -> list[tuple]:
    return [tuple(r) for r in conn.execute(
        "SELECT run_key, tool, kind, subject, decision FROM budget_calls ORDER BY id")]


def test_a_test_command_within_the_budget_runs_and_is_counted(
        g, conn, state, fake_pytest, monkeypatch) -> None:
    monkeypatch.setenv("CLAUDE_CODE_SESSION_ID", "s-1")
    _budgets(state, maxTestRuns=2)
    node = _verify_node(g, ["echo not a test", "pytest -q"])
    report = run_verify(g, node, run_id="run-b1")

    assert report["result"]["status"] == "success" and _runs(state) == 1
    row = _budget_row(conn, "session:s-1")
    # Test runs only: the `clavain verify` Bash call itself is the hook's one command.
    assert (row["test_runs"], row["commands"]) == (1, 0)
    # The echo is not a test run: only the pytest is recorded.
    assert _budget_calls(conn) == [("session:s-1", "verify", "verify", "pytest -q", "allow")]
    assert report["budget"] == {"run": "session:s-1", "test_runs_counted": 1, "warnings": [],
                                "denied": None}


def test_a_test_command_beyond_max_test_runs_is_not_run_and_fails_the_node(
        g, conn, state, fake_pytest, monkeypatch) -> None:
    # The active sprint is the run, with or without a session. A whole checkpoint: one that
    # does not match its schema is damaged for every reader, the budget's too (issue 35).
    state.sprint_checkpoint.write_text(json.dumps({
        "sprint_id": "sp-1", "description": "d", "complexity": 3, "complexity_label": "moderate",
        "complexity_overridden": False, "complexity_reasons": [], "route": ["execute"],
        "skipped": {}, "reviewers": [], "goal_check": "goal", "orchestration_model": None,
        "completed_steps": [], "current_step": "execute", "plan_path": None, "decisions": [],
        "git_sha": None, "started_at": "2026-01-01T00:00:00.000Z",
        "updated_at": "2026-01-01T00:00:00.000Z"}))
    _budgets(state, maxTestRuns=1)
    first = _verify_node(g, ["pytest -q"], "verify-first")
    report = run_verify(g, first, run_id="run-b2")
    assert report["result"]["status"] == "success"
    assert "that was the last" in report["budget"]["warnings"][0]  # the 80 % / last note

    node = _verify_node(g, ["true", "pytest -q tests/b", "touch ran-after"])
    report = run_verify(g, node, run_id="run-b3")

    result = report["result"]
    assert result["status"] == "fail"
    assert result["summary"].startswith("verify command 2 of 3 not run: Clavain budget "
                                        "exhausted: test runs 1 of 1 used")
    assert "`pytest -q tests/b` not run" in result["errors"][0]
    # Neither the refused command nor anything after it ran.
    assert _runs(state) == 1 and not (state.project / "ran-after").exists()
    assert [c["index"] for c in report["commands"]] == [1]
    assert report["budget"]["denied"] in result["summary"]
    # The node failed with that reason, on the normal retry path.
    after = nodes.get_node(g, node)
    assert (after["status"], after["attempts"]) == ("open", 1)
    assert "test runs 1 of 1 used" in kv.get(g, node, "err.summary")["value"]
    # A denied run counts nothing.
    assert _budget_row(conn, "sprint:sp-1")["test_runs"] == 1
    assert _budget_calls(conn)[-1][::4] == ("sprint:sp-1", "deny")


def test_a_second_refusal_in_a_row_waits_for_a_person_instead_of_spending_attempts(
        g, conn, state, fake_pytest, monkeypatch) -> None:
    monkeypatch.setenv("CLAUDE_CODE_SESSION_ID", "s-2")
    _budgets(state, maxTestRuns=0)
    node = _verify_node(g, ["pytest -q"])
    run_verify(g, node, run_id="run-c1")
    assert nodes.get_node(g, node)["attempts"] == 1

    report = run_verify(g, node, run_id="run-c2")
    assert report["result"]["status"] == "checkpoint"
    after = nodes.get_node(g, node)
    assert (after["status"], after["attempts"]) == ("needs_human", 1)
    assert "Clavain budget" in after["human_question"]["question"]
    assert "clavain budget reset" in after["human_question"]["question"]
    assert _runs(state) == 0

    # A person raises the budget and answers: the verify runs, and a later refusal would be a
    # first one again.
    _budgets(state, maxTestRuns=5)
    edits.answer(g, node, "raised maxTestRuns")
    report = run_verify(g, node, run_id="run-c3")
    assert report["result"]["status"] == "success" and _runs(state) == 1
    assert kv.get(g, node, "err.budget")["value"] == ""


def test_non_test_commands_are_not_counted(g, conn, state, monkeypatch) -> None:
    monkeypatch.setenv("CLAUDE_CODE_SESSION_ID", "s-3")
    _budgets(state, maxTestRuns=0, maxCommands=0)
    node = _verify_node(g, ["echo hello", "ls"])
    report = run_verify(g, node, run_id="run-d1")
    assert report["result"]["status"] == "success"
    assert report["budget"]["test_runs_counted"] == 0
    assert _budget_calls(conn) == [] and _budget_row(conn, "session:s-3") is None


def test_disabled_budgets_count_nothing(g, conn, state, fake_pytest, monkeypatch) -> None:
    monkeypatch.setenv("CLAUDE_CODE_SESSION_ID", "s-4")
    _budgets(state, enabled=False, maxTestRuns=0)
    node = _verify_node(g, ["pytest -q"])
    report = run_verify(g, node, run_id="run-e1")
    assert report["result"]["status"] == "success" and _runs(state) == 1
    assert report["budget"]["run"] is None
    assert _budget_calls(conn) == [] and _budget_row(conn, "session:s-4") is None


def test_no_sprint_and_no_session_counts_nothing(g, conn, state, fake_pytest) -> None:
    """A person running `clavain verify` in a terminal is in no budget run."""
    _budgets(state, maxTestRuns=0)
    node = _verify_node(g, ["pytest -q"])
    assert run_verify(g, node, run_id="run-f1")["result"]["status"] == "success"
    assert _runs(state) == 1 and _budget_calls(conn) == []
