"""The headless loop on a real git project with runner scripts standing in for the model: the
dual exit gate, the breaker, max iterations, BLOCKED items, limits and budgets."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from clavain.loop.driver import Loop, LoopOptions
from tests.checks import PASSES
from tests.supervisor import kit

# Both workgraph backends (tests/conftest.py `backend`).
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("backend")]

STATUS = """---CLAVAIN_STATUS---
TASK_COMPLETED: {task}
STATUS: {status}
FILES_MODIFIED: {files}
TESTS_STATUS: NOT_RUN
EXIT_SIGNAL: {exit}
NEXT_RECOMMENDATION: next
---END_CLAVAIN_STATUS---"""


def _runner(tmp_path: Path, body: str) -> Path:
    """A runner script: reads the prompt, runs `body` (with `prompt`, `calls` and `status()`
    at hand), prints what it returns."""
    counter = tmp_path / "calls"
    head = textwrap.dedent(f"""
        import pathlib, subprocess, sys
        prompt = sys.stdin.read()
        counter = pathlib.Path({str(counter)!r})
        calls = int(counter.read_text()) + 1 if counter.exists() else 1
        counter.write_text(str(calls))
        STATUS = {STATUS!r}
        def status(task="check:done", status="COMPLETE", files=0, exit="false"):
            return STATUS.format(task=task, status=status, files=files, exit=exit)
    """)
    return kit.script(tmp_path / "agent.py", head + textwrap.dedent(body).strip() + "\n")


def _project(tmp_path: Path, runner: Path, checks: list[dict] | None = None,
             **loop: object) -> object:
    return kit.make_project(tmp_path / "p", {
        "runners": {"agent": {"command": [str(runner)]}},
        "checks": checks if checks is not None else [
            {"id": "done", "cmd": "test -f done.txt", "priority": "high",
             "description": "done.txt exists"}],
        "loop": {"breaker": {"cooldownSeconds": 3600}, **loop}})


def _calls(tmp_path: Path) -> int:
    return int((tmp_path / "calls").read_text())


def _run(state, events=None, **options) -> dict:
    sink = events if events is not None else []
    return Loop(state, LoopOptions(runner="agent", **options), sink.append).run()


def test_the_dual_gate_exits_only_when_nothing_is_left_and_the_agent_says_so(tmp_path) -> None:
    runner = _runner(tmp_path, """
        if "check:done" in prompt:
            pathlib.Path("done.txt").write_text("x")
            print(status(files=1))
        else:
            assert "ALL_PASS" in prompt
            print(status(task="none", exit="true"))
    """)
    state = _project(tmp_path, runner)
    result = _run(state)
    assert result["status"] == "done" and result["exit_code"] == 0, result
    assert _calls(tmp_path) == 2  # the work, then the confirmation
    summary = result["summary"]
    assert summary["iterations"] == 2 and summary["confirmed_done"] == ["check:done"]
    assert summary["claimed_not_confirmed"] == []
    first = json.loads((state.runs / result["run_id"] / "iteration-1.json").read_text())
    assert first["progress"]["progress"] and first["items"] == ["check:done"]


def test_files_modified_without_a_change_is_no_progress_and_only_a_claim(tmp_path) -> None:
    """A runner that says it modified a file and touched nothing: the no-progress breaker
    trips, and the summary lists its COMPLETE as the agent's claim, not as done."""
    runner = _runner(tmp_path, 'print(status(files=1))')
    state = _project(tmp_path, runner)
    events: list[dict] = []
    result = _run(state, events)
    assert result["status"] == "breaker_open" and result["exit_code"] == 3, result
    assert _calls(tmp_path) == 3 and "3 iterations in a row with no progress" in \
        result["message"]
    first = json.loads((state.runs / result["run_id"] / "iteration-1.json").read_text())
    assert first["progress"] == {"progress": False, "why": [], "unconfirmed": [
        "FILES_MODIFIED: 1, but no commit and no changed file"]}
    summary = result["summary"]
    assert summary["confirmed_done"] == [] and summary["claimed_not_confirmed"] == ["check:done"]
    iterated = [e for e in events if e["event"] == "iterated"]
    assert all(e["progress"]["progress"] is False for e in iterated)


def test_a_claimed_check_is_confirmed_only_once_it_passes(tmp_path) -> None:
    """COMPLETE for a check that still fails is a claim; the same item finished later (the
    check passes on the next prompt) is confirmed; a node the graph says is done is confirmed,
    one it does not is a claim."""
    runner = _runner(tmp_path, """
        if calls == 1:
            pathlib.Path("half.txt").write_text("x")  # a change, but not the check's file
            print(status(files=1))
        elif calls == 2:
            pathlib.Path("done.txt").write_text("x")
            print(status(files=1))
        else:
            print(status(task="task-b", status="COMPLETE", exit="true"))
    """)
    state = _project(tmp_path, runner)
    result = _run(state, max_iterations=3)
    summary = result["summary"]
    assert summary["confirmed_done"] == ["check:done"], summary
    assert summary["claimed_not_confirmed"] == ["task-b"], summary
    first = json.loads((state.runs / result["run_id"] / "iteration-1.json").read_text())
    assert first["progress"]["progress"] and first["progress"]["unconfirmed"] == []


def test_a_node_the_graph_says_is_done_is_confirmed(tmp_path) -> None:
    runner = _runner(tmp_path, """
        import re
        if "task-a" in prompt:
            claim = re.search(r"`(clavain graph claim task-a --run-id \\S+)`", prompt)
            subprocess.run(claim.group(1).split(), check=True, capture_output=True)
            result = '<result>{"status":"success","summary":"did a"}</result>'
            subprocess.run(claim.group(1).replace("claim", "apply").split() + ["--result", "-"],
                           input=result, text=True, check=True, capture_output=True)
            print(status(task="task-a"))
        else:
            print(status(task="task-z", exit="true"))  # no such node: the agent's word
    """)
    state = _project(tmp_path, runner, checks=[])
    kit.add(state, [{"id": "task-a", "type": "task", "title": "a", "verify": []}],
            scaffold=False)
    result = _run(state, max_iterations=3)
    assert result["status"] == "done", result
    assert kit.node(state, "task-a")["status"] == "done"
    summary = result["summary"]
    assert summary["confirmed_done"] == ["task-a"]
    assert summary["claimed_not_confirmed"] == ["task-z"]


def test_exit_signal_while_a_check_still_fails_does_not_exit(tmp_path) -> None:
    runner = _runner(tmp_path, 'print(status(exit="true"))')  # claims done, changes nothing
    state = _project(tmp_path, runner)
    result = _run(state)
    assert result["status"] == "breaker_open" and result["exit_code"] == 3
    assert _calls(tmp_path) == 3  # three iterations with no progress open the breaker
    assert "no progress" in result["message"]


def test_max_iterations_ends_a_loop_that_keeps_moving(tmp_path) -> None:
    runner = _runner(tmp_path, """
        pathlib.Path(f"work-{calls}.txt").write_text("x")
        print(status(files=1))
    """)
    state = _project(tmp_path, runner)
    result = _run(state, max_iterations=4)
    assert result["status"] == "max_iterations" and result["exit_code"] == 4
    assert _calls(tmp_path) == 4


def test_a_blocked_item_is_skipped_and_all_blocked_stops_with_the_list(tmp_path) -> None:
    runner = _runner(tmp_path, """
        if "check:a " in prompt:
            print(status(task="check:a", status="BLOCKED"))
        else:
            print(status(task="check:b", status="BLOCKED"))
    """)
    checks = [{"id": "a", "cmd": "false", "priority": "high"},
              {"id": "b", "cmd": "false", "priority": "low"}]
    state = _project(tmp_path, runner, checks)
    events: list[dict] = []
    result = _run(state, events)
    assert result["status"] == "blocked" and result["exit_code"] == 6
    assert result["blocked"] == ["check:a", "check:b"]
    assert "check:a, check:b" in result["message"]
    offered = [e["items"] for e in events if e["event"] == "iteration"]
    assert offered == [["check:a", "check:b"], ["check:b"]]


def test_a_bad_status_block_is_no_progress_never_a_guess(tmp_path) -> None:
    runner = _runner(tmp_path, 'print("All done! EXIT_SIGNAL: true")')
    state = _project(tmp_path, runner)
    result = _run(state)
    assert result["status"] == "breaker_open"
    record = json.loads((state.runs / result["run_id"] / "iteration-1.json").read_text())
    assert record["status"] is None and "no ---CLAVAIN_STATUS---" in record["status_error"]


def test_a_usage_limit_is_waited_out_and_not_counted_against_the_breaker(tmp_path) -> None:
    runner = _runner(tmp_path, """
        if calls <= 3:
            print("Error: usage limit reached. Please try again in 5 seconds.", file=sys.stderr)
            sys.exit(1)
        pathlib.Path("done.txt").write_text("x")
        print(status(files=1, exit="true"))
    """)
    state = _project(tmp_path, runner)
    now = [1_000_000.0]
    events: list[dict] = []

    def clock() -> float:
        return now[0]

    def sink(event: dict) -> None:
        events.append(event)
        if event["event"] == "waiting":
            now[0] += event["seconds_left"]  # time passes while the loop waits

    result = Loop(state, LoopOptions(runner="agent"), sink, clock=clock).run()
    assert result["status"] == "done", result
    waits = [e for e in events if e["event"] == "waiting"]
    assert len(waits) >= 3 and all(0 < w["seconds_left"] <= 20 for w in waits)
    assert result["summary"]["breaker_state"] == "CLOSED"


def test_calls_per_hour_make_the_loop_wait(tmp_path) -> None:
    runner = _runner(tmp_path, """
        pathlib.Path(f"work-{calls}.txt").write_text("x")
        print(status(files=1))
    """)
    state = _project(tmp_path, runner)
    now = [2_000_000.0]
    waits: list[float] = []

    def sink(event: dict) -> None:
        if event["event"] == "waiting":
            waits.append(event["seconds_left"])
            now[0] += event["seconds_left"]

    Loop(state, LoopOptions(runner="agent", rate=2, max_iterations=3), sink,
         clock=lambda: now[0]).run()
    assert waits and 3590 <= waits[0] <= 3600


def test_a_budget_stops_the_loop(tmp_path) -> None:
    import os

    fake = kit.script(tmp_path / "claude", kit.FAKE_CLAUDE)
    state = kit.make_project(tmp_path / "p", {
        "checks": [{"id": "done", "cmd": "false"}], "budgets": {"maxCostUsd": 0.5}})
    os.environ["CLAVAIN_CLAUDE_BIN"] = str(fake)
    os.environ["FAKE_CLAUDE_RESULT"] = '{"status": "success"}'
    try:
        result = Loop(state, LoopOptions(runner="claude"), None).run()
    finally:
        del os.environ["CLAVAIN_CLAUDE_BIN"], os.environ["FAKE_CLAUDE_RESULT"]
    assert result["status"] == "budget" and result["exit_code"] == 5
    assert result["summary"]["iterations"] == 2 and result["summary"]["cost_usd"] == 0.5


def test_fifty_iterations_run_without_a_person(tmp_path) -> None:
    runner = _runner(tmp_path, """
        pathlib.Path(f"step-{calls}.txt").write_text("x")
        if calls >= 50:
            pathlib.Path("done.txt").write_text("x")
            print(status(files=1, exit="true"))
        else:
            print(status(files=1, status="IN_PROGRESS"))
    """)
    state = _project(tmp_path, runner)
    result = _run(state, max_iterations=60)
    assert result["status"] == "done", result["message"]
    assert result["summary"]["iterations"] == 50


def test_a_reply_that_talks_about_rate_limits_is_not_a_limit(tmp_path) -> None:
    runner = _runner(tmp_path, """
        print("FAILED tests/test_api.py::test_rate_limit_header (429 expected)")
        sys.exit(1)
    """)
    state = _project(tmp_path, runner)
    events: list[dict] = []
    result = _run(state, events)
    assert result["status"] == "breaker_open" and _calls(tmp_path) == 3
    assert not [e for e in events if e["event"] == "waiting"]


def test_the_exit_gate_wins_over_the_last_allowed_iteration(tmp_path) -> None:
    runner = _runner(tmp_path, """
        pathlib.Path("done.txt").write_text("x")
        print(status(files=1, exit="true"))
    """)
    state = _project(tmp_path, runner)
    result = _run(state, max_iterations=1)
    assert result["status"] == "done" and result["exit_code"] == 0


def test_a_rejected_status_block_is_named_in_the_next_prompt(tmp_path) -> None:
    runner = _runner(tmp_path, """
        if calls == 1:
            print(status().replace("NOT_RUN", "PASSED"))
        else:
            assert "status block was rejected" in prompt and "TESTS_STATUS" in prompt
            pathlib.Path("done.txt").write_text("x")
            print(status(files=1, exit="true"))
    """)
    state = _project(tmp_path, runner)
    assert _run(state)["status"] == "done"


def test_work_left_in_the_graph_is_never_done(tmp_path) -> None:
    runner = _runner(tmp_path, 'print(status(task="none", exit="true"))')
    state = _project(tmp_path, runner, checks=[])
    kit.add(state, [{"id": "task-a", "type": "task", "title": "a", "verify": [PASSES]}],
            scaffold=False)
    from clavain.store.graph_db import open_graph_db
    from clavain.workgraph.claims import claim_node
    from clavain.workgraph.graphs import Graph

    conn = open_graph_db(state)  # another run holds the only node
    claim_node(Graph(conn, "default", state), "task-a", run_id="someone-else")
    conn.close()
    result = _run(state)
    assert result["status"] == "blocked" and result["exit_code"] == 6
    assert "in progress" in result["message"]
    assert not (tmp_path / "calls").exists()  # nothing to offer: no runner was called


def test_changed_files_count_as_progress_whatever_the_agent_says(tmp_path) -> None:
    # The project git-ignores `.clavain/` as a whole (kit.make_project does).
    runner = _runner(tmp_path, """
        pathlib.Path(f"work-{calls}.txt").write_text("x")
        print(status(files=0))
    """)
    state = _project(tmp_path, runner)
    result = _run(state, max_iterations=4)
    assert result["status"] == "max_iterations", result["message"]
    record = json.loads((state.runs / result["run_id"] / "iteration-1.json").read_text())
    assert record["progress"]["why"] == ["files changed"]


def test_a_limit_that_never_lifts_ends_the_loop_for_a_person(tmp_path) -> None:
    runner = _runner(tmp_path, """
        print("429 Too Many Requests: rate limit exceeded", file=sys.stderr)
        sys.exit(1)
    """)
    state = _project(tmp_path, runner)
    now = [3_000_000.0]

    def sink(event: dict) -> None:
        if event["event"] == "waiting":
            now[0] += event["seconds_left"]

    result = Loop(state, LoopOptions(runner="agent"), sink, clock=lambda: now[0]).run()
    assert result["status"] == "blocked" and "12 times in a row" in result["message"]
    assert _calls(tmp_path) == 12 and result["summary"]["iterations"] == 0


def test_a_logged_out_claude_ends_the_loop_at_once(tmp_path) -> None:
    import os

    fake = kit.script(tmp_path / "claude", kit.LOGGED_OUT_CLAUDE)
    state = kit.make_project(tmp_path / "p", {"checks": [{"id": "done", "cmd": "false"}]})
    os.environ["CLAVAIN_CLAUDE_BIN"] = str(fake)
    try:
        result = Loop(state, LoopOptions(runner="claude"), None).run()
    finally:
        del os.environ["CLAVAIN_CLAUDE_BIN"]
    assert result["status"] == "error" and result["exit_code"] == 1
    assert "Not logged in" in result["message"] and result["summary"]["iterations"] == 0


def test_an_item_the_agent_claimed_and_left_goes_back_unspent(tmp_path) -> None:
    runner = _runner(tmp_path, """
        import os, re
        claim = re.search(r"`(clavain graph claim task-a --run-id \\\\S+)`", prompt)
        assert claim, prompt
        done = subprocess.run(claim.group(1).split(), capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        again = subprocess.run(["clavain", "graph", "claim", "task-a", "--run-id",
                                "someone-else"], capture_output=True, text=True)
        assert again.returncode == 2 and "holds it" in again.stderr, again.stderr
        print(status(task="task-a", status="IN_PROGRESS"))
    """)
    state = _project(tmp_path, runner, checks=[])
    kit.add(state, [{"id": "task-a", "type": "task", "title": "a", "verify": [PASSES]}],
            scaffold=False)
    result = _run(state, max_iterations=1)
    assert result["status"] == "max_iterations", result["message"]
    node = kit.node(state, "task-a")
    assert (node["status"], node["lock_run_id"], node["attempts"]) == ("open", None, 0)


def test_an_api_outage_is_waited_out_like_a_limit_not_counted(tmp_path) -> None:
    """claude answering 529 (overloaded) twice: the loop waits as `clavain run` does, and the
    outages are neither iterations nor errors against the breaker."""
    import os

    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "claude_output"
    success = json.loads((fixtures / "success.json").read_text())
    success["result"] = STATUS.format(task="check:done", status="COMPLETE", files=1,
                                      exit="true")
    counter = tmp_path / "claude-calls"
    fake = kit.script(tmp_path / "claude", f"""
        import pathlib, sys
        sys.stdin.read()
        counter = pathlib.Path({str(counter)!r})
        calls = int(counter.read_text()) + 1 if counter.exists() else 1
        counter.write_text(str(calls))
        if calls <= 2:
            print(pathlib.Path({str(fixtures / "overloaded_529.json")!r}).read_text())
            sys.exit(1)
        pathlib.Path("done.txt").write_text("x")
        print({json.dumps(success)!r})
    """)
    state = _project(tmp_path, fake)
    now = [3_000_000.0]
    waits: list[dict] = []

    def sink(event: dict) -> None:
        if event["event"] == "waiting":
            waits.append(event)
            now[0] += event["seconds_left"]

    os.environ["CLAVAIN_CLAUDE_BIN"] = str(fake)
    try:
        result = Loop(state, LoopOptions(runner="claude"), sink, clock=lambda: now[0]).run()
    finally:
        del os.environ["CLAVAIN_CLAUDE_BIN"]
    assert result["status"] == "done", result
    assert len(waits) >= 2 and all("unavailable (529)" in w["why"] for w in waits), waits
    assert result["summary"]["iterations"] == 1
    assert result["summary"]["breaker_state"] == "CLOSED"
