"""The workgraph.json snapshot, the Mermaid view and the committed JSON Schemas."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from clavain.models import node as node_models
from clavain.paths import StatePaths
from clavain.store.db import transaction
from clavain.workgraph import edits, export, graphs, nodes, results
from clavain.workgraph.graphs import Graph
from clavain.workgraph.scaffold import ensure_scaffolding
from tests.checks import PASSES

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"


def _snapshot(state: StatePaths) -> dict:
    return json.loads(state.workgraph_json.read_text(encoding="utf-8"))


def test_empty_graph_snapshot_is_valid_json(conn) -> None:
    snap = export.snapshot(conn)
    assert snap["nodes"] == []
    # Every database has the default graph (migration 0004), even before any node.
    assert [(x["id"], x["kind"], x["status"]) for x in snap["graphs"]] == [
        ("default", "default", "active")]


def test_snapshot_has_version_and_nodes_with_depends_on(g, state) -> None:
    edits.add_nodes(g, [{"id": "a", "type": "task", "title": 'say "hi"\n<b>'},
                        {"id": "b", "type": "verify", "dependsOn": ["a"]}])
    snap = _snapshot(state)
    assert snap["version"] == export.SNAPSHOT_VERSION and snap["exported_at"].endswith("Z")
    assert [n["id"] for n in snap["nodes"]] == ["a", "b"]
    assert snap["nodes"][0]["title"] == 'say "hi"\n<b>'
    assert snap["nodes"][1]["depends_on"] == ["a"]
    assert {n["graph_id"] for n in snap["nodes"]} == {"default"}
    assert snap["nodes"][1] == nodes.get_node(g, "b")


def test_snapshot_holds_every_active_graph_and_one_graph_on_request(g, conn, state) -> None:
    """Version 3: several graphs, each node naming its own; a closed sprint's graph leaves the
    live snapshot but can still be exported alone (its archive)."""
    sprint = Graph(conn, "sprint-1", state)
    with transaction(conn):
        graphs.ensure(conn, sprint.id, at="2000-01-01T00:00:00.000Z", kind="sprint")
    edits.add_nodes(g, [{"id": "a", "type": "task"}])
    edits.add_nodes(sprint, [{"id": "a", "type": "task"}, {"id": "b", "type": "task"}])
    snap = export.snapshot(conn)
    assert [x["id"] for x in snap["graphs"]] == ["sprint-1", "default"]  # oldest first
    assert [(n["graph_id"], n["id"]) for n in snap["nodes"]] == [
        ("sprint-1", "a"), ("sprint-1", "b"), ("default", "a")]
    alone = export.snapshot(conn, "sprint-1")
    assert [x["id"] for x in alone["graphs"]] == ["sprint-1"]
    assert [(n["graph_id"], n["id"]) for n in alone["nodes"]] == [
        ("sprint-1", "a"), ("sprint-1", "b")]
    with transaction(conn):
        assert graphs.close(sprint, "abandoned", at="2000-01-02T00:00:00.000Z",
                            note="abandoned") == ["a", "b"]
    live = export.snapshot(conn)
    assert [x["id"] for x in live["graphs"]] == ["default"]
    assert [(n["graph_id"], n["id"]) for n in live["nodes"]] == [("default", "a")]
    archived = export.snapshot(conn, "sprint-1")
    assert archived["graphs"][0]["status"] == "abandoned"
    assert {n["status"] for n in archived["nodes"]} == {"cancelled"}


def _lag(state: StatePaths, seconds: float) -> None:
    state.root.mkdir(parents=True, exist_ok=True)
    state.config.write_text(json.dumps({"defaults": {"snapshotMaxLagSeconds": seconds}}))


def test_every_mutation_rewrites_the_snapshot(g, state) -> None:
    _lag(state, 0)  # lag 0: written after every change
    edits.add_nodes(g, [{"id": "t", "type": "task"}])
    ensure_scaffolding(g)
    assert {n["id"] for n in _snapshot(state)["nodes"]} == {
        "t", "verify-t", "integrate", "final-verify"}
    results.apply_result(g, "t", {"status": "checkpoint", "summary": "?",
                                  "question": "which?"})
    assert {n["id"]: n["status"] for n in _snapshot(state)["nodes"]}["t"] == "needs_human"
    edits.answer(g, "t", "this")
    assert {n["id"]: n["status"] for n in _snapshot(state)["nodes"]}["t"] == "open"
    results.apply_result(g, "t", {"status": "success", "summary": "ok"})
    edits.reset(g, "t")
    assert {n["id"]: n["status"] for n in _snapshot(state)["nodes"]}["t"] == "open"
    assert not list(state.root.glob(".workgraph.json.*.tmp"))


def test_a_burst_of_changes_is_written_once_the_lag_is_reached(g, state) -> None:
    """The default rule: the first change is written at once, the rest of a burst by one
    deferred writer within the allowed lag (no timing is asserted, only that it catches up)."""
    import time

    edits.add_nodes(g, [{"id": "a", "type": "task"}])
    assert [n["id"] for n in _snapshot(state)["nodes"]] == ["a"]
    for index in range(5):
        edits.add_nodes(g, [{"id": f"b{index}", "type": "task"}])
    deadline = time.monotonic() + 30
    while len(_snapshot(state)["nodes"]) != 6:
        assert time.monotonic() < deadline, "the deferred writer never caught up"
        time.sleep(0.05)
    assert _snapshot(state)["nodes"] == nodes.list_nodes(g)[:0] + sorted(
        nodes.list_nodes(g), key=lambda n: n["id"])


@pytest.mark.parametrize("gone", ["workgraph.json.pending", "workgraph.json.lock",
                                  "workgraph.json"])
def test_the_deferred_writer_makes_no_file_in_a_state_folder_being_removed(
        g, state, gone, monkeypatch) -> None:
    """`shutil.rmtree` unlinks the folder's files one by one, then the folder: a deferred
    writer that starts (or wakes) in between creates nothing there (a lock file, the
    snapshot), or the removal fails ("Directory not empty") and the folder is made again."""
    started: list[float] = []
    monkeypatch.setattr(export, "_start_deferred_writer",
                        lambda _state, *, due: started.append(due))
    monkeypatch.setenv("CLAVAIN_SNAPSHOT_STORE", state.store_url or "")
    edits.add_nodes(g, [{"id": "a", "type": "task"}])  # written at once
    edits.add_nodes(g, [{"id": "b", "type": "task"}])  # deferred: the writer is started
    assert len(started) == 1
    (state.root / gone).unlink()  # the removal has gone this far
    left = sorted(p.name for p in state.root.iterdir())
    export.deferred_write([str(state.root), str(state.project), str(state.db), "0"])
    assert sorted(p.name for p in state.root.iterdir()) == left


def test_a_snapshot_that_cannot_be_written_is_a_warning_not_a_failure(g, state) -> None:
    from clavain import notices

    _lag(state, 0)
    state.workgraph_json.mkdir(parents=True)  # a folder where the file should go
    added = edits.add_nodes(g, [{"id": "a", "type": "task"}])
    assert added == ["a"] and nodes.get_node(g, "a") is not None  # committed
    [warning] = notices.take()
    assert "workgraph.json was not refreshed" in warning and "graph export" in warning


def test_mermaid_draws_boxes_and_arrows_with_safe_ids(g, conn) -> None:
    edits.add_nodes(g, [{"id": "task-1.a", "type": "task", "title": 'a "quoted" <x>'},
                        {"id": "verify:1", "type": "verify", "dependsOn": ["task-1.a"]}])
    conn.execute("UPDATE nodes SET status = 'failed' WHERE id = 'task-1.a'")
    text = export.mermaid(g)
    lines = text.splitlines()
    assert lines[0] == "flowchart TD"
    assert any("task-1.a<br/>a #quot;quoted#quot; #lt;x#gt;" in line and line.endswith(":::failed")
               for line in lines)
    assert "  n0_task_1_a --> n1_verify_1" in lines
    assert any(line.startswith("  classDef failed") for line in lines)


def test_mermaid_draws_only_its_own_graph(g, conn, state) -> None:
    other = Graph(conn, "run-x", state)
    edits.add_nodes(g, [{"id": "a", "type": "task"}, {"id": "b", "type": "task",
                                                      "dependsOn": ["a"]}])
    edits.add_nodes(other, [{"id": "a", "type": "task"}, {"id": "z", "type": "task",
                                                          "dependsOn": ["a"]}])
    def boxes(text: str) -> list[str]:
        return [line.split("[", 1)[0].strip() for line in text.splitlines() if '["' in line]

    assert boxes(export.mermaid(g)) == ["n0_a", "n1_b"]
    assert "  n0_a --> n1_b" in export.mermaid(g).splitlines()
    assert boxes(export.mermaid(other)) == ["n0_a", "n1_z"]
    assert "  n0_a --> n1_z" in export.mermaid(other).splitlines()


def test_escalation_edges_are_dotted_in_mermaid(g) -> None:
    edits.add_nodes(g, [{"id": "a", "type": "task", "retryPolicy": {"maxAttempts": 1}}])
    results.apply_result(g, "a", {"status": "fail", "summary": "x"})
    assert "n0_a -.-> n1_plan_escalate_a" in export.mermaid(g)


# ---------------------------------------------------------------- schemas

def test_committed_schemas_match_the_models() -> None:
    for name, text in node_models.json_schemas().items():
        committed = (SCHEMAS / name).read_text(encoding="utf-8")
        assert committed == text, f"schemas/{name} drifted: run python -m clavain.models.node"


def test_schemas_accept_good_and_reject_bad_documents() -> None:
    node_schema = json.loads((SCHEMAS / "node.schema.json").read_text())
    result_schema = json.loads((SCHEMAS / "result.schema.json").read_text())
    good = {"nodes": [{"id": "t1", "type": "task", "dependsOn": [], "verify": [PASSES],
                       "inputs": [{"nodeId": "p", "key": "out.summary", "as": "plan"}],
                       "retryPolicy": {"maxAttempts": 2}}]}
    jsonschema.validate(good, node_schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"nodes": [{"id": "t1", "type": "chore"}]}, node_schema)
    jsonschema.validate({"status": "success", "summary": "ok",
                         "next": {"addNodes": good["nodes"]}}, result_schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"status": "success", "summary": "ok", "extra": 1}, result_schema)
