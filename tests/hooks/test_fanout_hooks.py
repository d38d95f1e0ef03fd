"""Fan-out at the hooks, run as the host runs them (`bin/clavain-hook EVENT`, JSON on stdin):
six parallel Agent calls against a budget that fits two, the release at SubagentStop and on a
failed launch, a subagent's own cap and the parent told."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from tests.hooks.conftest import REPO, clavain_project

SESSION = "sess-fan"


def hook_env(tmp_path: Path, project: Path) -> dict[str, str]:
    return dict(os.environ, CLAVAIN_PYTHON=sys.executable, CLAUDE_PROJECT_DIR=str(project),
                CLAVAIN_BOOTSTRAP="0", CLAUDE_CONFIG_DIR=str(tmp_path / "claude-config"))


def start(event: str, payload: dict, tmp_path: Path, project: Path) -> subprocess.Popen:
    process = subprocess.Popen([str(REPO / "bin" / "clavain-hook"), event], cwd=project,
                               env=hook_env(tmp_path, project), stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdin is not None
    process.stdin.write(json.dumps(payload))
    process.stdin.close()
    return process


def run(event: str, payload: dict, tmp_path: Path, project: Path) -> dict | None:
    process = start(event, payload, tmp_path, project)
    out = process.stdout.read() if process.stdout else ""
    assert process.wait(timeout=60) == 0
    return json.loads(out) if out.strip() else None


def tool_call(project: Path, tool: str, tool_input: dict, tool_use_id: str,
              **extra: object) -> dict:
    return {"session_id": SESSION, "transcript_path": str(project / f"{SESSION}.jsonl"),
            "cwd": str(project), "hook_event_name": "PreToolUse", "tool_name": tool,
            "tool_input": tool_input, "tool_use_id": tool_use_id, **extra}


def decision(output: dict | None) -> str:
    return (output or {}).get("hookSpecificOutput", {}).get("permissionDecision", "allow")


def database(project: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(project / ".clavain" / "state.sqlite")
    conn.row_factory = sqlite3.Row
    return conn


def test_six_parallel_agent_calls_against_room_for_two_let_exactly_two_run(
        tmp_path: Path) -> None:
    project = clavain_project(tmp_path, {"budgets": {"maxCostUsd": 2.5, "agentCostUsd": 1.0}})
    run("PreToolUse", tool_call(project, "Bash", {"command": "ls"}, "warm"), tmp_path, project)
    processes = [start("PreToolUse", tool_call(
        project, "Agent", {"description": "look", "prompt": f"look at part {i}",
                           "subagent_type": "general-purpose"}, f"agent-{i}"), tmp_path, project)
        for i in range(6)]
    outputs = []
    for process in processes:
        out = process.stdout.read() if process.stdout else ""
        assert process.wait(timeout=60) == 0, process.stderr.read() if process.stderr else ""
        outputs.append(json.loads(out) if out.strip() else None)
    decisions = [decision(output) for output in outputs]
    assert sorted(decisions) == ["allow", "allow", "deny", "deny", "deny", "deny"], outputs
    for output in outputs:
        if decision(output) == "deny":
            reason = output["hookSpecificOutput"]["permissionDecisionReason"]
            assert "would start subagent" in reason and "$1.00 each" in reason
            assert "$0.50 left" in reason and "none would fit now" in reason
    with database(project) as conn:
        held = conn.execute("SELECT holder, kind, cost_usd FROM budget_reservations").fetchall()
        allowed = {f"agent-{i}" for i, d in enumerate(decisions) if d == "allow"}
        assert {row["holder"] for row in held} == allowed
        assert {row["kind"] for row in held} == {"subagent"}
        recorded = conn.execute("SELECT decision, count(*) FROM budget_calls WHERE tool = "
                                "'Agent' GROUP BY decision ORDER BY decision").fetchall()
        assert [tuple(row) for row in recorded] == [("allow", 2), ("deny", 4)]


def usage_line(message_id: str, tokens: int, text: str = "") -> str:
    return json.dumps({"type": "assistant", "isSidechain": True, "requestId": f"r{message_id}",
                       "timestamp": "2099-01-01T00:00:00.000Z", "message": {
                           "id": message_id, "model": "claude-sonnet-4-5",
                           "content": [{"type": "text", "text": text}],
                           "usage": {"input_tokens": tokens, "output_tokens": 10}}}) + "\n"


def test_a_subagent_stop_measures_it_then_releases_its_reservation(tmp_path: Path) -> None:
    project = clavain_project(tmp_path, {"budgets": {"maxCostUsd": 2.5, "agentCostUsd": 1.0}})
    (project / f"{SESSION}.jsonl").write_text(usage_line("main1", 1000))
    for i in range(2):
        assert decision(run("PreToolUse", tool_call(project, "Agent", {
            "prompt": "p", "subagent_type": "scout", "model": "haiku"}, f"a{i}"),
            tmp_path, project)) == "allow"
    assert decision(run("PreToolUse", tool_call(project, "Agent", {
        "prompt": "p", "subagent_type": "scout"}, "a2"), tmp_path, project)) == "deny"
    agent_file = project / SESSION / "subagents" / "agent-ag1.jsonl"
    agent_file.parent.mkdir(parents=True)
    agent_file.write_text(usage_line("sub1", 5000) + usage_line("sub1", 5000) +
                          usage_line("sub2", 7000, "all done"))
    assert run("SubagentStop", {
        "session_id": SESSION, "transcript_path": str(project / f"{SESSION}.jsonl"),
        "cwd": str(project), "hook_event_name": "SubagentStop", "agent_id": "ag1",
        "agent_type": "scout", "agent_transcript_path": str(agent_file),
        "last_assistant_message": "all done", "stop_hook_active": False},
        tmp_path, project) is None
    with database(project) as conn:
        assert [row[0] for row in conn.execute("SELECT holder FROM budget_reservations")] == \
            ["a1"]
        row = conn.execute("SELECT * FROM budget_agents WHERE agent_id = 'ag1'").fetchone()
        assert row["ended_at"] and row["model"] == "haiku"
        assert row["tokens"] == 5010 + 7010 and row["cost_usd"] > 0
        run_row = conn.execute("SELECT tokens, cost_usd FROM budget_runs").fetchone()
        # The session was measured (its own and the subagent's) before the release.
        assert run_row["tokens"] == 1010 + 5010 + 7010
    # Room for one more again.
    assert decision(run("PreToolUse", tool_call(project, "Agent", {
        "prompt": "p", "subagent_type": "scout"}, "a3"), tmp_path, project)) == "allow"


def test_a_failed_launch_gives_its_reservation_back(tmp_path: Path) -> None:
    project = clavain_project(tmp_path, {"budgets": {"maxCostUsd": 1.5, "agentCostUsd": 1.0}})
    call = tool_call(project, "Agent", {"prompt": "p"}, "a1")
    assert decision(run("PreToolUse", call, tmp_path, project)) == "allow"
    assert decision(run("PreToolUse", dict(call, tool_use_id="a2"), tmp_path, project)) == "deny"
    run("PostToolUseFailure", dict(call, hook_event_name="PostToolUseFailure",
                                   error="agent failed to start", is_interrupt=False),
        tmp_path, project)
    with database(project) as conn:
        assert conn.execute("SELECT count(*) FROM budget_reservations").fetchone()[0] == 0
    assert decision(run("PreToolUse", dict(call, tool_use_id="a3"), tmp_path, project)) == \
        "allow"


def test_a_subagent_over_its_calls_is_denied_and_the_main_thread_told(tmp_path: Path) -> None:
    project = clavain_project(tmp_path, {"budgets": {"perAgentMaxCalls": 2}})
    inside = {"agent_id": "sub-7", "agent_type": "scout"}
    results = [run("PreToolUse", tool_call(project, "Bash", {"command": f"echo {i}"}, f"t{i}",
                                           **inside), tmp_path, project) for i in range(3)]
    assert [decision(r) for r in results] == ["allow", "allow", "deny"]
    assert "Stop now" in results[2]["hookSpecificOutput"]["permissionDecisionReason"]
    main = run("PreToolUse", tool_call(project, "Bash", {"command": "git status"}, "m1"),
               tmp_path, project)
    assert "subagent scout (sub-7) was stopped" in main["hookSpecificOutput"]["additionalContext"]
    again = run("PreToolUse", tool_call(project, "Bash", {"command": "git log"}, "m2"),
                tmp_path, project)
    assert again is None


def test_a_workflow_call_is_projected_from_its_script(tmp_path: Path) -> None:
    project = clavain_project(tmp_path, {"budgets": {"maxCostUsd": 5.0, "agentCostUsd": 1.0}})
    script = "export const meta = {name: 'w'}\nfor (const f of args) { await agent(f) }\n"
    out = run("PreToolUse", tool_call(project, "Workflow", {
        "script": script, "args": [f"f{i}" for i in range(8)]}, "w1"), tmp_path, project)
    reason = out["hookSpecificOutput"]["permissionDecisionReason"]
    assert "would start 8 subagents (1 agent( call(s) × 8 items of args)" in reason
    assert "5 such subagents would fit now" in reason
    matchers = json.loads((REPO / "hooks" / "hooks.json").read_text())["hooks"]
    assert "Workflow" in matchers["PreToolUse"][0]["matcher"].split("|")
    assert "Agent" in matchers["PostToolUseFailure"][0]["matcher"].split("|")
    assert "matcher" not in matchers["SubagentStop"][0]  # every agent's stop releases
