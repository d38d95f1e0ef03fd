"""Several workgraphs in one database: what one graph holds (nodes, edges, values, claims) is
never seen, moved or finished through another, even under the same node ids; a closed graph
cancels its unfinished work and takes nothing new; graph ids are checked. Hypothesis drives
random add/claim/apply steps on two graphs against a dict model of each."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clavain.clock import now_iso
from clavain.errors import ClavainError
from clavain.paths import StatePaths
from clavain.store import db
from clavain.workgraph import (
    claim_pick,
    claims,
    edits,
    export,
    graphs,
    kv,
    nodes,
    results,
    schedule,
)
from clavain.workgraph.graphs import DEFAULT_GRAPH, Graph
from tests.sql import run_sql


def _sprint(conn: sqlite3.Connection, state: StatePaths, graph_id: str) -> Graph:
    """A sprint's graph, made as a sprint's start makes it."""
    with db.transaction(conn):
        graphs.ensure(conn, graph_id, at=now_iso(), kind="sprint", title=f"sprint {graph_id}")
    return Graph(conn, graph_id, state)


@pytest.fixture
def other(conn: sqlite3.Connection, state: StatePaths) -> Graph:
    return _sprint(conn, state, "sprint-b")


def _statuses(g: Graph) -> dict[str, str]:
    return {n["id"]: n["status"] for n in nodes.list_nodes(g)}


def _rows(conn: sqlite3.Connection, graph_id: str) -> list[tuple[Any, ...]]:
    """Every row of one graph in every table that names a graph, for before/after checks."""
    found = []
    for table, order in (("nodes", "id"), ("deps", "node_id, depends_on_id"),
                         ("kv_latest", "node_id, key"), ("kv_history", "id"), ("events", "id")):
        found += [(table, *row) for row in run_sql(conn,
            f"SELECT * FROM {table} WHERE graph_id = ? ORDER BY {order}", (graph_id,))]
    return found


# ---------------------------------------------------------------- the same ids, two graphs

def test_the_same_ids_in_two_graphs_are_different_nodes(g, other) -> None:
    edits.add_nodes(g, [{"id": "t1", "type": "task", "title": "default's t1"}])
    edits.add_nodes(other, [{"id": "t1", "type": "task", "title": "sprint's t1"},
                            {"id": "t2", "type": "task", "dependsOn": ["t1"]}])
    assert nodes.get_node(g, "t1")["title"] == "default's t1"
    assert nodes.get_node(other, "t1")["title"] == "sprint's t1"
    assert nodes.get_node(g, "t2") is None
    assert [n["id"] for n in nodes.list_nodes(g)] == ["t1"]
    assert [n["id"] for n in nodes.list_nodes(other)] == ["t1", "t2"]
    assert {n["graph_id"] for n in nodes.list_nodes(other)} == {"sprint-b"}
    # Every graph's nodes, graph by graph (the default graph was made first).
    assert [(n["graph_id"], n["id"]) for n in nodes.list_all_nodes(g.conn)] == [
        ("default", "t1"), ("sprint-b", "t1"), ("sprint-b", "t2")]
    # An id taken in one graph is free in another, and taken ids are per graph.
    with pytest.raises(ClavainError, match="'t1' already exists in graph 'sprint-b'"):
        edits.add_nodes(other, [{"id": "t1", "type": "task"}])
    with pytest.raises(ClavainError, match="unknown node 'nope' in graph 'default'"):
        edits.reset(g, "nope")


def test_dependencies_never_cross_graphs(g, conn, other) -> None:
    edits.add_nodes(other, [{"id": "a", "type": "task"}, {"id": "b", "type": "task"}])
    # `b` exists only in the other graph: the default graph cannot depend on it or be its child.
    with pytest.raises(ClavainError, match="depends on unknown node 'b'"):
        edits.add_nodes(g, [{"id": "x", "type": "task", "dependsOn": ["b"]}])
    with pytest.raises(ClavainError, match="unknown parent 'b'"):
        edits.add_nodes(g, [{"id": "x", "type": "task", "parent": "b"}])
    with pytest.raises(ClavainError, match="unknown node 'b'"):
        edits.add_nodes(g, [{"id": "x", "type": "task"}], parent_id="b")
    edits.add_nodes(g, [{"id": "a", "type": "task"},
                        {"id": "c", "type": "verify", "dependsOn": ["a"]}])
    edits.add_nodes(other, [{"id": "c", "type": "verify", "dependsOn": ["a", "b"]}])
    assert nodes.get_node(g, "c")["depends_on"] == ["a"]
    assert nodes.get_node(other, "c")["depends_on"] == ["a", "b"]
    # Finishing `a` in one graph satisfies only that graph's `c` (the triggers are scoped).
    run_sql(conn, "UPDATE nodes SET status = 'done' WHERE graph_id = 'default' AND id = 'a'")
    assert nodes.get_node(g, "c")["unmet_deps"] == 0
    assert nodes.get_node(other, "c")["unmet_deps"] == 2
    assert claim_pick.select_next(g) == "c"
    assert claim_pick.select_next(other) == "a"
    # Deleting a node takes only its own graph's edges with it.
    run_sql(conn, "DELETE FROM nodes WHERE graph_id = 'default' AND id = 'c'")
    assert nodes.get_node(other, "c")["depends_on"] == ["a", "b"]
    assert run_sql(conn, "SELECT count(*) FROM deps WHERE graph_id = 'sprint-b'").fetchone()[0] == 2
    assert results.unmet_dependencies(other, "c") == ["a", "b"]


def test_next_node_claims_only_from_its_own_graph(g, other) -> None:
    edits.add_nodes(g, [{"id": "t1", "type": "task"}])
    edits.add_nodes(other, [{"id": "t1", "type": "task"}, {"id": "t2", "type": "task"}])
    got = schedule.next_node(g, claim=True, run_id="run-a")
    assert (got["node"]["id"], got["graph_id"], got["claimed"]) == ("t1", "default", True)
    assert nodes.get_node(other, "t1")["status"] == "open"
    assert nodes.get_node(other, "t1")["lock_run_id"] is None
    # The default graph has nothing left to run, though the other graph still has work.
    idle = schedule.next_node(g, claim=True, run_id="run-a")
    assert idle["node"] is None and idle["reason"] == "running" and idle["running"] == ["t1"]
    assert schedule.next_node(other, claim=True, run_id="run-b")["node"]["id"] == "t1"
    assert schedule.next_node(other, claim=True, run_id="run-b")["node"]["id"] == "t2"
    # A heartbeat and a claim go to the node of the handle's graph only.
    claims.renew(other, "t1", run_id="run-b")
    with pytest.raises(ClavainError, match=r"not held by run 'run-b' \(run 'run-a' holds it\)"):
        claims.renew(g, "t1", run_id="run-b")
    assert claims.claim_node(g, "t2", run_id="run-a") is None
    empty = schedule.next_node(Graph(g.conn, "nothing-here", g.state))
    assert empty["node"] is None and empty["reason"] == "empty"


def test_a_result_finishes_the_node_of_its_own_graph_only(g, conn, other) -> None:
    edits.add_nodes(g, [{"id": "t1", "type": "task"}, {"id": "t2", "type": "task",
                                                       "dependsOn": ["t1"]}])
    edits.add_nodes(other, [{"id": "t1", "type": "task"}, {"id": "t2", "type": "task",
                                                           "dependsOn": ["t1"]}])
    before = _rows(conn, "default")
    claims.claim_node(other, "t1", run_id="run-b")
    outcome = results.apply_result(other, "t1", {
        "status": "success", "summary": "sprint work",
        "next": {"addNodes": [{"id": "t3", "type": "task"}]}}, run_id="run-b")
    assert outcome["to"] == "done" and outcome["added"] == ["t3"]
    # Added work is scaffolded (verify gates, integrate, final check) in its own graph only.
    assert _statuses(other) == {"t1": "done", "t2": "open", "t3": "open", "verify-t1": "open",
                                "verify-t2": "open", "verify-t3": "open", "integrate": "open",
                                "final-verify": "open"}
    assert edits.is_scaffolded(other) and not edits.is_scaffolded(g)
    assert nodes.get_node(other, "t2")["unmet_deps"] == 0
    assert nodes.get_node(other, "t3")["parent_id"] == "t1"
    assert _rows(conn, "default") == before
    assert nodes.get_node(g, "t2")["unmet_deps"] == 1
    # The default graph's t1 was never claimed by run-b: its own claim is still needed.
    assert claims.claim_node(g, "t1", run_id="run-a")["graph_id"] == "default"
    with pytest.raises(ClavainError, match="claimed by run 'run-a', not 'run-b'"):
        results.apply_result(g, "t1", {"status": "success"}, run_id="run-b")
    assert nodes.get_node(g, "t1")["status"] == "in_progress"


def test_values_are_kept_per_graph(g, other) -> None:
    edits.add_nodes(g, [{"id": "t1", "type": "task"}])
    edits.add_nodes(other, [{"id": "t1", "type": "task"}, {"id": "only-b", "type": "task"}])
    kv.put(g, "t1", "out.x", "from default")
    kv.put(other, "t1", "out.x", "from sprint")
    kv.put(other, "t1", "out.x", "from sprint, again")
    kv.put(other, kv.RUN_NAMESPACE, "ctx.shared", "sprint's shared value")
    assert kv.get(g, "t1", "out.x")["value"] == "from default"
    assert kv.get(other, "t1", "out.x")["value"] == "from sprint, again"
    assert kv.get(g, kv.RUN_NAMESPACE, "ctx.shared") is None
    assert [(e["node_id"], e["key"], e["value"]) for e in kv.ls(g)] == [
        ("t1", "out.x", "from default")]
    assert [e["value"] for e in kv.history(g, "t1", "out.x")] == ["from default"]
    assert [e["value"] for e in kv.history(other, "t1", "out.x")] == [
        "from sprint, again", "from sprint"]
    # A node of another graph is no owner here.
    with pytest.raises(ClavainError, match="unknown node 'only-b' in graph 'default'"):
        kv.put(g, "only-b", "out.x", "leak")
    assert kv.ls(g, "only-b") == []


def test_the_snapshot_holds_active_graphs_or_the_one_named(g, conn, state, other) -> None:
    edits.add_nodes(g, [{"id": "t1", "type": "task"}])
    edits.add_nodes(other, [{"id": "t1", "type": "task"}, {"id": "t2", "type": "task"}])
    every = export.snapshot(conn)
    assert [x["id"] for x in every["graphs"]] == ["default", "sprint-b"]
    assert [(n["graph_id"], n["id"]) for n in every["nodes"]] == [
        ("default", "t1"), ("sprint-b", "t1"), ("sprint-b", "t2")]
    one = export.snapshot(conn, "sprint-b")
    assert [x["id"] for x in one["graphs"]] == ["sprint-b"]
    assert {n["graph_id"] for n in one["nodes"]} == {"sprint-b"}
    with db.transaction(conn):
        graphs.close(other, "shipped", at=now_iso(), note="sprint shipped")
    assert [x["id"] for x in export.snapshot(conn)["graphs"]] == ["default"]
    assert {n["graph_id"] for n in export.snapshot(conn)["nodes"]} == {"default"}
    # A closed graph is still there when named (its sprint's archive).
    archived = export.snapshot(conn, "sprint-b")
    assert archived["graphs"][0]["status"] == "shipped" and len(archived["nodes"]) == 2


# ---------------------------------------------------------------- closing a graph

def _every_status(g: Graph) -> None:
    """One node in each status, `running` claimed by a live-looking run."""
    edits.add_nodes(g, [{"id": i, "type": "task"} for i in (
        "done", "failed", "human", "open", "running", "waiting")])
    run_sql(g.conn, "UPDATE nodes SET status = 'done' WHERE graph_id = ? AND id = 'done'", (g.id,))
    run_sql(g.conn, "UPDATE nodes SET status = 'failed' WHERE graph_id = ? AND id = 'failed'",
                   (g.id,))
    run_sql(g.conn, "UPDATE nodes SET status = 'needs_human', human_question_json = "
                   "'{\"question\": \"?\"}' WHERE graph_id = ? AND id = 'human'", (g.id,))
    run_sql(g.conn, "INSERT INTO deps (graph_id, node_id, depends_on_id) "
                   "VALUES (?, 'waiting', 'failed')", (g.id,))
    assert claims.claim_node(g, "running", run_id="run-1", pid=os.getpid()) is not None


def test_abandoning_a_graph_cancels_its_unfinished_nodes_only(conn, state) -> None:
    a, b = _sprint(conn, state, "sprint-a"), _sprint(conn, state, "sprint-b")
    _every_status(a)
    _every_status(b)
    before = _rows(conn, "sprint-b")
    with db.transaction(conn):
        cancelled = graphs.close(a, "abandoned", at=now_iso(), note="sprint abandoned")
    assert cancelled == ["human", "open", "running", "waiting"]
    assert _statuses(a) == {"done": "done", "failed": "failed", "human": "cancelled",
                            "open": "cancelled", "running": "cancelled", "waiting": "cancelled"}
    running = nodes.get_node(a, "running")
    assert running["lock_run_id"] is None and running["lock_pid"] is None
    assert running["lock_host"] is None and running["lock_started_at"] is None
    events = run_sql(conn, "SELECT node_id, from_status, to_status, note FROM events "
                          "WHERE graph_id = 'sprint-a' AND to_status = 'cancelled' "
                          "ORDER BY node_id").fetchall()
    assert [tuple(e) for e in events] == [
        ("human", "needs_human", "cancelled", "sprint abandoned"),
        ("open", "open", "cancelled", "sprint abandoned"),
        ("running", "in_progress", "cancelled", "sprint abandoned"),
        ("waiting", "open", "cancelled", "sprint abandoned")]
    closed = graphs.get(conn, "sprint-a")
    assert closed["status"] == "abandoned" and closed["closed_at"]
    # The other graph, with the same ids in the same states, is exactly as it was.
    assert _rows(conn, "sprint-b") == before
    assert graphs.get(conn, "sprint-b")["status"] == "active"
    counts = {x["id"]: (x["status"], x["nodes"], x["done"]) for x in graphs.list_graphs(conn)}
    assert counts == {"default": ("active", 0, 0), "sprint-a": ("abandoned", 6, 1),
                      "sprint-b": ("active", 6, 1)}
    # Nothing of the closed graph runs again: no claim, no result, no reset of what it cancelled.
    assert schedule.next_node(a, claim=True, run_id="late")["node"] is None
    with pytest.raises(ClavainError, match="cancelled with its sprint's graph"):
        results.apply_result(a, "running", {"status": "success"}, run_id="run-1")
    with pytest.raises(ClavainError, match="cancelled with its sprint's graph"):
        edits.reset(a, "open")
    with pytest.raises(ClavainError, match="not needs_human"):
        edits.answer(a, "human", "too late")
    # While the other graph's run still holds its node and may finish it.
    assert results.apply_result(b, "running", {"status": "success"}, run_id="run-1")["to"] == "done"


def test_a_closed_graph_takes_no_new_nodes(conn, state, g) -> None:
    a = _sprint(conn, state, "sprint-a")
    edits.add_nodes(a, [{"id": "t1", "type": "task"}])
    with db.transaction(conn):
        assert graphs.close(a, "shipped", at=now_iso(), note="shipped") == ["t1"]
    before = _rows(conn, "sprint-a")
    with pytest.raises(ClavainError, match="graph 'sprint-a' was shipped"):
        edits.add_nodes(a, [{"id": "t2", "type": "task"}])
    with pytest.raises(ClavainError, match="graph 'sprint-a' was shipped"):
        edits.import_nodes(a, {"nodes": [{"id": "t2", "type": "task"}]})
    with pytest.raises(ClavainError, match="was shipped"), db.transaction(conn):
        graphs.ensure(conn, "sprint-a", at=now_iso(), kind="sprint")
    assert _rows(conn, "sprint-a") == before
    assert graphs.get(conn, "sprint-a")["status"] == "shipped"
    # Other graphs still take work, and a graph named for the first time is made on first use.
    edits.add_nodes(g, [{"id": "t2", "type": "task"}])
    edits.add_nodes(Graph(conn, "run-7", state), [{"id": "t2", "type": "task"}])
    assert graphs.get(conn, "run-7")["kind"] == "run"
    assert graphs.get(conn, DEFAULT_GRAPH)["kind"] == "default"


def test_a_closed_graphs_finished_nodes_are_not_reopened(conn, state) -> None:
    """Not by hand (`graph reset`) and not by the deadlock auto-reset of `next_node`: a failed
    node of an abandoned sprint would otherwise be reopened and claimed again."""
    state.root.mkdir(parents=True, exist_ok=True)
    state.config.write_text('{"defaults": {"autoResetFailedMax": 2}}')
    a, b = _sprint(conn, state, "sprint-a"), _sprint(conn, state, "sprint-b")
    for handle in (a, b):
        edits.add_nodes(handle, [{"id": "bad", "type": "task"}, {"id": "ok", "type": "task"}])
        run_sql(conn, "UPDATE nodes SET status = 'failed' WHERE graph_id = ? AND id = 'bad'",
                     (handle.id,))
        run_sql(conn, "UPDATE nodes SET status = 'done' WHERE graph_id = ? AND id = 'ok'",
                     (handle.id,))
    with db.transaction(conn):
        assert graphs.close(a, "abandoned", at=now_iso(), note="abandoned") == []
    before = _rows(conn, "sprint-a")
    got = schedule.next_node(a, claim=True, run_id="late")
    assert got["node"] is None and got["reset"] == []
    for node_id in ("bad", "ok"):
        with pytest.raises(ClavainError, match="graph 'sprint-a' was abandoned"):
            edits.reset(a, node_id)
    assert _rows(conn, "sprint-a") == before
    # The active graph with the same nodes is still unblocked by the auto-reset and by hand.
    got = schedule.next_node(b, claim=True, run_id="run-b")
    assert got["reset"] == ["bad"] and got["node"]["id"] == "bad"
    assert edits.reset(b, "ok")["status"] == "open"


def test_close_takes_only_shipped_or_abandoned(other) -> None:
    with pytest.raises(ValueError, match="not 'done'"):
        graphs.close(other, "done", at=now_iso(), note="")
    assert graphs.get(other.conn, "sprint-b")["status"] == "active"


# ---------------------------------------------------------------- graph ids

@pytest.mark.parametrize("graph_id", [
    "default", "s", "sprint-2024.05_01", "run:abc-1", "A" * graphs.MAX_ID_CHARS])
def test_check_id_takes_good_ids(graph_id) -> None:
    assert graphs.check_id(graph_id) == graph_id


@pytest.mark.parametrize("graph_id", [
    "", "A" * (graphs.MAX_ID_CHARS + 1), "has space", "a/b", "../up", "tab\there", "new\nline",
    "ünïcode", "semi;colon", "quote'", None, 7, b"bytes", ["default"]])
def test_check_id_refuses_bad_ids(conn, state, graph_id) -> None:
    with pytest.raises(ClavainError, match="graph id"):
        graphs.check_id(graph_id)
    with pytest.raises(ClavainError, match="graph id"):
        Graph(conn, graph_id, state)


def test_a_graph_handle_is_immutable(g) -> None:
    with pytest.raises(AttributeError, match="immutable"):
        g.id = "other"
    assert g.id == DEFAULT_GRAPH and "default" in repr(g)


# ---------------------------------------------------------------- hypothesis

GRAPH_IDS = ("default", "sprint-b")
IDS = [f"n{i}" for i in range(5)]
STEP = st.one_of(
    st.tuples(st.just("add"), st.sampled_from(GRAPH_IDS), st.sampled_from(IDS),
              st.sets(st.sampled_from(IDS), max_size=2)),
    st.tuples(st.just("claim"), st.sampled_from(GRAPH_IDS)),
    st.tuples(st.just("apply"), st.sampled_from(GRAPH_IDS),
              st.sampled_from(("success", "fail", "checkpoint"))),
    # A result for a node the graph may not have (it may exist only in the other graph).
    st.tuples(st.just("apply_to"), st.sampled_from(GRAPH_IDS), st.sampled_from(IDS)),
)


class Model:
    """Each graph as a dict: id -> {status, deps, blocked, summary}. A failed attempt waits out
    its backoff (30 s), longer than any example runs, so it is never runnable again here."""

    def __init__(self) -> None:
        self.graphs: dict[str, dict[str, dict[str, Any]]] = {gid: {} for gid in GRAPH_IDS}

    def ready(self, gid: str) -> list[str]:
        nodes_ = self.graphs[gid]
        return sorted(i for i, n in nodes_.items()
                      if n["status"] == "open" and not n["blocked"]
                      and all(nodes_[d]["status"] == "done" for d in n["deps"]))

    def running(self, gid: str) -> list[str]:
        return sorted(i for i, n in self.graphs[gid].items() if n["status"] == "in_progress")


def _step(handles: dict[str, Graph], model: Model, step: tuple[Any, ...]) -> None:
    kind, gid, *args = step
    g, mine = handles[gid], model.graphs[gid]
    if kind == "add":
        node_id, wanted = args
        deps = sorted(d for d in wanted if d != node_id)
        if node_id in mine or any(d not in mine for d in deps):
            refusal = (f"'{node_id}' already exists in graph '{gid}'" if node_id in mine
                       else f"'{node_id}' depends on unknown node")
            with pytest.raises(ClavainError, match=refusal):
                edits.add_nodes(g, [{"id": node_id, "type": "task", "dependsOn": deps}])
            return
        edits.add_nodes(g, [{"id": node_id, "type": "task", "dependsOn": deps}])
        mine[node_id] = {"status": "open", "deps": deps, "blocked": False, "summary": None}
    elif kind == "claim":
        expected = model.ready(gid)
        got = claims.claim_next(g, run_id=f"run-{gid}")
        assert (got["id"] if got else None) == (expected[0] if expected else None)
        if got:
            assert got["graph_id"] == gid
            mine[got["id"]]["status"] = "in_progress"
    elif kind == "apply":
        running = model.running(gid)
        if not running:
            return
        node_id, (status,) = running[0], args
        summary = f"{gid}/{node_id}/{status}"
        outcome = results.apply_result(g, node_id, {"status": status, "summary": summary,
                                                    "question": "why?"
                                                    if status == "checkpoint" else None},
                                       run_id=f"run-{gid}")
        after = {"success": "done", "fail": "open", "checkpoint": "needs_human"}[status]
        assert outcome["to"] == after and outcome["added"] == []
        mine[node_id].update(status=after, blocked=status == "fail", summary=summary)
    else:
        (node_id,) = args
        if node_id not in mine:
            with pytest.raises(ClavainError, match=f"unknown node '{node_id}' in graph '{gid}'"):
                results.apply_result(g, node_id, {"status": "success", "summary": "leak"},
                                     run_id="intruder")


def _agrees(handles: dict[str, Graph], model: Model) -> None:
    for gid, g in handles.items():
        mine = model.graphs[gid]
        listed = nodes.list_nodes(g)
        assert {n["id"]: n["status"] for n in listed} == {i: n["status"] for i, n in mine.items()}
        for node in listed:
            assert node["graph_id"] == gid
            assert node["depends_on"] == mine[node["id"]]["deps"]
            unmet = [d for d in mine[node["id"]]["deps"] if mine[d]["status"] != "done"]
            assert node["unmet_deps"] == len(unmet)
        # Every value a graph holds was written by a result in that graph, for its own node.
        values = {e["node_id"]: e["value"] for e in kv.ls(g, prefix="out.summary")}
        assert values == {i: n["summary"] for i, n in mine.items() if n["summary"] is not None}
        assert claim_pick.select_next(g) == (model.ready(gid) or [None])[0]


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(STEP, min_size=1, max_size=40))
def test_two_graphs_never_leak_into_each_other(tmp_path: Path, steps) -> None:
    state = StatePaths(tmp_path / f"p{os.getpid()}-{id(steps)}")
    conn = db.connect(state.db)
    try:
        handles = {gid: Graph(conn, gid, state) for gid in GRAPH_IDS}
        model = Model()
        for step in steps:
            _step(handles, model, step)
            _agrees(handles, model)
        # Nothing is stored under a graph that is not one of the two.
        for table in ("nodes", "deps", "kv_latest", "kv_history", "events"):
            stray = run_sql(conn, f"SELECT DISTINCT graph_id FROM {table} WHERE graph_id NOT IN "
                                 "(?, ?)", GRAPH_IDS).fetchall()
            assert stray == []
    finally:
        conn.close()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{state.db}{suffix}").unlink(missing_ok=True)
