"""Fan-out projection and reservation (`guards.fanout`), a subagent's own cap and its end
(`guards.agents`), on a real SQLite state database."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from clavain.guards import agents, budget, fanout, policy, reservations
from clavain.guards.commands import compile_patterns
from clavain.store import db

RUN = "session:s1"
AT = "2026-11-28T10:00:00.000Z"


@pytest.fixture
def sql(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    conn = db.connect(tmp_path / "state.sqlite")
    yield conn
    conn.close()


def limits(**settings: object) -> dict:
    resolved, problems = policy.resolve(settings, {})
    assert problems == []
    return resolved


def agent_call(tool_input: dict, project: Path, tool: str = "Agent") -> dict:
    call = budget.describe(tool, tool_input, compile_patterns([]))
    call["fanout"] = fanout.shape(tool, tool_input, str(project))
    return call


def check(conn, call: dict, lim: dict, tool_use_id: str, **extra: object) -> dict:
    return budget.check(conn, run_key=RUN, session_id="s1", call=call, limits=lim, problems=[],
                        tool_use_id=tool_use_id, **extra)


def ended(conn, agent_id: str, model: str, tokens: int, cost: float) -> None:
    with db.transaction(conn):
        agents.finish(conn, "session:old", agent_id, "x", model=model, tokens=tokens,
                      cost_usd=cost, at=AT)


# --- what a call starts -------------------------------------------------------------------

def test_an_agent_call_names_its_model_else_its_definition_else_inherit(tmp_path: Path) -> None:
    (tmp_path / ".claude" / "agents").mkdir(parents=True)
    (tmp_path / ".claude" / "agents" / "scout.md").write_text(
        "---\nname: scout\ndescription: looks\nmodel: claude-haiku-4-5\n---\nLook around.\n")
    (tmp_path / ".claude" / "agents" / "plain.md").write_text("---\nname: plain\n---\nbody\n")
    shape = fanout.shape("Agent", {"prompt": "p", "model": "opus", "subagent_type": "scout"},
                         str(tmp_path))
    assert shape["agents"] == [["opus", 1]] and shape["subagent_type"] == "scout"
    assert fanout.shape("Agent", {"subagent_type": "scout"}, str(tmp_path))["agents"] == \
        [["haiku", 1]]
    assert fanout.shape("Task", {"subagent_type": "plain"}, str(tmp_path))["agents"] == \
        [["inherit", 1]]
    # This plugin's agents by the host's names (a folder or none); a name that would leave
    # the folder, another plugin's agent and no subagent_type all inherit.
    assert fanout.definition_model("clavain:reviewer", str(tmp_path)) == "sonnet"
    assert fanout.definition_model("clavain:workflow:executor", str(tmp_path)) == "sonnet"
    for kind in ("../../etc/passwd", "other:agent", "clavain:../x"):
        assert fanout.definition_model(kind, str(tmp_path)) == "inherit"
    bare = fanout.shape("Agent", {"prompt": "p", "model": "gpt"}, str(tmp_path))
    assert bare["subagent_type"] == "general-purpose" and bare["agents"] == [["inherit", 1]]


WORKFLOW = """export const meta = { name: 'review', description: 'review files', phases: [] }
const reviews = await parallel(args.files.map(f => () =>
  agent(`review ${f}`, { model: 'haiku' })))
const fixes = await agent('fix what they found', { model: "opus" })
await agent('summarize')
"""


def test_a_workflow_counts_its_agent_calls_times_the_list_it_maps_over(tmp_path: Path) -> None:
    args = {"files": ["a.py", "b.py", "c.py", "d.py"]}
    shape = fanout.shape("Workflow", {"script": WORKFLOW, "args": args}, str(tmp_path))
    # Three agent( calls, each counted four times (an estimate that errs high).
    assert shape["count"] == 12
    assert shape["agents"] == [["haiku", 4], ["inherit", 4], ["opus", 4]]
    assert "3 agent( call(s) × 4 items of args" in shape["note"]
    # The same script from a file, and by name from .claude/workflows.
    (tmp_path / "flow.js").write_text(WORKFLOW)
    assert fanout.shape("Workflow", {"scriptPath": "flow.js", "args": args},
                        str(tmp_path))["count"] == 12
    (tmp_path / ".claude" / "workflows").mkdir(parents=True)
    (tmp_path / ".claude" / "workflows" / "review.js").write_text(
        "export const meta = {name: 'r'}\nfor (const q of args) { await agent(q) }\n")
    assert fanout.shape("Workflow", {"name": "review", "args": ["x", "y"]},
                        str(tmp_path))["count"] == 2
    # Nothing readable, or no agent( call: one agent, never none.
    for tool_input in ({"name": "missing"}, {"name": "../x"}, {"scriptPath": "nope.js"},
                       {"script": "console.log('no agents')"}, {}):
        assert fanout.shape("Workflow", tool_input, str(tmp_path))["count"] == 1


def test_a_workflow_script_that_is_a_fifo_is_not_waited_on(tmp_path: Path) -> None:
    import os

    os.mkfifo(tmp_path / "flow.js")
    assert fanout.shape("Workflow", {"scriptPath": str(tmp_path / "flow.js")},
                        str(tmp_path))["count"] == 1


# --- the projection -----------------------------------------------------------------------

def test_the_projection_is_the_median_of_finished_subagents_of_that_model(sql) -> None:
    lim = limits(agentTokens=300_000, agentCostUsd=1.0)
    assert fanout.projection(sql, "sonnet", lim)["cost_usd"] == 1.0  # no history: the default
    for number, (tokens, cost) in enumerate([(100, 0.10), (900, 0.90), (200, 0.20)]):
        ended(sql, f"s{number}", "sonnet", tokens, cost)
    ended(sql, "h1", "haiku", 5, 0.01)
    # A running subagent is no history.
    with db.transaction(sql):
        sql.execute("INSERT INTO budget_agents (run_key, agent_id, model, tokens, cost_usd, "
                    "started_at, updated_at) VALUES ('session:old', 'live', 'sonnet', 1, 0.0, "
                    "?, ?)", (AT, AT))
    sonnet = fanout.projection(sql, "sonnet", lim)
    assert (sonnet["tokens"], sonnet["cost_usd"]) == (200, 0.20)
    assert "median" in sonnet["source"]
    # Too little history for haiku (one agent), none for inherit: the defaults.
    assert fanout.projection(sql, "haiku", lim)["tokens"] == 300_000
    assert fanout.projection(sql, "inherit", lim)["cost_usd"] == 1.0


def test_agents_that_measured_nothing_are_no_history(sql) -> None:
    """A subagent whose transcript was never written ends with nothing measured: three such
    would otherwise project the next fan-out as free and turn the cap off."""
    lim = limits(agentTokens=300_000, agentCostUsd=1.0)
    for number in range(5):
        ended(sql, f"z{number}", "opus", 0, 0.0)
    assert fanout.projection(sql, "opus", lim)["cost_usd"] == 1.0


# --- the reservation in budget.check --------------------------------------------------------

def test_a_call_that_would_pass_the_cap_is_denied_with_the_figures(sql, tmp_path: Path) -> None:
    lim = limits(maxCostUsd=2.5, agentCostUsd=1.0, agentTokens=1000)
    call = agent_call({"prompt": "p", "subagent_type": "general-purpose"}, tmp_path)
    assert [check(sql, dict(call), lim, f"t{i}")["decision"] for i in range(3)] == \
        ["allow", "allow", "deny"]
    held = reservations.listed(sql, RUN, kind="subagent")
    assert [r["holder"] for r in held] == ["t0", "t1"]
    assert held[0]["detail"] == {"tool": "Agent", "subagent_type": "general-purpose",
                                 "model": "inherit", "count": 1, "left": 1,
                                 "agents": [["inherit", 1, 1000, 1.0]]}
    denied = sql.execute("SELECT reason FROM budget_calls WHERE tool_use_id = 't2'").fetchone()[0]
    assert "1 inherit at 1,000 tokens / $1.00 each" in denied
    assert "1,000 tokens / $1.00 in all" in denied
    assert "$0.50 left" in denied and "2 reservation(s)" in denied
    assert "none would fit now" in denied and "maxCostUsd" in denied
    # A Workflow that would start more than fits says how many would.
    lim = limits(maxCostUsd=10.0, agentCostUsd=1.0, agentTokens=1000)
    flow = agent_call({"script": WORKFLOW, "args": {"files": ["a", "b", "c"]}}, tmp_path,
                      tool="Workflow")
    result = check(sql, flow, lim, "w1")
    assert result["decision"] == "deny"
    assert "would start 9 subagents" in result["reason"]
    assert "8 such subagents would fit now" in result["reason"]


def test_spent_and_reserved_both_count(sql, tmp_path: Path) -> None:
    lim = limits(maxCostUsd=3.0, agentCostUsd=1.0)
    call = agent_call({"prompt": "p"}, tmp_path)
    assert check(sql, dict(call), lim, "t0")["decision"] == "allow"
    with db.transaction(sql):
        sql.execute("UPDATE budget_runs SET cost_usd = 1.5 WHERE run_key = ?", (RUN,))
    assert check(sql, dict(call), lim, "t1")["decision"] == "deny"  # 1.5 + 1 + 1 > 3


def test_a_denied_loop_reserves_nothing(sql, tmp_path: Path) -> None:
    lim = limits(maxCostUsd=0.5, agentCostUsd=1.0)
    assert check(sql, agent_call({"prompt": "p"}, tmp_path), lim, "t0")["decision"] == "deny"
    assert reservations.listed(sql, RUN) == []


# --- release ------------------------------------------------------------------------------

def test_a_stop_releases_the_oldest_of_its_type_and_a_workflow_share(sql, tmp_path: Path) -> None:
    lim = limits(maxCostUsd=100.0, agentCostUsd=1.0, agentTokens=1000)
    for holder, kind in (("a", "scout"), ("b", "general-purpose"), ("c", "scout")):
        check(sql, agent_call({"prompt": "p", "subagent_type": kind}, tmp_path), lim, holder)
    check(sql, agent_call({"script": "await agent('x'); await agent('y')"}, tmp_path,
                          tool="Workflow"), lim, "w")
    with db.transaction(sql):
        assert fanout.release_one(sql, RUN, "scout")["subagent_type"] == "scout"
    assert [r["holder"] for r in reservations.listed(sql, RUN)] == ["b", "c", "w"]
    with db.transaction(sql):  # an agent of a Workflow run: one share of its reservation
        assert fanout.release_one(sql, RUN, "workflow-subagent")["tool"] == "Workflow"
        # An agent nothing was reserved for releases nothing (it only over-counts).
        assert fanout.release_one(sql, RUN, "other") is None
    workflow = reservations.listed(sql, RUN)[-1]
    assert (workflow["tokens"], workflow["cost_usd"], workflow["detail"]["left"]) == \
        (1000, 1.0, 1)
    with db.transaction(sql):
        fanout.release_one(sql, RUN, "workflow-subagent")
        assert fanout.release_one(sql, RUN, "workflow-subagent") is None  # nothing left
    assert [r["holder"] for r in reservations.listed(sql, RUN)] == ["b", "c"]
    assert fanout.release_failed(sql, RUN, "b")["holder"] == "b"
    assert fanout.release_failed(sql, RUN, "b") is None


def test_reset_clears_the_runs_reservations_and_live_agents(sql, tmp_path: Path) -> None:
    from clavain.guards.report import reset

    lim = limits(maxCostUsd=100.0)
    check(sql, agent_call({"prompt": "p"}, tmp_path), lim, "t0")
    call = budget.describe("Bash", {"command": "ls"}, compile_patterns([]))
    check(sql, {**call, "agent_id": "live"}, lim, "t1")
    with db.transaction(sql):
        agents.finish(sql, RUN, "done", "x", model="sonnet", tokens=5, cost_usd=0.1, at=AT)
    reset(sql, RUN, {"kind": "person"})
    assert reservations.listed(sql, RUN) == []
    assert [r[0] for r in sql.execute("SELECT agent_id FROM budget_agents")] == ["done"]


# --- a subagent's own cap -------------------------------------------------------------------

def bash_in(agent_id: str, command: str = "ls", **extra: object) -> dict:
    call = budget.describe("Bash", {"command": command}, compile_patterns([]))
    return {**call, "agent_id": agent_id, "agent_type": "scout", **extra}


def test_a_subagent_over_its_calls_is_stopped_and_the_parent_told_once(sql) -> None:
    lim = limits(perAgentMaxCalls=2)
    results = [check(sql, bash_in("a1", f"echo {i}"), lim, f"t{i}") for i in range(4)]
    assert [r["decision"] for r in results] == ["allow", "allow", "deny", "deny"]
    assert "over its own cap (2 of perAgentMaxCalls 2 tool calls made)" in results[2]["reason"]
    assert "return what you have" in results[3]["reason"]
    row = sql.execute("SELECT * FROM budget_agents WHERE agent_id = 'a1'").fetchone()
    assert row["calls"] == 2 and row["over_reason"]
    # Another subagent has its own count; its calls do not tell the parent.
    assert check(sql, bash_in("a2", "pwd"), lim, "t9")["decision"] == "allow"
    # The main thread's next counted call carries the note, once.
    main = budget.describe("Bash", {"command": "git status"}, compile_patterns([]))
    told = check(sql, dict(main), lim, "m1")
    assert told["decision"] == "warn" and "subagent scout (a1) was stopped" in told["reason"]
    again = check(sql, budget.describe("Bash", {"command": "git log"}, compile_patterns([])),
                  lim, "m2")
    assert "was stopped" not in (again["reason"] or "")
    assert sql.execute("SELECT agents_untold FROM budget_runs").fetchone()[0] == 0


def usage_line(message_id: str, tokens: int, block: str = "text") -> str:
    return json.dumps({"type": "assistant", "requestId": f"r-{message_id}", "message": {
        "id": message_id, "model": "claude-sonnet-4-5", "content": [{"type": block}],
        "usage": {"input_tokens": tokens, "output_tokens": 0}}}) + "\n"


def test_a_subagent_over_its_tokens_is_stopped_reading_its_file_on(sql, tmp_path: Path) -> None:
    lim = limits(perAgentMaxTokens=1000)
    path = tmp_path / "agent-a1.jsonl"
    # One response written as two content-block lines counts once; a torn last line waits.
    path.write_text(usage_line("m1", 400) + usage_line("m1", 400, "tool_use")
                    + '{"type": "user", "message": {"content": "big tool result"}}\n')
    call = bash_in("a1", agent_file=str(path))
    assert check(sql, dict(call), lim, "t1")["decision"] == "allow"
    row = sql.execute("SELECT tokens, read_to FROM budget_agents").fetchone()
    assert (row["tokens"], row["read_to"]) == (400, path.stat().st_size)
    with path.open("a") as handle:
        handle.write(usage_line("m2", 500) + usage_line("m3", 200)[:30])
    assert check(sql, dict(call, subject="b"), lim, "t2")["decision"] == "allow"  # 900
    with path.open("a") as handle:
        handle.write(usage_line("m3", 200)[30:])
    denied = check(sql, dict(call, subject="c"), lim, "t3")
    assert denied["decision"] == "deny" and "1,100 of perAgentMaxTokens 1,000" in denied["reason"]
    # Without perAgentMaxTokens its file is never read.
    assert agents.read_on(str(tmp_path / "none.jsonl"), 7, 3, "x") == (7, 3, "x")


def test_a_rewritten_transcript_is_read_again_from_the_start(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    path.write_text(usage_line("m1", 10) + usage_line("m2", 20))
    tokens, read_to, last = agents.read_on(str(path), 0, 0, None)
    assert tokens == 30
    path.write_text(usage_line("m9", 5))
    assert agents.read_on(str(path), tokens, read_to, last)[0] == 5
    (tmp_path / "bad.jsonl").write_bytes(b'{"usage": [\n\xff"usage"\n[1, "usage"]\n')
    assert agents.read_on(str(tmp_path / "bad.jsonl"), 0, 0, None)[0] == 0


def test_agent_transcript_refuses_odd_ids() -> None:
    assert agents.agent_transcript("/p/s.jsonl", "a1") == "/p/s/subagents/agent-a1.jsonl"
    for transcript, agent in (("/p/s.jsonl", "../x"), ("/p/s.jsonl", ""), (None, "a"),
                              ("/p/s.txt", "a"), ("/p/s.jsonl", "a/b")):
        assert agents.agent_transcript(transcript, agent) is None


def test_a_stop_whose_spend_cannot_be_measured_keeps_its_reservation(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail closed: the reservation goes only after the spend is in the run."""
    from clavain.guards import usage

    project = tmp_path / "project"
    (project / ".clavain").mkdir(parents=True)
    monkeypatch.chdir(project)
    monkeypatch.delenv("CLAVAIN_BUDGET_RUN", raising=False)
    conn = db.connect(project / ".clavain" / "state.sqlite")
    lim = limits(maxCostUsd=100.0)
    budget.check(conn, run_key="session:s9", session_id="s9", limits=lim, problems=[],
                 call=agent_call({"prompt": "p", "subagent_type": "scout"}, project),
                 tool_use_id="t1")
    conn.close()
    payload = {"session_id": "s9", "cwd": str(project), "agent_id": "a1",
               "agent_type": "scout", "transcript_path": str(project / "s9.jsonl")}

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(usage, "measure", broken)
    with pytest.raises(OSError):
        agents.subagent_stopped(payload)
    conn = db.connect(project / ".clavain" / "state.sqlite")
    assert [r["holder"] for r in reservations.listed(conn, "session:s9")] == ["t1"]
    monkeypatch.undo()
    monkeypatch.chdir(project)
    assert agents.subagent_stopped(payload) is None
    assert reservations.listed(conn, "session:s9") == []
    row = conn.execute("SELECT model, ended_at FROM budget_agents").fetchone()
    assert row["model"] == "inherit" and row["ended_at"]
    conn.close()


def test_a_workflow_agents_file_is_found_in_its_runs_folder(sql, tmp_path: Path) -> None:
    from pathlib import Path as P

    from clavain.verdicts.transcript import subagent_files

    session = tmp_path / "s1.jsonl"
    session.write_text(usage_line("main", 1))
    expected = agents.agent_transcript(str(session), "w1")
    assert expected is not None
    written = tmp_path / "s1" / "subagents" / "workflows" / "wf_1" / "agent-w1.jsonl"
    written.parent.mkdir(parents=True)
    written.write_text(usage_line("m1", 2000))
    lim = limits(perAgentMaxTokens=1000)
    call = bash_in("w1", agent_file=expected)
    denied = check(sql, dict(call), lim, "t1")  # its file already holds 2,000 tokens
    assert denied["decision"] == "deny" and "2,000 of perAgentMaxTokens" in denied["reason"]
    # The session's measured figure includes a Workflow run's agents too.
    assert subagent_files(P(session)) == [written]


def test_the_parent_is_told_on_a_call_that_runs_not_on_a_denied_one(sql) -> None:
    lim = limits(perAgentMaxCalls=0, maxCommands=0)
    web = budget.describe("WebFetch", {"url": "https://example.com"}, compile_patterns([]))
    stopped = check(sql, {**web, "agent_id": "a1", "agent_type": "scout"}, lim, "t1")
    assert "over its own cap" in stopped["reason"]
    main = budget.describe("Bash", {"command": "make"}, compile_patterns([]))
    denied = check(sql, main, lim, "m1")  # no command left: denied, and not told
    assert denied["decision"] == "deny" and "was stopped" not in denied["reason"]
    assert "subagent scout (a1) was stopped" in check(sql, dict(web), lim, "m2")["reason"]


def test_a_runner_of_clavain_run_launches_subagents_under_its_own_share(sql, tmp_path: Path
                                                                        ) -> None:
    """A headless runner's share is reserved by the supervisor and capped by the host
    (`--max-budget-usd` counts its subagents): its subagents reserve nothing more, so with one
    worker holding all that is left they are not denied; a spent run still denies them."""
    lim = limits(maxCostUsd=2.0, agentCostUsd=1.5)
    call = agent_call({"prompt": "p"}, tmp_path)
    with db.transaction(sql):
        reservations.reserve(sql, "run:r1", "task-1#1", kind=reservations.RUNNER, tokens=0,
                             cost_usd=2.0, at=AT)
    result = budget.check(sql, run_key="run:r1", session_id=None, call=call, limits=lim,
                          problems=[], tool_use_id="t1")
    assert result["decision"] != "deny"
    assert [r["holder"] for r in reservations.listed(sql, "run:r1")] == ["task-1#1"]
    sql.execute("UPDATE budget_runs SET cost_usd = 2.0 WHERE run_key = 'run:r1'")
    sql.commit()
    assert budget.check(sql, run_key="run:r1", session_id=None, call=call, limits=lim,
                        problems=[], tool_use_id="t2")["decision"] == "deny"


def test_an_agent_read_whole_for_its_verdict_is_not_read_again(tmp_path: Path, monkeypatch) -> None:
    """SubagentStop reads the subagent's transcript once: the budget prices what the verdict
    read (the same figures as a fresh read), unless the subagent started agents of its own."""
    from clavain.verdicts import transcript

    path = tmp_path / "agent-a1.jsonl"
    path.write_text(usage_line("m1", 400) + usage_line("m2", 700) + usage_line("m2", 700))
    payload = {"agent_transcript_path": str(path), "last_assistant_message": ""}
    fresh = agents._measure_agent(payload)
    known = transcript.transcript_usage(path)
    reads: list[str] = []
    original = transcript._usage_lines
    monkeypatch.setattr(transcript, "_usage_lines",
                        lambda p, *a: reads.append(str(p)) or original(p, *a))
    assert agents._measure_agent(payload, known) == fresh and fresh[0][0] == 1100
    assert reads == []
    nested = tmp_path / "agent-a1" / "subagents" / "agent-b2.jsonl"
    nested.parent.mkdir(parents=True)
    nested.write_text(usage_line("m3", 50))
    assert agents._measure_agent(payload, known)[0][0] == 1150  # its own agents: read it all
    assert str(path) in reads
