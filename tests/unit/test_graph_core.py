"""Schema, adding nodes, reading them back, answer and reset (library level, real SQLite)."""

from __future__ import annotations

import json
import re

import pytest

from clavain import clock
from clavain.errors import ClavainError
from clavain.store import queries
from clavain.store.graph_db import dialect
from clavain.workgraph import edits, nodes


def _counts(conn) -> tuple[int, int, int]:
    return tuple(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                 for t in ("nodes", "deps", "events"))


def test_db_init_creates_graph_tables_triggers_and_ready_index(conn) -> None:
    if dialect(conn) == "postgresql":
        names = {r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
            "UNION SELECT trigger_name FROM information_schema.triggers "
            "WHERE trigger_schema = current_schema() "
            "UNION SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()")}
        assert {"graphs", "nodes", "deps", "kv_latest", "kv_history", "events",
                "clavain_schema", "nodes_ready", "nodes_notify_ready"} <= names
        assert {"deps_count_insert", "deps_count_delete", "deps_count_status",
                "nodes_delete_edges"} <= names
        return
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    assert {"graphs", "nodes", "deps", "kv_latest", "kv_history", "events", "meta"} <= names
    assert {"deps_count_insert", "deps_count_delete", "deps_count_status",
            "nodes_delete_edges"} <= names
    ready = queries.text("claims.first_ready_ownership")
    plan = " ".join(r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + ready,
                                               {"graph": "default", "now": clock.now_iso()}))
    assert "nodes_ready" in plan and "TEMP B-TREE" not in plan


def test_add_and_get_node_round_trips_every_field(g) -> None:
    edits.add_nodes(g, [{"id": "p", "type": "plan"}])
    edits.add_nodes(g, [{
        "id": "t1", "type": "task", "title": "Do it", "parent": "p", "dependsOn": ["p"],
        "runner": "claude", "inputs": [{"nodeId": "p", "key": "out.summary", "as": "plan"}],
        "ownership": ["src/**"], "acceptance": ["works"], "verify": ["pytest -q"],
        "retryPolicy": {"maxAttempts": 5},
    }])
    node = nodes.get_node(g, "t1")
    assert node["parent_id"] == "p" and node["depends_on"] == ["p"]
    assert node["inputs"] == [{"node_id": "p", "key": "out.summary", "as": "plan"}]
    assert node["verify"] == ["pytest -q"] and node["ownership"] == ["src/**"]
    assert node["retry_policy"] == {"max_attempts": 5}
    assert node["status"] == "open" and node["unmet_deps"] == 1 and node["attempts"] == 0
    assert node["created_at"].endswith("Z") and node["lock_run_id"] is None
    assert nodes.get_node(g, "missing") is None


def test_defaults_come_from_config(g, state) -> None:
    state.root.mkdir(parents=True, exist_ok=True)
    state.config.write_text(json.dumps({"defaults": {"maxAttempts": 7, "verifyRunner": "vr"}}))
    edits.add_nodes(g, [{"id": "v", "type": "verify"}, {"id": "t", "type": "task"}])
    assert nodes.get_node(g, "t")["retry_policy"] == {"max_attempts": 7}
    assert nodes.get_node(g, "v")["runner"] == "vr"
    assert nodes.get_node(g, "t")["runner"] is None


def test_batch_may_reference_later_nodes_as_parent_and_dep(g) -> None:
    edits.add_nodes(g, [
        {"id": "b", "type": "task", "parent": "a", "dependsOn": ["a"]},
        {"id": "a", "type": "epic"},
    ])
    assert nodes.get_node(g, "b")["parent_id"] == "a"


@pytest.mark.parametrize(("specs", "message"), [
    ([{"id": "a", "type": "task"}, {"id": "a", "type": "task"}], "duplicate node id 'a'"),
    ([{"id": "x", "type": "task", "dependsOn": ["ghost"]}], "depends on unknown node 'ghost'"),
    ([{"id": "x", "type": "task", "parent": "ghost"}], "unknown parent 'ghost'"),
    ([{"id": "a", "type": "task", "dependsOn": ["b"]},
      {"id": "b", "type": "task", "dependsOn": ["a"]}], "dependency cycle: a -> b -> a"),
    ([{"id": "a", "type": "task", "dependsOn": ["a"]}], "dependency cycle: a -> a"),
    ([{"id": "a", "type": "nonsense"}], "node 'a': type:"),
    ([{"id": "a b", "type": "task"}], "node 'a b': id:"),
    ([{"id": "a", "type": "task", "colour": "red"}], "node 'a': colour: Extra inputs"),
    ([{"type": "task"}], "nodes[1]: id: Field required"),
    (["not an object"], "nodes[1]: node: Input should be a valid dictionary"),
    ([{"id": "i1", "type": "integrate"}, {"id": "i2", "type": "integrate"}],
     "exactly one integrate"),
])
def test_bad_batches_name_the_node_and_write_nothing(g, conn, specs, message) -> None:
    edits.add_nodes(g, [{"id": "seed", "type": "plan"}])
    before = _counts(conn)
    with pytest.raises(ClavainError, match=re.escape(message)):
        edits.add_nodes(g, [{"id": "ok", "type": "task"}, *specs])
    assert _counts(conn) == before


def test_existing_id_is_rejected(g) -> None:
    edits.add_nodes(g, [{"id": "a", "type": "task"}])
    with pytest.raises(ClavainError, match="node 'a' already exists"):
        edits.add_nodes(g, [{"id": "a", "type": "task"}])


def test_second_integrate_is_refused_across_batches(g) -> None:
    edits.add_nodes(g, [{"id": "integrate", "type": "integrate"}])
    with pytest.raises(ClavainError, match="exactly one integrate"):
        edits.add_nodes(g, [{"id": "other", "type": "integrate"}])


def test_import_requires_nodes_object(g) -> None:
    with pytest.raises(ClavainError, match='"nodes"'):
        edits.import_nodes(g, [{"id": "a", "type": "task"}])
    with pytest.raises(ClavainError, match="unexpected top-level key 'extra'"):
        edits.import_nodes(g, {"nodes": [], "extra": 1})
    assert edits.import_nodes(g, {"nodes": [{"id": "a", "type": "task"}]}) == ["a"]


def test_unmet_deps_follow_status_changes(g, conn) -> None:
    edits.add_nodes(g, [{"id": "a", "type": "task"}, {"id": "b", "type": "task"},
                                  {"id": "c", "type": "task", "dependsOn": ["a", "b"]}])
    unmet = lambda: nodes.get_node(g, "c")["unmet_deps"]  # noqa: E731
    assert unmet() == 2
    conn.execute("UPDATE nodes SET status = 'done' WHERE id = 'a'")
    assert unmet() == 1
    conn.execute("UPDATE nodes SET status = 'failed' WHERE id = 'a'")
    assert unmet() == 2
    conn.execute("DELETE FROM deps WHERE node_id = 'c' AND depends_on_id = 'b'")
    assert unmet() == 1


def test_list_nodes_filters_by_status_in_selection_order(g, conn) -> None:
    edits.add_nodes(g, [{"id": "z-task", "type": "task"},
                                  {"id": "a-final", "type": "final_verify"},
                                  {"id": "m-verify", "type": "verify"}])
    assert [n["id"] for n in nodes.list_nodes(g)] == ["m-verify", "z-task", "a-final"]
    conn.execute("UPDATE nodes SET status = 'done' WHERE id = 'z-task'")
    assert [n["id"] for n in nodes.list_nodes(g, "done")] == ["z-task"]


def test_answer_reopens_a_checkpointed_node_with_the_answer(g, conn) -> None:
    edits.add_nodes(g, [{"id": "a", "type": "task"}])
    with pytest.raises(ClavainError, match="not needs_human"):
        edits.answer(g, "a", "yes")
    conn.execute("UPDATE nodes SET status = 'needs_human', "
                 "human_question_json = '{\"question\": \"Which DB?\"}' WHERE id = 'a'")
    node = edits.answer(g, "a", "Postgres")
    assert node["status"] == "open"
    assert node["human_question"]["question"] == "Which DB?"
    assert node["human_question"]["answer"] == "Postgres" and node["human_question"]["answered_at"]
    last = conn.execute("SELECT from_status, to_status, note FROM events ORDER BY id DESC "
                        "LIMIT 1").fetchone()
    assert tuple(last) == ("needs_human", "open", "answered")
    with pytest.raises(ClavainError, match="unknown node 'nope'"):
        edits.answer(g, "nope", "x")
    with pytest.raises(ClavainError, match="empty"):
        edits.answer(g, "a", "  ")


def test_reset_clears_attempts_backoff_and_lock(g, conn) -> None:
    edits.add_nodes(g, [{"id": "a", "type": "task"}, {"id": "b", "type": "task",
                                                               "dependsOn": ["a"]}])
    conn.execute("UPDATE nodes SET status = 'done', attempts = 2, completed_at = 'x', "
                 "blocked_until = '2999-01-01T00:00:00.000Z' WHERE id = 'a'")
    assert nodes.get_node(g, "b")["unmet_deps"] == 0
    node = edits.reset(g, "a")
    assert (node["status"], node["attempts"], node["blocked_until"], node["completed_at"]) == (
        "open", 0, None, None)
    assert nodes.get_node(g, "b")["unmet_deps"] == 1
    with pytest.raises(ClavainError, match="unknown node"):
        edits.reset(g, "ghost")


def test_find_cycle_reports_a_closed_path() -> None:
    assert nodes.find_cycle({"a": ["b"], "b": ["c"], "c": []}) is None
    cycle = nodes.find_cycle({"a": ["b"], "b": ["c"], "c": ["b"]})
    assert cycle == ["b", "c", "b"]


@pytest.mark.parametrize(("key", "meant"), [("deps", "dependsOn"), ("verfy", "verify"),
                                            ("owns", "ownership")])
def test_an_unknown_key_names_the_field_meant(key: str, meant: str) -> None:
    from clavain.workgraph.nodes import validate_specs

    with pytest.raises(ClavainError, match=f"did you mean '{meant}'"):
        validate_specs([{"id": "a", "type": "task", key: ["x"]}])
