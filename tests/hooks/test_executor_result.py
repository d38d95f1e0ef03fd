"""SubagentStop records an executor's `<result>` for the node its packet named, under the run
that holds it; anything else leaves the node alone and says why in hooks.log."""

from __future__ import annotations

import json
from pathlib import Path

from clavain.paths import StatePaths
from clavain.store import db
from clavain.workgraph import claims, edits, nodes, packets
from clavain.workgraph.graphs import DEFAULT_GRAPH, Graph
from tests.checks import PASSES

from .test_subagent_stop import payload, transcript_lines

ANSWER = """Renamed foo to bar in src/app.py; `! grep -rqw foo src` passes.

<result>{"status": "success", "summary": "renamed foo to bar", "errors": []}</result>

TYPE: implementation
STATUS: COMPLETE
FILES_CHANGED: [src/app.py]
SUMMARY: renamed foo to bar
"""


def _claimed_task(project: Path, run_id: str = "r-exec") -> tuple[StatePaths, str]:
    state = StatePaths(project / ".clavain")
    conn = db.connect(state.db)
    g = Graph(conn, DEFAULT_GRAPH, state)
    edits.add_nodes(g, [{"id": "task-a", "type": "task", "verify": [PASSES]}])
    claims.claim_node(g, "task-a", run_id=run_id)
    packet = packets.render_packet(g, "task-a", thin=True)["packet"]
    conn.close()
    return state, packet


def _agent_transcript(path: Path, packet: str, answer: str) -> Path:
    first = json.dumps({"type": "user", "isSidechain": True,
                        "message": {"role": "user", "content": packet}}, ensure_ascii=False)
    path.write_text("\n".join([first, *transcript_lines([40], answer)]) + "\n")
    return path


def _node(state: StatePaths) -> dict:
    conn = db.connect(state.db)
    try:
        return nodes.get_node(Graph(conn, DEFAULT_GRAPH, state), "task-a")
    finally:
        conn.close()


def test_the_executors_result_is_recorded_for_its_node(run_hook, tmp_path: Path) -> None:
    state, packet = _claimed_task(tmp_path)
    assert "Clavain node: task-a · run: r-exec · graph: default" in packet
    agent_transcript = _agent_transcript(tmp_path / "agent-a1.jsonl", packet, ANSWER)
    result = run_hook("SubagentStop", payload(tmp_path, "clavain:executor", ANSWER,
                                              agent_transcript_path=str(agent_transcript)))
    assert (result.returncode, result.stdout) == (0, "")
    node = _node(state)
    assert (node["status"], node["lock_run_id"]) == ("done", None)
    assert not (state.logs / "hooks.log").exists()
    [verdict] = state.verdicts.glob("clavain-executor--*.json")
    assert json.loads(verdict.read_text())["status"] == "COMPLETE"


def test_a_result_the_graph_refuses_leaves_the_node_and_one_log_line(run_hook,
                                                                      tmp_path: Path) -> None:
    state, packet = _claimed_task(tmp_path)
    forged = packet.replace("run: r-exec", "run: someone-else")
    agent_transcript = _agent_transcript(tmp_path / "agent-a1.jsonl", forged, ANSWER)
    run_hook("SubagentStop", payload(tmp_path, "clavain:executor", ANSWER,
                                     agent_transcript_path=str(agent_transcript)))
    assert _node(state)["status"] == "in_progress"
    [line] = (state.logs / "hooks.log").read_text().splitlines()
    assert "executor result for task-a not recorded" in line and "claimed by run" in line


def test_without_a_packet_or_a_result_nothing_is_applied(run_hook, tmp_path: Path) -> None:
    state, packet = _claimed_task(tmp_path)
    plain = _agent_transcript(tmp_path / "agent-a1.jsonl", "just do the thing", ANSWER)
    run_hook("SubagentStop", payload(tmp_path, "clavain:executor", ANSWER,
                                     agent_transcript_path=str(plain)))
    no_result = ANSWER.replace("<result>", "(result)")
    with_packet = _agent_transcript(tmp_path / "agent-a2.jsonl", packet, no_result)
    run_hook("SubagentStop", payload(tmp_path, "clavain:executor", no_result, agent_id="a2",
                                     agent_transcript_path=str(with_packet)))
    assert _node(state)["status"] == "in_progress"
    assert not (state.logs / "hooks.log").exists()


def test_the_result_is_recorded_on_the_graph_the_packet_names(run_hook, tmp_path: Path) -> None:
    """A node of a graph the session would not pick (not the active sprint's) still gets its
    result: the packet's marker names the graph."""
    state = StatePaths(tmp_path / ".clavain")
    conn = db.connect(state.db)
    try:
        g = Graph(conn, "run-side", state)
        edits.add_nodes(g, [{"id": "task-a", "type": "task", "verify": [PASSES]}])
        claims.claim_node(g, "task-a", run_id="r-exec")
        packet = packets.render_packet(g, "task-a", thin=True)["packet"]
    finally:
        conn.close()
    assert "Clavain node: task-a · run: r-exec · graph: run-side" in packet
    agent_transcript = _agent_transcript(tmp_path / "agent-a1.jsonl", packet, ANSWER)
    result = run_hook("SubagentStop", payload(tmp_path, "clavain:executor", ANSWER,
                                              agent_transcript_path=str(agent_transcript)))
    assert (result.returncode, result.stdout) == (0, "")
    conn = db.connect(state.db)
    try:
        node = nodes.get_node(Graph(conn, "run-side", state), "task-a")
    finally:
        conn.close()
    assert (node["status"], node["lock_run_id"]) == ("done", None)
    assert not (state.logs / "hooks.log").exists()
