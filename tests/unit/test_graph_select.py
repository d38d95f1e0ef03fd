"""Selection order, claims, backoff and stale locks; hypothesis checks the ready invariant."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clavain import clock, config
from clavain.errors import ClavainError
from clavain.paths import StatePaths
from clavain.store import db
from clavain.workgraph import claim_pick, claims, edits, kv, nodes, stale
from clavain.workgraph.graphs import Graph
from tests.sql import run_sql


def _done(conn, *ids: str) -> None:
    for node_id in ids:
        run_sql(conn, "UPDATE nodes SET status = 'done' WHERE id = ?", (node_id,))


def test_selection_order_is_verify_task_plan_integrate_final_then_id(g, conn) -> None:
    # Raw rows: through `edits.add_nodes` the tasks would get their verify gates first.
    specs = nodes.validate_specs([
        {"id": "f", "type": "final_verify"}, {"id": "i", "type": "integrate"},
        {"id": "e", "type": "epic"}, {"id": "d-plan", "type": "plan"},
        {"id": "t2", "type": "task"}, {"id": "t1", "type": "task"}, {"id": "v", "type": "verify"},
    ])
    with db.transaction(conn):
        nodes.insert_nodes(g, config.DEFAULTS, specs, at=clock.now_iso())
    order = []
    while (picked := claims.claim_next(g, run_id="r")) is not None:
        order.append(picked["id"])
    assert order == ["v", "t1", "t2", "d-plan", "e", "i", "f"]


def test_a_node_waits_for_every_dep_to_be_done(g, conn) -> None:
    edits.add_nodes(g, [{"id": "a", "type": "task"}, {"id": "b", "type": "task"},
                        {"id": "v", "type": "verify", "dependsOn": ["a", "b"]}])
    assert claim_pick.select_next(g) == "a"
    _done(conn, "a")
    assert claim_pick.select_next(g) == "b"
    run_sql(conn, "UPDATE nodes SET status = 'in_progress' WHERE id = 'b'")
    assert claim_pick.select_next(g) is None
    _done(conn, "b")
    assert claim_pick.select_next(g) == "v"


def test_claim_locks_and_a_second_claim_of_the_same_node_fails(g, conn) -> None:
    edits.add_nodes(g, [{"id": "a", "type": "task"}])
    first = claims.claim_node(g, "a", run_id="r1", pid=os.getpid(), host="h")
    assert first["status"] == "in_progress" and first["lock_run_id"] == "r1"
    assert first["lock_pid"] == os.getpid() and first["lock_host"] == "h"
    assert first["lock_started_at"] == first["lock_renewed_at"] is not None
    assert claims.claim_node(g, "a", run_id="r2") is None
    assert claims.claim_next(g, run_id="r2") is None
    assert nodes.get_node(g, "a")["lock_run_id"] == "r1"
    event = run_sql(conn, "SELECT from_status, to_status, run_id FROM events "
                          "WHERE note = 'claimed'")
    assert [tuple(r) for r in event] == [("open", "in_progress", "r1")]


def test_claim_needs_a_run_id(g) -> None:
    edits.add_nodes(g, [{"id": "a", "type": "task"}])
    with pytest.raises(ClavainError, match="run id"):
        claims.claim_next(g, run_id="")


def test_blocked_until_defers_selection(g, conn) -> None:
    edits.add_nodes(g, [{"id": "a", "type": "task"}, {"id": "b", "type": "task"}])
    now = datetime(2030, 1, 1, tzinfo=timezone.utc)
    run_sql(conn, "UPDATE nodes SET blocked_until = ? WHERE id = 'a'",
                 (clock.later_iso(60, now),))
    assert claim_pick.select_next(g, now=now) == "b"
    assert claim_pick.select_next(g, now=now + timedelta(seconds=61)) == "a"


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _lease(seconds: float, **defaults: object) -> dict:
    return config.merged({"defaults": {"lockLeaseSeconds": seconds, **defaults}})


def test_stale_lock_of_a_dead_pid_on_this_host_is_given_back_as_a_crash(g, conn) -> None:
    edits.add_nodes(g, [{"id": "dead", "type": "task"}, {"id": "alive", "type": "task"},
                        {"id": "elsewhere", "type": "task"}])
    claims.claim_node(g, "dead", run_id="r1", pid=_dead_pid())
    claims.claim_node(g, "alive", run_id="r2", pid=os.getpid())
    claims.claim_node(g, "elsewhere", run_id="r3", pid=_dead_pid(), host="other-host")
    assert stale.release_stale_locks(g, cfg=_lease(3600)) == ["dead"]
    node = nodes.get_node(g, "dead")
    assert node["status"] == "open" and node["lock_run_id"] is None and node["lock_pid"] is None
    # Its holder died: not the node's failure. No attempt, no backoff; one crash counted.
    assert (node["attempts"], node["blocked_until"], node["crashes"]) == (0, None, 1)
    assert kv.get(g, "dead", "err.summary") is None
    note = run_sql(conn, "SELECT note FROM events WHERE node_id = 'dead' "
                        "ORDER BY id DESC").fetchone()
    assert "stale lock released" in note[0] and "is gone" in note[0]
    assert "a crash counted" in note[0]
    assert nodes.get_node(g, "alive")["status"] == "in_progress"
    assert nodes.get_node(g, "elsewhere")["status"] == "in_progress"
    assert claims.claim_next(g, run_id="r4")["id"] == "dead"  # at once: no backoff


def test_lock_older_than_its_lease_is_given_back(g) -> None:
    edits.add_nodes(g, [{"id": "a", "type": "task"}])
    start = datetime(2030, 1, 1, tzinfo=timezone.utc)
    claims.claim_node(g, "a", run_id="r1", pid=os.getpid(), now=start, lease_seconds=60)
    soon = start + timedelta(seconds=59)
    assert stale.release_stale_locks(g, cfg=_lease(60), now=soon) == []
    later = start + timedelta(seconds=61)
    assert stale.release_stale_locks(g, cfg=_lease(60), now=later) == ["a"]
    node = nodes.get_node(g, "a")
    assert (node["attempts"], node["crashes"]) == (0, 1)
    assert claims.claim_next(g, run_id="r2", now=later)["id"] == "a"


@pytest.mark.parametrize(("claimer", "reader"), [(60, 3600), (3600, 60)])
def test_the_lease_is_the_claimers_whoever_judges_it(g, claimer: float, reader: float) -> None:
    """A machine configured with a short lease never takes work from one with a long lease,
    and a short lease is honoured by a machine whose own is long."""
    edits.add_nodes(g, [{"id": "a", "type": "task"}])
    start = datetime(2030, 1, 1, tzinfo=timezone.utc)
    claim = claims.claim_node(g, "a", run_id="r1", host="elsewhere", now=start,
                              lease_seconds=claimer)
    assert claim["lock_lease_ms"] == claimer * 1000
    before = start + timedelta(seconds=claimer - 1)
    after = start + timedelta(seconds=claimer + 1)
    assert stale.release_stale_locks(g, cfg=_lease(reader), now=before) == []
    assert stale.release_stale_locks(g, cfg=_lease(reader), now=after) == ["a"]


def test_a_claim_that_recorded_no_lease_is_judged_by_the_readers(g, conn) -> None:
    edits.add_nodes(g, [{"id": "a", "type": "task"}])
    start = datetime(2030, 1, 1, tzinfo=timezone.utc)
    claims.claim_node(g, "a", run_id="r1", host="elsewhere", now=start, lease_seconds=5)
    run_sql(conn, "UPDATE nodes SET lock_lease_ms = NULL WHERE id = 'a'")  # an older claim
    at = start + timedelta(seconds=30)
    assert stale.release_stale_locks(g, cfg=_lease(60), now=at) == []
    assert stale.release_stale_locks(g, cfg=_lease(20), now=at) == ["a"]


def test_a_heartbeat_renews_the_lease(g) -> None:
    edits.add_nodes(g, [{"id": "a", "type": "task"}])
    start = datetime(2030, 1, 1, tzinfo=timezone.utc)
    claims.claim_node(g, "a", run_id="r1", now=start, lease_seconds=60)
    renewed = claims.renew(g, "a", run_id="r1", now=start + timedelta(seconds=50))
    assert renewed["lock_renewed_at"] == clock.now_iso(start + timedelta(seconds=50))
    later = start + timedelta(seconds=100)  # 100 s after the claim, 50 s after the heartbeat
    assert stale.release_stale_locks(g, cfg=_lease(3600), now=later) == []
    assert nodes.get_node(g, "a")["lock_run_id"] == "r1"
    with pytest.raises(ClavainError, match=r"not held by run 'r2' \(run 'r1' holds it\)"):
        claims.renew(g, "a", run_id="r2")
    assert stale.release_stale_locks(g, cfg=_lease(3600),
                                     now=later + timedelta(seconds=11)) == ["a"]
    with pytest.raises(ClavainError, match="not claimed"):
        claims.renew(g, "a", run_id="r1")


def test_a_crash_loop_stops_at_max_crashes_and_escalates_without_spending_attempts(g) -> None:
    """A runner that dies holding the lock every time must not retry forever, and the crashes
    before that spend no attempt."""
    edits.add_nodes(g, [{"id": "a", "type": "task", "retryPolicy": {"maxAttempts": 3}}])
    at = datetime(2030, 1, 1, tzinfo=timezone.utc)
    cfg = _lease(3600, maxCrashes=4)
    for crash in range(1, 5):
        assert claims.claim_next(g, run_id=f"r{crash}", pid=_dead_pid(), now=at)["id"] == "a"
        assert stale.release_stale_locks(g, cfg=cfg, now=at) == ["a"]
        node = nodes.get_node(g, "a")
        assert (node["attempts"], node["crashes"]) == (0, crash)
        assert node["status"] == ("failed" if crash == 4 else "open")
    assert "crashed 4 times" in kv.get(g, "a", "err.summary")["value"]
    assert nodes.get_node(g, "a")["escalations"] == 1
    assert nodes.get_node(g, "plan-escalate-a")["status"] == "open"


def test_a_person_reset_clears_the_crash_count(g) -> None:
    edits.add_nodes(g, [{"id": "a", "type": "task"}])
    at = datetime(2030, 1, 1, tzinfo=timezone.utc)
    claims.claim_next(g, run_id="r1", pid=_dead_pid(), now=at)
    stale.release_stale_locks(g, cfg=_lease(3600), now=at)
    assert nodes.get_node(g, "a")["crashes"] == 1
    edits.reset(g, "a")
    assert nodes.get_node(g, "a")["crashes"] == 0


# ---------------------------------------------------------------- hypothesis

graphs = st.integers(min_value=1, max_value=14).flatmap(lambda n: st.tuples(
    st.just(n),
    st.lists(st.sampled_from(["plan", "epic", "task", "verify"]),
             min_size=n, max_size=n),
    st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=3 * n),
    st.lists(st.tuples(st.integers(0, n - 1),
                       st.sampled_from(["done", "failed", "in_progress", "open", "reset"])),
             max_size=2 * n),
))


def _naive_ready(conn) -> set[str]:
    return {r[0] for r in run_sql(conn,
        "SELECT n.id FROM nodes n WHERE n.status = 'open' AND n.lock_run_id IS NULL "
        "AND NOT EXISTS (SELECT 1 FROM deps d JOIN nodes x ON x.graph_id = d.graph_id "
        "AND x.id = d.depends_on_id WHERE d.graph_id = n.graph_id AND d.node_id = n.id "
        "AND NOT (x.status = 'done' OR "
        "(d.kind = 'settled' AND x.status = 'failed')))")}


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=graphs)
def test_selection_never_returns_a_node_with_an_unfinished_dep(tmp_path: Path, spec) -> None:
    n, types, edges, changes = spec
    path = tmp_path / f"h{os.getpid()}-{id(spec)}.sqlite"
    conn = db.connect(path)
    state = StatePaths(tmp_path / f"h{os.getpid()}-{id(spec)}")
    g = Graph(conn, "default", state)
    try:
        # Edges only point from higher to lower index, so the graph is acyclic by construction.
        deps = {i: sorted({b for a, b in edges if a == i and b < i}) for i in range(n)}
        edits.add_nodes(g, [{"id": f"n{i:02d}", "type": types[i],
                            "dependsOn": [f"n{d:02d}" for d in deps[i]]}
                           for i in range(n)])
        for index, status in changes:
            node_id = f"n{index:02d}"
            if status == "reset":
                edits.reset(g, node_id)
            else:
                run_sql(conn, "UPDATE nodes SET status = ? WHERE id = ?", (status, node_id))
            ready = _naive_ready(conn)
            picked = claim_pick.select_next(g)
            assert (picked is None) == (not ready)
            if picked:
                assert picked in ready
                rank = {"verify": 0, "task": 1, "plan": 2, "epic": 2}
                best = min(ready, key=lambda i: (rank[types[int(i[1:])]], i))
                assert picked == best
        claimed = set()
        while True:
            ready = _naive_ready(conn)
            node = claims.claim_next(g, run_id="r")
            if node is None:
                assert not ready
                break
            assert node["id"] in ready
            assert all(nodes.get_node(g, d)["status"] == "done" for d in node["depends_on"])
            assert node["id"] not in claimed
            claimed.add(node["id"])
            run_sql(conn, "UPDATE nodes SET status = 'done', lock_run_id = NULL WHERE id = ?",
                         (node["id"],))
    finally:
        conn.close()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)


def test_a_lease_too_long_to_date_means_no_lock_ever_expires(g) -> None:
    """`lockLeaseSeconds: 1e12` (as good as "never") must not crash every `graph next`."""
    edits.add_nodes(g, [{"id": "a", "type": "task"}])
    claims.claim_node(g, "a", run_id="r1", pid=os.getpid(), lease_seconds=1e12)
    assert stale.release_stale_locks(g, cfg=_lease(1e12)) == []
    assert nodes.get_node(g, "a")["lock_run_id"] == "r1"


def test_idle_is_never_all_done_while_a_node_can_still_run(g) -> None:
    """A node given back by another runner between a claim that found nothing and the look at
    why: "look again", never "all done" (a supervisor would exit while work is left)."""
    from clavain.workgraph import edits, schedule

    edits.add_nodes(g, [{"id": "a", "type": "task"}, {"id": "b", "type": "task"}])
    run_sql(g.conn, "UPDATE nodes SET status = 'done' WHERE id = 'a'")
    assert schedule.idle_reason(g)["reason"] == "ready"
    run_sql(g.conn, "UPDATE nodes SET status = 'done' WHERE id = 'b'")
    assert schedule.idle_reason(g)["reason"] == "all_done"
