"""`clavain iterate`, `clavain loop parse-status|summary`, and the breaker levers, as a person and
a tool call them."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.supervisor import kit

BLOCK = ("Done.\n---CLAVAIN_STATUS---\nTASK_COMPLETED: check:tests\nSTATUS: COMPLETE\n"
         "FILES_MODIFIED: 2\nTESTS_STATUS: PASSING\nEXIT_SIGNAL: false\n"
         "NEXT_RECOMMENDATION: run the linter\n---END_CLAVAIN_STATUS---\n")


def _cli(state, *args: str, input: str | None = None, person: bool = False
         ) -> subprocess.CompletedProcess[str]:
    argv = [str(kit.REPO / "bin" / "clavain"), *args]
    if person:  # at a terminal of its own (tests/person.py)
        from tests.person import run_as_person

        return run_as_person(argv, cwd=state.project, env=kit.cli_env(state), input=input)
    return subprocess.run(argv, cwd=state.project, env=kit.cli_env(state), capture_output=True,
                          text=True, input=input, timeout=120)


def test_iterate_lists_failing_checks_and_runnable_nodes(tmp_path: Path) -> None:
    state = kit.make_project(tmp_path / "p", {"checks": [
        {"id": "tests", "cmd": "echo 'FAILED test_login'; exit 1", "priority": "high",
         "description": "unit tests"},
        {"id": "lint", "cmd": "true", "priority": "low"}]})
    kit.add(state, [{"id": "task-a", "type": "task", "title": "Add login",
                     "verify": ["pytest -q"], "ownership": ["src/login/**"]}], scaffold=False)
    shown = _cli(state, "iterate")
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert "[HIGH] check:tests — unit tests" in text and "FAILED test_login" in text
    assert "task-a (task) — Add login" in text and "check:lint" not in text
    assert "Pick ONE" in text and "---CLAVAIN_STATUS---" in text
    data = json.loads(_cli(state, "iterate", "--json", "--automation", "plan").stdout)
    assert data["actionable"] and data["automation"] == "plan"
    assert [item["id"] for item in data["items"]] == ["check:tests", "task-a"]
    assert 0 < data["prompt_tokens_estimate"] < 1500
    assert "Do not edit files" in data["prompt"]


def test_iterate_with_nothing_left_prints_the_exit_block(tmp_path: Path) -> None:
    state = kit.make_project(tmp_path / "p", {"checks": [{"id": "ok", "cmd": "true"}]})
    data = json.loads(_cli(state, "iterate", "--json").stdout)
    assert not data["actionable"]
    assert "---CLAVAIN_ITERATE---\nSTATUS: ALL_PASS\nEXIT_SIGNAL: true" in data["prompt"]


def test_parse_status_prints_snake_case_json_and_refuses_bad_blocks(tmp_path: Path) -> None:
    state = kit.make_project(tmp_path / "p")
    parsed = json.loads(_cli(state, "loop", "parse-status", "-", "--json", input=BLOCK).stdout)
    assert parsed == {"task_completed": "check:tests", "status": "COMPLETE",
                      "files_modified": 2, "tests_status": "PASSING", "exit_signal": False,
                      "next_recommendation": "run the linter"}
    bad = _cli(state, "loop", "parse-status", "-", "--json",
               input=BLOCK.replace("STATUS: COMPLETE", "STATUS: DONE"))
    assert bad.returncode == 2 and "STATUS" in json.loads(bad.stdout)["error"]
    plain = _cli(state, "loop", "parse-status", "-", input="no block here")
    assert plain.returncode == 2 and plain.stderr.count("\n") == 1


def test_summary_and_circuit_levers_after_a_run(tmp_path: Path) -> None:
    runner = kit.script(tmp_path / "idle.py", f"""
        import sys
        sys.stdin.read()
        print({BLOCK.replace("COMPLETE", "IN_PROGRESS").replace("2", "0")!r})
    """)
    state = kit.make_project(tmp_path / "p", {
        "runners": {"idle": {"command": [str(runner)]}},
        "checks": [{"id": "tests", "cmd": "false"}]})
    ran = _cli(state, "loop", "--runner", "idle", "--run-id", "loop-x")
    assert ran.returncode == 3, ran.stderr
    assert "Loop loop-x: breaker_open" in ran.stdout and "#3 offered" in ran.stderr
    summary = json.loads(_cli(state, "loop", "summary", "--json").stdout)
    assert summary["run_id"] == "loop-x" and summary["iterations"] == 3
    assert summary["breaker_trips"] == 1 and summary["breaker_state"] == "OPEN"
    assert summary["confirmed_done"] == [] and summary["claimed_not_confirmed"] == []
    status = _cli(state, "loop", "--circuit-status")
    assert "circuit OPEN" in status.stdout and "no progress" in status.stdout
    # An agent (no terminal) may not close it; the refusal says what the person types.
    refused = _cli(state, "loop", "--reset-circuit", "--run", "loop-x", "--json")
    assert refused.returncode == 2 and "/clavain:loop --reset-circuit loop-x" in refused.stdout
    reset = json.loads(_cli(state, "loop", "--reset-circuit", "--run", "loop-x", "--json",
                            person=True).stdout)
    assert reset["state"] == "CLOSED"
    assert "reset by a person at /dev/" in reset["history"][-1]["reason"]
    again = _cli(state, "loop", "--runner", "idle", "--run-id", "loop-x")
    assert again.returncode == 2 and "exists" in again.stderr


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    state = kit.make_project(tmp_path / "p")
    for args, needle in ((["loop", "--runner", "shell"], "runs commands, not prompts"),
                         (["loop", "--runner", "nope"], "unknown runner 'nope'"),
                         (["loop", "--max-iterations", "0"], "at least 1"),
                         (["loop", "summary", "nope"], "no loop run 'nope'")):
        done = _cli(state, *args)
        assert done.returncode == 2 and needle in done.stderr, (args, done.stderr)


def test_two_loops_in_one_repository_keep_their_records_and_share_their_tasks_breaker(
        tmp_path: Path) -> None:
    """Two runs of one task at once: each keeps its own records, and every iteration of both
    counts against the task's one breaker (so together they stop after three without progress,
    give or take the one each had started) and the project's one window."""
    runner = kit.script(tmp_path / "slowidle.py", f"""
        import sys, time
        sys.stdin.read()
        time.sleep(0.3)
        print({BLOCK.replace("COMPLETE", "IN_PROGRESS").replace("2", "0")!r})
    """)
    state = kit.make_project(tmp_path / "p", {
        "runners": {"idle": {"command": [str(runner)]}},
        "checks": [{"id": "tests", "cmd": "false"}]})
    loops = [subprocess.Popen([str(kit.REPO / "bin" / "clavain"), "loop", "--runner", "idle",
                               "--run-id", name, "--json"], cwd=state.project,
                              env=kit.cli_env(state), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
             for name in ("loop-one", "loop-two")]
    outputs = [proc.communicate(timeout=120) for proc in loops]
    results = [json.loads(out) for out, _ in outputs]
    assert all("exit_code" in r for r in results), outputs
    assert [r["exit_code"] for r in results] == [3, 3]
    made = 0
    for name in ("loop-one", "loop-two"):
        summary = json.loads(_cli(state, "loop", "summary", name, "--json").stdout)
        assert summary["breaker_state"] == "OPEN" and summary["run_id"] == name
        made += summary["iterations"]
    assert 3 <= made <= 4, made
    breaker = json.loads(_cli(state, "loop", "--circuit-status", "--run", "loop-two",
                              "--json").stdout)
    assert breaker["no_progress"] == made  # no iteration of either was lost
    window = json.loads(_cli(state, "loop", "--rate-status", "--json").stdout)
    assert window["calls_in_window"] == made


def test_an_agent_cannot_loop_its_own_session(tmp_path: Path) -> None:
    state = kit.make_project(tmp_path / "p")
    env = kit.cli_env(state, CLAUDECODE="1", CLAUDE_CODE_SESSION_ID="s-123")
    done = subprocess.run([str(kit.REPO / "bin" / "clavain"), "loop", "session-start",
                           "fix", "everything"], cwd=state.project, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "looping a session is a person's decision" in done.stderr
    assert "/clavain:loop TASK" in done.stderr
    assert not (state.root / "loops").exists() or not list((state.root / "loops").iterdir())
