"""Fan-out in the real Claude Code: one assistant turn launching six subagents against a budget
that fits two runs two and denies four (the model reads why); a subagent over its own
perAgentMaxCalls has its next tool call denied and the parent is told."""

from __future__ import annotations

import json
import re
import sqlite3
from typing import Any

import pytest

from tests.e2e.conftest import ClaudeRunner
from tests.e2e.scripted_model import (
    agent,
    all_text,
    assistant_turns,
    bash,
    is_subagent,
    text,
    tool_names,
    tool_results,
    tool_use,
    user_texts,
)

pytestmark = pytest.mark.e2e

SCOUT_BODY = "You are the scout: look at one part of the project and report."
SCOUT = f"""---
name: scout
description: Looks at one part of the project and reports what it found.
tools: Bash
model: haiku
---
{SCOUT_BODY}
"""


def _project(runner: ClaudeRunner, budgets: dict[str, Any]) -> None:
    state = runner.project / ".clavain"
    state.mkdir(exist_ok=True)
    (state / "config.json").write_text(json.dumps({"budgets": budgets}))
    agents = runner.project / ".claude" / "agents"
    agents.mkdir(parents=True, exist_ok=True)
    (agents / "scout.md").write_text(SCOUT)


def _rows(runner: ClaudeRunner, query: str) -> list[sqlite3.Row]:
    conn = sqlite3.connect(runner.project / ".clavain" / "state.sqlite")
    conn.row_factory = sqlite3.Row
    try:
        return conn.execute(query).fetchall()
    finally:
        conn.close()


def _part(request: dict[str, Any]) -> str | None:
    found = re.search(r"look at part (\d)", "\n".join(user_texts(request)))
    return found.group(1) if found else None


def test_six_subagents_in_one_turn_against_room_for_two(claude_runner: ClaudeRunner) -> None:
    _project(claude_runner, {"maxCostUsd": 2.5, "agentCostUsd": 1.0})
    calls = [agent("scout", f"look at part {i}", f"part {i}") for i in range(6)]

    def script(request: dict[str, Any]):
        if is_subagent(request, SCOUT_BODY):
            return [text(f"part {_part(request)} looked at: fine")]
        if assistant_turns(request) == 0:
            return calls
        return [text("noted")]

    run = claude_runner.run("look at the project in six parts", script,
                            allowed_tools=("Bash", "Agent")).check()
    results = [run.tool_result(call["id"]) for call in calls]
    denied = [r for r in results if "Clavain budget: this Agent call would start subagent" in r]
    assert len(denied) == 4, f"{results}\n{run}"
    for reason in denied:  # what the model read: per agent, what is left, how many fit
        assert "1 haiku at 300,000 tokens / $1.00 each" in reason
        assert "$0.50 left" in reason and "none would fit now" in reason
    # The reason reached the model's next request (the main conversation's).
    main = [r for r in run.requests if not is_subagent(r, SCOUT_BODY)]
    assert any(denied[0] in "\n".join(t.content for t in tool_results(r)) for r in main[1:])
    # Exactly the two allowed ones ran.
    ran = {_part(r) for r in run.requests if is_subagent(r, SCOUT_BODY)}
    assert len(ran) == 2, ran
    # Each one's end measured it and gave its reservation back.
    assert _rows(claude_runner, "SELECT * FROM budget_reservations") == []
    finished = _rows(claude_runner, "SELECT * FROM budget_agents WHERE ended_at IS NOT NULL")
    assert len(finished) == 2 and {row["model"] for row in finished} == {"haiku"}
    assert all(row["tokens"] > 0 and row["agent_type"] == "scout" for row in finished)
    log = claude_runner.project / ".clavain" / "logs" / "hooks.log"
    assert not log.exists(), log.read_text()


def test_a_subagent_over_its_calls_is_stopped_and_the_parent_told(
        claude_runner: ClaudeRunner) -> None:
    _project(claude_runner, {"perAgentMaxCalls": 2})
    touches = [bash(f"touch {name}") for name in ("one", "two", "three")]
    after: list[dict[str, Any]] = []

    def script(request: dict[str, Any]):
        if is_subagent(request, SCOUT_BODY):
            turn = assistant_turns(request)
            return [touches[turn]] if turn < len(touches) else [text("scout stopped early")]
        if assistant_turns(request) == 0:
            return [agent("scout", "look at part 1", "part 1")]
        if "scout stopped early" in all_text(request) and not after:
            after.append(bash("echo after"))
            return after
        return [text("done" if after else "waiting")]

    run = claude_runner.run("look at part 1", script, allowed_tools=("Bash", "Agent")).check()
    assert (claude_runner.project / "one").exists() and (claude_runner.project / "two").exists()
    assert not (claude_runner.project / "three").exists()
    stopped = run.tool_result(touches[2]["id"])
    assert "over its own cap (2 of perAgentMaxCalls 2 tool calls made)" in stopped
    assert "Stop now" in stopped
    assert after, f"the subagent's answer never reached the main thread\n{run}"
    # The main thread's next tool call carried the note into the parent's context.
    told = [r for r in run.requests if not is_subagent(r, SCOUT_BODY)
            and after[0]["id"] in {t.tool_use_id for t in tool_results(r)}]
    assert told and "subagent scout" in all_text(told[0]) and "was stopped" in all_text(told[0])
    [row] = _rows(claude_runner, "SELECT * FROM budget_agents")
    assert row["calls"] == 2 and row["over_reason"] and row["parent_told_at"]


WORKFLOW = """export const meta = { name: 'probe', description: 'two looks', phases: [] }
const one = await agent('look at part 1')
const two = await agent('look at part 2')
return one + two
"""


def _workflow_script(call: dict[str, Any]):
    def script(request: dict[str, Any]):
        if "Workflow" not in tool_names(request):  # one of the workflow's agents
            return [text(f"part {_part(request)} looked at")]
        return [call] if assistant_turns(request) == 0 else [text("noted")]
    return script


def test_a_workflow_is_projected_from_its_script_and_released_per_agent(
        claude_runner: ClaudeRunner) -> None:
    _project(claude_runner, {"maxCostUsd": 1.5, "agentCostUsd": 1.0})
    denied = tool_use("Workflow", {"script": WORKFLOW})
    run = claude_runner.run("run the probe", _workflow_script(denied),
                            allowed_tools=("Bash", "Agent", "Workflow")).check()
    reason = run.tool_result(denied["id"])
    assert "this Workflow call would start 2 subagents (2 agent( call(s))" in reason, reason
    assert "1 such subagent would fit now" in reason
    assert not any("looked at" in all_text(r) for r in run.requests)  # none started

    _project(claude_runner, {"maxCostUsd": 50.0, "agentCostUsd": 1.0})
    allowed = tool_use("Workflow", {"script": WORKFLOW})
    run = claude_runner.run("run the probe", _workflow_script(allowed),
                            allowed_tools=("Bash", "Agent", "Workflow")).check()
    assert any("part 2 looked at" in all_text(r) for r in run.requests)
    # Each of its agents' stops gave back one share; both were measured, in the session too
    # (a Workflow run's agents write under subagents/workflows/<run>/).
    assert _rows(claude_runner, "SELECT * FROM budget_reservations") == []
    finished = _rows(claude_runner, "SELECT * FROM budget_agents WHERE ended_at IS NOT NULL")
    assert len(finished) == 2 and {row["agent_type"] for row in finished} == \
        {"workflow-subagent"}
    assert all(row["tokens"] > 0 for row in finished), [dict(row) for row in finished]
    read = _rows(claude_runner, "SELECT path FROM budget_usage_files WHERE run_key = "
                 f"'session:{run.output['session_id']}'")
    assert len([row for row in read if "/subagents/workflows/" in row["path"]]) == 2, \
        [row["path"] for row in read]
    log = claude_runner.project / ".clavain" / "logs" / "hooks.log"
    assert not log.exists(), log.read_text()
