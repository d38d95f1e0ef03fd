"""The workgraph.json snapshot, the Mermaid view and the committed JSON Schemas."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from clavain.models import node as node_models
from clavain.paths import StatePaths
from clavain.workgraph import export, graph, nodes, results
from clavain.workgraph.scaffold import ensure_scaffolding

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"


def _snapshot(state: StatePaths) -> dict:
    return json.loads(state.workgraph_json.read_text(encoding="utf-8"))


def test_empty_graph_snapshot_is_valid_json(conn) -> None:
    assert export.snapshot(conn)["nodes"] == []


def test_snapshot_has_version_and_nodes_with_depends_on(conn, state) -> None:
    graph.add_nodes(conn, state, [{"id": "a", "type": "task", "title": 'say "hi"\n<b>'},
                                  {"id": "b", "type": "verify", "dependsOn": ["a"]}])
    snap = _snapshot(state)
    assert snap["version"] == export.SNAPSHOT_VERSION and snap["exported_at"].endswith("Z")
    assert [n["id"] for n in snap["nodes"]] == ["a", "b"]
    assert snap["nodes"][0]["title"] == 'say "hi"\n<b>'
    assert snap["nodes"][1]["depends_on"] == ["a"]
    assert snap["nodes"][1] == nodes.get_node(conn, "b")


def _lag(state: StatePaths, seconds: float) -> None:
    state.root.mkdir(parents=True, exist_ok=True)
    state.config.write_text(json.dumps({"defaults": {"snapshotMaxLagSeconds": seconds}}))


def test_every_mutation_rewrites_the_snapshot(conn, state) -> None:
    _lag(state, 0)  # lag 0: written after every change
    graph.add_nodes(conn, state, [{"id": "t", "type": "task"}])
    ensure_scaffolding(conn, state)
    assert {n["id"] for n in _snapshot(state)["nodes"]} == {
        "t", "verify-t", "integrate", "final-verify"}
    results.apply_result(conn, state, "t", {"status": "checkpoint", "summary": "?",
                                            "question": "which?"})
    assert {n["id"]: n["status"] for n in _snapshot(state)["nodes"]}["t"] == "needs_human"
    graph.answer(conn, state, "t", "this")
    assert {n["id"]: n["status"] for n in _snapshot(state)["nodes"]}["t"] == "open"
    results.apply_result(conn, state, "t", {"status": "success", "summary": "ok"})
    graph.reset(conn, state, "t")
    assert {n["id"]: n["status"] for n in _snapshot(state)["nodes"]}["t"] == "open"
    assert not list(state.root.glob(".workgraph.json.*.tmp"))


def test_a_burst_of_changes_is_written_once_the_lag_is_reached(conn, state) -> None:
    """The default rule: the first change is written at once, the rest of a burst by one
    deferred writer within the allowed lag (no timing is asserted, only that it catches up)."""
    import time

    graph.add_nodes(conn, state, [{"id": "a", "type": "task"}])
    assert [n["id"] for n in _snapshot(state)["nodes"]] == ["a"]
    for index in range(5):
        graph.add_nodes(conn, state, [{"id": f"b{index}", "type": "task"}])
    deadline = time.monotonic() + 30
    while len(_snapshot(state)["nodes"]) != 6:
        assert time.monotonic() < deadline, "the deferred writer never caught up"
        time.sleep(0.05)
    assert _snapshot(state)["nodes"] == nodes.list_nodes(conn)[:0] + sorted(
        nodes.list_nodes(conn), key=lambda n: n["id"])


def test_a_snapshot_that_cannot_be_written_is_a_warning_not_a_failure(conn, state) -> None:
    from clavain import notices

    _lag(state, 0)
    state.workgraph_json.mkdir(parents=True)  # a folder where the file should go
    added = graph.add_nodes(conn, state, [{"id": "a", "type": "task"}])
    assert added == ["a"] and nodes.get_node(conn, "a") is not None  # committed
    [warning] = notices.take()
    assert "workgraph.json was not refreshed" in warning and "graph export" in warning


def test_mermaid_draws_boxes_and_arrows_with_safe_ids(conn, state) -> None:
    graph.add_nodes(conn, state, [{"id": "task-1.a", "type": "task", "title": 'a "quoted" <x>'},
                                  {"id": "verify:1", "type": "verify", "dependsOn": ["task-1.a"]}])
    conn.execute("UPDATE nodes SET status = 'failed' WHERE id = 'task-1.a'")
    text = export.mermaid(conn)
    lines = text.splitlines()
    assert lines[0] == "flowchart TD"
    assert any("task-1.a<br/>a #quot;quoted#quot; #lt;x#gt;" in line and line.endswith(":::failed")
               for line in lines)
    assert "  n0_task_1_a --> n1_verify_1" in lines
    assert any(line.startswith("  classDef failed") for line in lines)


def test_escalation_edges_are_dotted_in_mermaid(conn, state) -> None:
    graph.add_nodes(conn, state, [{"id": "a", "type": "task", "retryPolicy": {"maxAttempts": 1}}])
    results.apply_result(conn, state, "a", {"status": "fail", "summary": "x"})
    assert "n0_a -.-> n1_plan_escalate_a" in export.mermaid(conn)


# ---------------------------------------------------------------- schemas

def test_committed_schemas_match_the_models() -> None:
    for name, text in node_models.json_schemas().items():
        committed = (SCHEMAS / name).read_text(encoding="utf-8")
        assert committed == text, f"schemas/{name} drifted: run python -m clavain.models.node"


def test_schemas_accept_good_and_reject_bad_documents() -> None:
    node_schema = json.loads((SCHEMAS / "node.schema.json").read_text())
    result_schema = json.loads((SCHEMAS / "result.schema.json").read_text())
    good = {"nodes": [{"id": "t1", "type": "task", "dependsOn": [], "verify": ["true"],
                       "inputs": [{"nodeId": "p", "key": "out.summary", "as": "plan"}],
                       "retryPolicy": {"maxAttempts": 2}}]}
    jsonschema.validate(good, node_schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"nodes": [{"id": "t1", "type": "chore"}]}, node_schema)
    jsonschema.validate({"status": "success", "summary": "ok",
                         "next": {"addNodes": good["nodes"]}}, result_schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"status": "success", "summary": "ok", "extra": 1}, result_schema)
