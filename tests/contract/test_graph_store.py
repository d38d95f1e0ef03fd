"""The store contract (`store.contract`), the same assertions on both backends: the project's
SQLite file and the session's PostgreSQL test server (the `backend` fixture). Each operation
the workgraph asks of a store is tried once for what it promises and once for what it refuses."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from clavain.errors import ClavainError
from clavain.store.db import transaction
from clavain.store.graph_db import store_now
from clavain.workgraph import claims, edits, export, kv, results
from clavain.workgraph.graphs import DEFAULT_GRAPH, Graph
from clavain.workgraph.nodes import FenceError, get_node, list_nodes
from tests.conftest import open_project_graph

pytestmark = pytest.mark.usefixtures("backend")


@pytest.fixture
def g(project: Path):
    from clavain import locate
    from clavain.paths import StatePaths

    (project / ".clavain").mkdir()
    conn = open_project_graph(project)
    graph = Graph(conn, DEFAULT_GRAPH, StatePaths(project / ".clavain",
                                                  store_url=locate.store_url()))
    edits.add_nodes(graph, [{"id": "a", "type": "task"}, {"id": "b", "type": "task",
                                                         "dependsOn": ["a"]},
                            {"id": "c", "type": "task"}])
    yield graph
    conn.close()


def test_a_transaction_commits_whole_or_leaves_nothing(g: Graph) -> None:
    with pytest.raises(RuntimeError), transaction(g.conn):
        claims.release(g, "a", "nobody", reason=claims.Reason.GIVEN_BACK, why="x",
                       at="2026-01-01T00:00:00.000Z")
        raise RuntimeError("cut")
    assert not g.conn.in_transaction
    assert [n["id"] for n in list_nodes(g)] == ["a", "b", "c"]


def test_the_clock_is_utc_and_near_this_machines(g: Graph) -> None:
    now = store_now(g.conn)
    assert now.tzinfo is not None and now.utcoffset() == timedelta(0)
    assert abs(now - datetime.now(timezone.utc)) < timedelta(seconds=30)


def test_get_a_node_gives_one_shape_on_both_backends(g: Graph) -> None:
    node = get_node(g, "b")
    assert node is not None and node["depends_on"] == ["a"] and node["unmet_deps"] == 1
    assert list(node)[:5] == ["graph_id", "id", "title", "type", "status"]
    assert get_node(g, "nowhere") is None


def test_claim_next_takes_each_ready_node_once_and_never_one_waiting(g: Graph) -> None:
    first = claims.claim_next(g, run_id="r1")
    second = claims.claim_next(g, run_id="r2")
    assert {first.node_id, second.node_id} == {"a", "c"}
    assert claims.claim_next(g, run_id="r3") is None  # b waits on a
    assert first.fence is not None and first.run_id == "r1"


def test_claim_named_says_why_not(g: Graph) -> None:
    assert claims.claim_named(g, "a", run_id="r1")["id"] == "a"
    with pytest.raises(ClavainError, match="run 'r1' holds it"):
        claims.claim_named(g, "a", run_id="r2")
    with pytest.raises(ClavainError, match="dependencies are not done"):
        claims.claim_named(g, "b", run_id="r2")


def test_renew_keeps_a_claim_and_refuses_an_old_fence_or_another_run(g: Graph) -> None:
    claim = claims.claim_next(g, run_id="r1")
    renewed = claims.renew(g, claim.node_id, run_id="r1", fence=claim.fence)
    assert renewed["lock_run_id"] == "r1"
    with pytest.raises(FenceError):
        claims.renew(g, claim.node_id, run_id="r1", fence=claim.fence - 1)
    with pytest.raises(ClavainError, match="not held by run 'r2'"):
        claims.renew(g, claim.node_id, run_id="r2")


def test_release_gives_back_unspent_and_a_crash_counts(g: Graph) -> None:
    claim = claims.claim_named(g, "a", run_id="r1")
    assert claims.give_back(g, claims.Claim.of(claim, "r1"), why="stopped")
    node = get_node(g, "a")
    assert node["status"] == "open" and node["lock_run_id"] is None
    assert node["attempts"] == 0 and node["crashes"] == 0
    assert not claims.give_back(g, claims.Claim.of(claim, "r1"), why="again")  # a no-op
    claims.claim_named(g, "a", run_id="r2")
    assert claims.give_back_run(g.state, g.conn, "r2", g.id, why="died", crashed=True) == ["a"]
    assert get_node(g, "a")["crashes"] == 1


def test_finish_applies_under_the_fence_once(g: Graph) -> None:
    claim = claims.claim_named(g, "a", run_id="r1")
    fence = claims.Claim.of(claim, "r1").fence
    with pytest.raises(FenceError):
        results.apply_result(g, "a", {"status": "success"}, run_id="r1", fence=fence - 1)
    results.apply_result(g, "a", {"status": "success"}, run_id="r1", fence=fence)
    assert get_node(g, "a")["status"] == "done"
    assert get_node(g, "b")["unmet_deps"] == 0  # the dependent is ready now
    with pytest.raises(ClavainError):
        results.apply_result(g, "a", {"status": "success"}, run_id="r1", fence=fence)


def test_kv_keeps_the_latest_value_and_its_history(g: Graph) -> None:
    kv.put(g, "a", "plan", "one")
    kv.put(g, "a", "plan", "two")
    assert kv.get(g, "a", "plan")["value"] == "two"
    assert [row["value"] for row in kv.history(g, "a", "plan")] == ["two", "one"]  # newest first
    assert kv.get(g, "a", "missing") is None


def test_the_snapshot_holds_every_node_in_the_shape_get_node_gives(g: Graph) -> None:
    snap = json.loads(export.snapshot_text(g.conn, g.id))
    nodes = {node["id"]: node for node in snap["nodes"]}
    assert set(nodes) == {"a", "b", "c"} and nodes["b"] == get_node(g, "b")
