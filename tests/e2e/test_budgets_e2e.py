"""Budgets in the real Claude Code: with maxCommands 3 the fourth Bash call is denied (it never
runs, the model reads the reason); an edit/revert ping-pong is denied when the same patch comes
a third time; `clavain report` lists the commands and what the run cost."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

import pytest

from tests.e2e.conftest import REPO, ClaudeRunner
from tests.e2e.scripted_model import all_text, assistant_turns, bash, text, tool_use

pytestmark = pytest.mark.e2e


def _configure(runner: ClaudeRunner, budgets: dict[str, Any]) -> None:
    state = runner.project / ".clavain"
    state.mkdir(exist_ok=True)
    (state / "config.json").write_text(json.dumps({"budgets": budgets}))


def _clavain(runner: ClaudeRunner, *args: str) -> Any:
    done = subprocess.run([str(REPO / "bin" / "clavain"), *args, "--json"], capture_output=True,
                          text=True, check=True,
                          env={**os.environ, "CLAVAIN_PROJECT_DIR": str(runner.project),
                               "CLAVAIN_PYTHON": sys.executable})
    return json.loads(done.stdout)


def _sequence(calls: list[dict[str, Any]]):
    """A script making `calls` one per turn, then saying done."""
    def script(request: dict[str, Any]):
        turn = assistant_turns(request)
        return [calls[turn]] if turn < len(calls) else [text("done")]
    return script


def test_the_fourth_command_is_denied_and_never_runs(claude_runner: ClaudeRunner) -> None:
    _configure(claude_runner, {"maxCommands": 3})
    calls = [bash(f"touch ran{i}") for i in range(1, 5)]
    trace = claude_runner.root / "hook-trace.jsonl"
    run = claude_runner.run("make four files", _sequence(calls), allowed_tools=("Bash",),
                            env={"CLAVAIN_HOOK_TRACE": str(trace)}).check()
    for i in (1, 2, 3):
        assert (claude_runner.project / f"ran{i}").exists()
    assert not (claude_runner.project / "ran4").exists()
    denied = run.tool_result(calls[3]["id"])
    assert "Clavain budget exhausted: Bash commands 3 of 3 used" in denied
    assert "do not retry" in denied
    report = _clavain(claude_runner, "report")
    assert report["budgets"][0] == {"budget": "Bash commands", "used": 3, "limit": 3}
    assert [d["subject"] for d in report["denied"]] == ["touch ran4"]
    # Denied calls ran nothing: they are listed as denied, not among the commands.
    assert {c["command"] for c in report["top_commands"]} == {"touch ran1", "touch ran2",
                                                              "touch ran3"}
    # Each tool call ran the spawned hook (no resident process: SessionStart starts nothing).
    calls = [json.loads(line) for line in trace.read_text().splitlines()
             if json.loads(line)["event"] == "PreToolUse"]
    assert len(calls) == 4 and all("served_by" not in call for call in calls), calls


def test_an_edit_revert_ping_pong_is_denied_the_third_time(claude_runner: ClaudeRunner) -> None:
    _configure(claude_runner, {})  # budgets apply where Clavain keeps state
    target = claude_runner.project / "app.py"
    target.write_text("LIMIT = 1\n")
    forth = {"file_path": str(target), "old_string": "LIMIT = 1", "new_string": "LIMIT = 2"}
    back = {"file_path": str(target), "old_string": "LIMIT = 2", "new_string": "LIMIT = 1"}
    calls = [tool_use("Read", {"file_path": str(target)}), tool_use("Edit", forth),
             tool_use("Edit", back), tool_use("Edit", forth), tool_use("Edit", back),
             tool_use("Edit", forth)]
    run = claude_runner.run("tune the limit", _sequence(calls),
                            allowed_tools=("Read", "Edit")).check()
    # The flag on the revert reaches the model as the hook's context.
    assert "ping-pong" in all_text(run.requests[-1])
    denied = run.tool_result(calls[5]["id"])
    assert "already applied 2 times" in denied and "going in circles" in denied
    assert target.read_text() == "LIMIT = 1\n"  # the third `forth` never ran


def test_the_report_shows_what_the_run_cost(claude_runner: ClaudeRunner) -> None:
    _configure(claude_runner, {"maxCommands": 10})
    calls = [bash("echo one"), bash("echo two"), bash("echo one")]
    claude_runner.run("echo things", _sequence(calls), allowed_tools=("Bash",)).check()
    deadline = time.monotonic() + 20  # the first call starts a background measurement
    while True:
        report = _clavain(claude_runner, "report")
        if report["cost_usd"] > 0 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert report["cost_usd"] > 0 and report["tokens"] > 0
    assert report["models"], report
    assert report["top_commands"][0] == {"command": "echo one", "count": 2}
