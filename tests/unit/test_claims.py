"""The claims module (`workgraph.claims`): each way a claim ends follows its one rule — given
back spends nothing, crashed and stale count a crash and fail the node at the crash limit,
none sets a backoff, a stale fence is refused — a run's claims are given back together, and
random claims, renewals and give-backs by several runs never lose a node or hold it twice."""

from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from clavain.clock import now_iso
from clavain.errors import ClavainError
from clavain.paths import StatePaths
from clavain.store import db
from clavain.store.graph_db import open_graph_db
from clavain.store.placeholders import to_psycopg
from clavain.workgraph import claims, nodes, results
from clavain.workgraph.graphs import DEFAULT_GRAPH, Graph

Reason = claims.Reason


def _add(g: Graph, ids: str | tuple[str, ...]) -> None:
    """Tasks as raw rows: through `edits.add_nodes` each would get its verify gate too."""
    from clavain import config

    with db.transaction(g.conn):
        nodes.insert_nodes(g, config.DEFAULTS, nodes.validate_specs(
            [{"id": node_id, "type": "task"} for node_id in ids]), at=now_iso())


def _limit(g: Graph, crashes: int) -> None:
    g.state.config.write_text(json.dumps({"defaults": {"maxCrashes": crashes}}))


def _release(g: Graph, node_id: str, run_id: str, reason: str, fence: int | None = None) -> bool:
    with db.transaction(g.conn):
        return claims.release(g, node_id, run_id, reason=reason, why="test", at=now_iso(),
                              fence=fence)


def _sql(conn, statement: str, params: tuple = ()):
    """A test's own statement, in SQLite's placeholders, on either backend."""
    if getattr(conn, "dialect", "sqlite") != "sqlite":
        statement = to_psycopg(statement)
    return conn.execute(statement, params)


def _last_note(g: Graph, node_id: str) -> str:
    row = _sql(g.conn, "SELECT note FROM events WHERE graph_id = ? AND node_id = ? "
                   "ORDER BY id DESC LIMIT 1", (g.id, node_id)).fetchone()
    return row[0]


def test_a_claim_is_a_value_that_reads_as_the_node_it_took(g: Graph) -> None:
    _add(g, "a")
    claim = claims.claim_next(g, run_id="r1", lease_seconds=60)
    assert (claim.graph_id, claim.node_id, claim.run_id) == (g.id, "a", "r1")
    assert claim.fence == claim["lock_generation"] == 1 and claim.lease_ms == 60_000
    assert claim["status"] == "in_progress" and claim.get("missing", "x") == "x"
    assert claims.Claim.of(nodes.get_node(g, "a")) == claim
    with pytest.raises(dataclasses.FrozenInstanceError):
        claim.fence = 2  # type: ignore[misc]


def test_the_node_a_claim_returns_is_the_node_as_stored(g: Graph) -> None:
    # On a server the common claim builds the node's object in its own statement: it must be
    # the object every other read gives (`node_objects`), key for key.
    _add(g, "ab")
    _sql(g.conn, "INSERT INTO deps (graph_id, node_id, depends_on_id, kind) "
                   "VALUES (?, 'b', 'a', 'done')", (g.id,))
    claim = claims.claim_next(g, run_id="r1")
    assert json.dumps(claim.node) == json.dumps(nodes.get_node(g, "a"))
    results.apply_result(g, "a", {"status": "success", "summary": "s"}, run_id="r1")
    claim = claims.claim_next(g, run_id="r1")
    assert claim.node_id == "b" and claim.node["depends_on"] == ["a"]
    assert json.dumps(claim.node) == json.dumps(nodes.get_node(g, "b"))


def test_given_back_spends_nothing_sets_no_backoff_and_refuses_a_stale_fence(g: Graph) -> None:
    _add(g, "a")
    first = claims.claim_next(g, run_id="r1")
    assert not _release(g, "a", "r1", Reason.GIVEN_BACK, fence=first.fence + 1)
    assert not _release(g, "a", "other-run", Reason.GIVEN_BACK)
    assert nodes.get_node(g, "a")["lock_run_id"] == "r1"
    assert _release(g, "a", "r1", Reason.GIVEN_BACK, fence=first.fence)
    node = nodes.get_node(g, "a")
    assert (node["status"], node["lock_run_id"], node["attempts"], node["crashes"],
            node["blocked_until"]) == ("open", None, 0, 0, None)
    assert node["lock_generation"] == first.fence  # the fence is never cleared
    assert _last_note(g, "a") == "test; claim released, no attempt spent"
    again = claims.claim_next(g, run_id="r2")  # at once: no backoff
    assert again.node_id == "a" and again.fence == first.fence + 1
    assert not claims.give_back(g, first, why="late")  # the old claim is not the node's


@pytest.mark.parametrize("reason", [Reason.CRASHED, Reason.STALE])
def test_a_crash_counts_and_fails_the_node_at_the_limit_without_backoff(g: Graph,
                                                                         reason: str) -> None:
    _limit(g, 2)
    _add(g, "a")
    claim = claims.claim_next(g, run_id="r1")
    assert not _release(g, "a", "r1", reason, fence=claim.fence + 1)  # a stale fence
    assert _release(g, "a", "r1", reason, fence=claim.fence)
    node = nodes.get_node(g, "a")
    assert (node["status"], node["crashes"], node["attempts"], node["blocked_until"]) == (
        "open", 1, 0, None)
    assert _last_note(g, "a") == "test; claim released, a crash counted"
    claims.claim_next(g, run_id="r2")
    assert _release(g, "a", "r2", reason)  # the second crash reaches maxCrashes = 2
    node = nodes.get_node(g, "a")
    assert (node["status"], node["crashes"], node["lock_run_id"], node["blocked_until"]) == (
        "failed", 2, None, None)
    assert "its holder crashed 2 times (defaults.maxCrashes)" in _last_note(g, "a")


def test_a_finished_claim_is_not_released_but_recorded(g: Graph) -> None:
    _add(g, "a")
    claims.claim_next(g, run_id="r1")
    with pytest.raises(ValueError, match="a result finishes it"):
        _release(g, "a", "r1", Reason.FINISHED)


def test_give_back_takes_the_callers_wait(g: Graph) -> None:
    _add(g, "a")
    claim = claims.claim_next(g, run_id="r1")
    waited = []

    def wait(action):
        waited.append(True)
        return action()

    assert claims.give_back(g, claim, why="stopped", wait=wait)
    assert waited == [True] and nodes.get_node(g, "a")["status"] == "open"


def test_give_back_run_gives_back_the_runs_claims_but_those_kept(g: Graph) -> None:
    _add(g, "abcd")
    for run in ("r1", "r1", "r1", "r2"):
        claims.claim_next(g, run_id=run)
    assert claims.held(g, "r1") == ["a", "b", "c"] and claims.held(g, "r1", "d") == []
    assert claims.give_back_run(g.state, g.conn, "r1", g.id, why="ended", only="a") == ["a"]
    assert claims.give_back_run(g.state, g.conn, "r1", g.id, why="ended", keep={"c"}) == ["b"]
    assert claims.held(g, "r1") == ["c"] and claims.held(g, "r2") == ["d"]
    assert nodes.get_node(g, "b")["crashes"] == 0
    assert claims.give_back_run(g.state, g.conn, "r1", g.id, why="died", crashed=True) == ["c"]
    assert nodes.get_node(g, "c")["crashes"] == 1 and nodes.get_node(g, "c")["attempts"] == 0
    assert claims.give_back_run(g.state, g.conn, "r1", g.id, why="again") == []


def test_renew_refuses_a_stale_fence_and_another_runs_claim(g: Graph) -> None:
    _add(g, "a")
    claim = claims.claim_next(g, run_id="r1")
    assert claims.renew(g, "a", run_id="r1", fence=claim.fence)["lock_run_id"] == "r1"
    with pytest.raises(nodes.FenceError):
        claims.renew(g, "a", run_id="r1", fence=claim.fence + 1)
    with pytest.raises(ClavainError, match="run 'r1' holds it"):
        claims.renew(g, "a", run_id="r2")


def test_this_host_is_the_host_name_on_a_store_nobody_shares(g: Graph) -> None:
    import socket

    assert claims.this_host() == socket.gethostname()
    if not getattr(g.conn, "shared", False):
        assert claims.this_host(g.conn) == socket.gethostname()
    else:
        assert claims.this_host(g.conn).startswith(socket.gethostname())


# ---------------------------------------------------------------- property: a naive model

RUNS = ("r0", "r1", "r2")
NODES = ("a", "b", "c", "d")
MAX_CRASHES = 3


class ClaimsAgainstAModel(RuleBasedStateMachine):
    """Claims, renewals, give-backs (one, or a run's) and results by three runs, checked against
    a dict: each node open, held by exactly one run under one fence, or finished."""

    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="claims-model-"))
        state = StatePaths(self.root / ".clavain")
        state.root.mkdir(parents=True)
        # No escalation: a node that crashed too often fails and stays failed, the graph as is.
        state.config.write_text(json.dumps({"defaults": {
            "maxCrashes": MAX_CRASHES, "maxEscalations": 0, "snapshotMaxLagSeconds": 0}}))
        self.g = Graph(open_graph_db(state), DEFAULT_GRAPH, state)
        _add(self.g, NODES)
        self.held: dict[str, claims.Claim] = {}  # node → its current claim
        self.finished: set[str] = set()
        self.crashes = dict.fromkeys(NODES, 0)
        self.old: list[claims.Claim] = []  # claims that ended: their fence is stale

    def teardown(self) -> None:
        self.g.conn.close()
        shutil.rmtree(self.root, ignore_errors=True)

    def _open(self) -> list[str]:
        return [n for n in NODES if n not in self.held and n not in self.finished]

    def _took(self, claim: claims.Claim | None, run: str) -> None:
        if claim is None:
            assert not self._open(), "a node was open, yet nothing was claimed"
            return
        assert claim.node_id in self._open() and claim.run_id == run
        self.held[claim.node_id] = claim

    def _ended(self, node_id: str) -> None:
        self.old.append(self.held.pop(node_id))

    @rule(run=st.sampled_from(RUNS))
    def claim_next(self, run: str) -> None:
        self._took(claims.claim_next(self.g, run_id=run), run)

    @rule(run=st.sampled_from(RUNS), node_id=st.sampled_from(NODES))
    def claim_node(self, run: str, node_id: str) -> None:
        claim = claims.claim_node(self.g, node_id, run_id=run)
        assert (claim is not None) == (node_id in self._open())
        if claim is not None:
            self._took(claim, run)

    @precondition(lambda self: self.held)
    @rule(data=st.data())
    def renew(self, data: st.DataObject) -> None:
        claim = data.draw(st.sampled_from(sorted(self.held.values(), key=str)))
        claims.renew(self.g, claim.node_id, run_id=claim.run_id, fence=claim.fence)

    @precondition(lambda self: self.held)
    @rule(data=st.data(), reason=st.sampled_from([Reason.GIVEN_BACK, Reason.CRASHED]))
    def release(self, data: st.DataObject, reason: str) -> None:
        claim = data.draw(st.sampled_from(sorted(self.held.values(), key=str)))
        with db.transaction(self.g.conn):
            assert claims.release(self.g, claim.node_id, claim.run_id, reason=reason,
                                  why="model", at=now_iso(), fence=claim.fence)
        self._ended(claim.node_id)
        if reason == Reason.CRASHED:
            self.crashes[claim.node_id] += 1
            if self.crashes[claim.node_id] >= MAX_CRASHES:
                self.finished.add(claim.node_id)  # failed: crashed too often

    @rule(run=st.sampled_from(RUNS))
    def give_back_run(self, run: str) -> None:
        given = claims.give_back_run(self.g.state, self.g.conn, run, self.g.id, why="model")
        mine = sorted(n for n, claim in self.held.items() if claim.run_id == run)
        assert given == mine
        for node_id in mine:
            self._ended(node_id)

    @precondition(lambda self: self.held)
    @rule(data=st.data())
    def finish(self, data: st.DataObject) -> None:
        claim = data.draw(st.sampled_from(sorted(self.held.values(), key=str)))
        results.apply_result(self.g, claim.node_id, {"status": "success", "summary": "s"},
                             run_id=claim.run_id, fence=claim.fence)
        self._ended(claim.node_id)
        self.finished.add(claim.node_id)

    @precondition(lambda self: self.old)
    @rule(data=st.data())
    def a_stale_fence_is_refused(self, data: st.DataObject) -> None:
        claim = data.draw(st.sampled_from(self.old))
        current = self.held.get(claim.node_id)
        assert current is None or current.fence != claim.fence
        with pytest.raises(ClavainError):
            claims.renew(self.g, claim.node_id, run_id=claim.run_id, fence=claim.fence)
        assert not claims.give_back(self.g, claim, why="late")
        with db.transaction(self.g.conn):
            assert not claims.release(self.g, claim.node_id, claim.run_id,
                                      reason=Reason.CRASHED, why="late", at=now_iso(),
                                      fence=claim.fence)

    @invariant()
    def every_node_is_open_held_once_or_finished(self) -> None:
        rows = _sql(self.g.conn, "SELECT id, status, lock_run_id, lock_generation, crashes "
                                   "FROM nodes WHERE graph_id = ?", (self.g.id,)).fetchall()
        assert len(rows) == len(NODES)  # never lost
        for node_id, status, holder, generation, crashes in rows:
            assert crashes == self.crashes[node_id]
            if node_id in self.finished:
                assert status in ("done", "failed") and holder is None
            elif node_id in self.held:
                claim = self.held[node_id]
                assert (status, holder, generation) == ("in_progress", claim.run_id, claim.fence)
            else:
                assert (status, holder) == ("open", None)


ClaimsAgainstAModel.TestCase.settings = settings(max_examples=60, stateful_step_count=40,
                                                 deadline=None)
test_claims_against_a_model = ClaimsAgainstAModel.TestCase
