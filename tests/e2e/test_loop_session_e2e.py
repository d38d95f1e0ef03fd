"""`/clavain:loop` in the real Claude Code: the Stop hook drives a session through its iterations
and ends it by the loop's rules (dual exit gate, breaker, iteration cap); another session in the
same project is never looped; the host's cap on Stop-hook continuations (8 in a row without a
tool call, 2.1.330) ends a turn and the person's next message resumes the loop."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import ClaudeRunner
from tests.e2e.scripted_model import assistant_turns, bash, last_user_text, text

pytestmark = pytest.mark.e2e

CHECKS = [{"id": "exists", "cmd": "test -f done.txt", "description": "done.txt exists"}]


def block(status: str = "IN_PROGRESS", *, task: str = "none", files: int = 0,
          exit_signal: bool = False) -> str:
    return (f"Worked.\n\n---CLAVAIN_STATUS---\nTASK_COMPLETED: {task}\nSTATUS: {status}\n"
            f"FILES_MODIFIED: {files}\nTESTS_STATUS: NOT_RUN\n"
            f"EXIT_SIGNAL: {'true' if exit_signal else 'false'}\n"
            "NEXT_RECOMMENDATION: none\n---END_CLAVAIN_STATUS---")


def _configure(project: Path, **loop: Any) -> None:
    (project / ".clavain").mkdir(exist_ok=True)
    config: dict[str, Any] = {"checks": CHECKS, **({"loop": loop} if loop else {})}
    (project / ".clavain" / "config.json").write_text(json.dumps(config))


def _loops(project: Path) -> list[str]:
    folder = project / ".clavain" / "loops"
    return sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []


def _only_run(project: Path) -> dict[str, Any]:
    records = list((project / ".clavain" / "runs").glob("loop-*/loop.json"))
    assert len(records) == 1, records
    return json.loads(records[0].read_text())


def test_the_loop_works_then_confirms_exit_and_the_session_ends(
        claude_runner: ClaudeRunner) -> None:
    project = claude_runner.project
    _configure(project)

    def script(request: dict[str, Any]):
        latest = last_user_text(request)
        if "Clavain loop — iteration 2 of 5" in latest:
            assert "Every check passes" in latest
            return [text(block("COMPLETE", exit_signal=True))]
        if assistant_turns(request) == 0:
            assert "Clavain loop — iteration 1 of 5" in latest and "check:exists" in latest
            return [bash("touch done.txt", "Create the file")]
        if assistant_turns(request) == 1:
            return [text(block("COMPLETE", task="check:exists", files=1))]
        return [text("unexpected")]

    run = claude_runner.run("/clavain:loop --max-iterations 5 make done.txt exist", script
                            ).check()
    assert len(run.requests) == 3, run
    assert "EXIT_SIGNAL: true" in run.result_text
    assert _loops(project) == []
    record = _only_run(project)
    assert record["status"] == "done" and record["session_id"] == run.output["session_id"]
    summary = json.loads((project / ".clavain" / "runs" / record["run_id"] / "iteration-1.json")
                         .read_text())
    assert summary["progress"]["progress"] is True


def test_a_model_that_never_progresses_is_stopped_by_the_breaker(
        claude_runner: ClaudeRunner) -> None:
    project = claude_runner.project
    _configure(project)
    # FILES_MODIFIED: 1 with no file touched is the model's word, not progress.
    run = claude_runner.run("/clavain:loop --max-iterations 6 make done.txt exist",
                            lambda request: [text(block(files=1))]).check()
    assert len(run.requests) == 3, run  # loop.breaker.noProgress defaults to 3
    assert _loops(project) == []
    record = _only_run(project)
    assert record["status"] == "breaker_open", record
    assert "3 iterations in a row with no progress" in record["message"]


def test_max_iterations_stops_a_loop_that_never_finishes(claude_runner: ClaudeRunner) -> None:
    project = claude_runner.project
    _configure(project)

    def script(request: dict[str, Any]):
        if last_user_text(request):  # a new iteration: change something, never done.txt
            return [bash(f"touch step-{assistant_turns(request)}.txt", "A step")]
        return [text(block(files=1))]

    run = claude_runner.run("/clavain:loop --max-iterations 2 make done.txt exist", script
                            ).check()
    assert len(run.requests) == 4, run
    record = _only_run(project)
    assert record["status"] == "max_iterations" and _loops(project) == []


def test_another_session_is_never_looped_and_the_next_message_resumes_a_cut_loop(
        claude_runner: ClaudeRunner) -> None:
    project = claude_runner.project
    # A model that only writes text: with the breaker set past the host's cap (8 continuations
    # in a row without a tool call), the cap ends the turn with the loop registered.
    _configure(project, breaker={"noProgress": 20})
    first = claude_runner.run("/clavain:loop --max-iterations 20 make done.txt exist",
                              lambda request: [text(block(files=1))]).check()
    assert len(first.requests) == 9, first
    session = first.output["session_id"]
    assert _loops(project) == [session]
    assert "Note: Claude Code ends a turn after 8" in last_user_text(first.requests[-1])
    state = json.loads((project / ".clavain" / "loops" / f"{session}.json").read_text())
    assert state["iteration"] == 10 and state["blocks_in_row"] == 9

    other = claude_runner.run("hello", lambda request: [text("hi there")]).check()
    assert len(other.requests) == 1 and other.result_text == "hi there"
    assert other.output["session_id"] != session
    assert _loops(project) == [session]
    assert json.loads((project / ".clavain" / "loops" / f"{session}.json").read_text()) == state

    (project / "done.txt").write_text("made by a person\n")

    def resume(request: dict[str, Any]):
        latest = last_user_text(request)
        if "Clavain loop — iteration 10 of 20" in latest:
            assert "Resumed" in latest and "Every check passes" in latest
            return [text(block("COMPLETE", exit_signal=True))]
        return [text("The loop was cut off by the host.")]

    again = claude_runner.run("where are we?", resume, extra_args=("--resume", session)).check()
    assert len(again.requests) == 2, again
    assert _loops(project) == []
    record = _only_run(project)
    assert record["status"] == "done" and record["host_cuts"] == 1
