"""Scaffolding (verify per task, one integrate, one final_verify) and deadlock detection."""

from __future__ import annotations

import json

from clavain.workgraph import claims, deadlock, edits, nodes, results
from clavain.workgraph.scaffold import ensure_scaffolding


def _shape(g) -> list[tuple]:
    return [(n["id"], n["type"], tuple(n["depends_on"])) for n in nodes.list_nodes(g)]


def test_scaffold_adds_verify_per_task_one_integrate_and_one_final(g) -> None:
    g.state.root.mkdir(parents=True, exist_ok=True)
    g.state.config.write_text(json.dumps({"defaults": {"verifyRunner": "myVerifier"},
                                        "runners": {"myVerifier": {"command": ["my-check"]}}}))
    edits.add_nodes(g, [
        {"id": "plan", "type": "plan"},
        {"id": "t1", "type": "task", "parent": "plan", "verify": ["pytest -q"],
         "acceptance": ["green"]},
        {"id": "t2", "type": "task", "parent": "plan"},
    ])
    report = ensure_scaffolding(g)
    assert report["verify"] == ["verify-t1", "verify-t2"]
    assert (report["integrate"], report["final"]) == ("integrate", "final-verify")
    v1 = nodes.get_node(g, "verify-t1")
    assert v1["runner"] == "myVerifier" and v1["depends_on"] == ["t1"]
    assert v1["verify"] == ["pytest -q"] and v1["acceptance"] == ["green"]
    assert v1["parent_id"] == "plan"
    assert v1["inputs"] == [{"node_id": "t1", "key": "out.summary", "as": "taskSummary"}]
    assert v1["verifies"] == "t1"
    assert nodes.get_node(g, "integrate")["depends_on"] == ["verify-t1", "verify-t2"]
    final = nodes.get_node(g, "final-verify")
    assert final["depends_on"] == ["integrate"]
    # The final gate re-runs every task's checks, so the shell verifier can run it too.
    assert final["runner"] == "myVerifier" and final["verify"] == ["pytest -q"]


def test_final_gate_gathers_checks_once_and_keeps_its_own(g) -> None:
    edits.add_nodes(g, [
        {"id": "t1", "type": "task", "verify": ["pytest -q", "ruff check"]},
        {"id": "t2", "type": "task", "verify": ["pytest -q"]},
        {"id": "integrate", "type": "integrate"},
        {"id": "final", "type": "final_verify", "dependsOn": ["integrate"],
         "verify": ["make e2e"]},
    ])
    ensure_scaffolding(g)
    assert nodes.get_node(g, "final")["verify"] == ["make e2e", "pytest -q", "ruff check"]
    edits.add_nodes(g, [{"id": "t3", "type": "task", "verify": ["mypy ."]}])
    ensure_scaffolding(g)
    assert nodes.get_node(g, "final")["verify"] == ["make e2e", "pytest -q", "ruff check",
                                                       "mypy ."]


def test_scaffold_is_idempotent(g) -> None:
    edits.add_nodes(g, [{"id": "t1", "type": "task"}, {"id": "t2", "type": "task"}])
    ensure_scaffolding(g)
    shape, events = _shape(g), g.conn.execute("SELECT count(*) FROM events").fetchone()
    again = ensure_scaffolding(g)
    assert again == {"verify": [], "integrate": None, "final": None, "linked": 0,
                     "reopened": []}
    assert _shape(g) == shape
    assert g.conn.execute("SELECT count(*) FROM events").fetchone() == events


def test_scaffold_without_tasks_adds_nothing(g) -> None:
    edits.add_nodes(g, [{"id": "p", "type": "plan"}])
    ensure_scaffolding(g)
    assert [n["id"] for n in nodes.list_nodes(g)] == ["p"]


def test_existing_verify_node_of_a_task_is_respected(g) -> None:
    edits.add_nodes(g, [{"id": "t1", "type": "task"},
                                  {"id": "check-t1", "type": "verify", "dependsOn": ["t1"]}])
    report = ensure_scaffolding(g)
    assert report["verify"] == []
    assert nodes.get_node(g, "integrate")["depends_on"] == ["check-t1"]


def test_escalations_never_multiply_integrate_or_final(g) -> None:
    edits.add_nodes(g, [{"id": "t1", "type": "task", "retryPolicy": {"maxAttempts": 1}}])
    ensure_scaffolding(g)
    results.apply_result(g, "t1", {"status": "fail", "summary": "no"})
    # The escalation planner proposes a fix task; scaffolding gives it a verify node that joins
    # the one integrate.
    results.apply_result(g, "plan-escalate-t1", {
        "status": "success", "summary": "fix",
        "next": {"addNodes": [{"id": "t1-fix", "type": "task"}]}})
    ensure_scaffolding(g)
    ensure_scaffolding(g)
    types = [n["type"] for n in nodes.list_nodes(g)]
    assert types.count("integrate") == 1 and types.count("final_verify") == 1
    assert nodes.get_node(g, "integrate")["depends_on"] == ["verify-t1", "verify-t1-fix"]


def test_new_verify_nodes_reopen_a_finished_integration(g) -> None:
    edits.add_nodes(g, [{"id": "t1", "type": "task"}])
    ensure_scaffolding(g)
    g.conn.execute("UPDATE nodes SET status = 'done'")
    # A task joining a scaffolded graph is scaffolded in the same transaction.
    edits.add_nodes(g, [{"id": "t2", "type": "task"}])
    assert ensure_scaffolding(g)["reopened"] == []
    assert nodes.get_node(g, "integrate")["status"] == "open"
    assert nodes.get_node(g, "final-verify")["status"] == "open"
    assert nodes.get_node(g, "integrate")["unmet_deps"] == 1


# ---------------------------------------------------------------- deadlock

def test_no_deadlock_while_work_can_progress(g) -> None:
    edits.add_nodes(g, [{"id": "a", "type": "task"},
                                  {"id": "b", "type": "task", "dependsOn": ["a"]}])
    assert deadlock.detect(g) is None  # a is runnable
    claims.claim_next(g, run_id="r")
    assert deadlock.detect(g) is None  # a is running
    g.conn.execute("UPDATE nodes SET status = 'open', lock_run_id = NULL, "
                 "blocked_until = '2999-01-01T00:00:00.000Z' WHERE id = 'a'")
    assert deadlock.detect(g) is None  # a waits out a backoff
    g.conn.execute("UPDATE nodes SET status = 'done'")
    assert deadlock.detect(g) is None  # finished


def test_deadlock_reports_the_chain_to_the_failed_blocker(g) -> None:
    edits.add_nodes(g, [
        {"id": "a", "type": "task"}, {"id": "b", "type": "task", "dependsOn": ["a"]},
        {"id": "c", "type": "task", "dependsOn": ["b"]}, {"id": "h", "type": "task"},
        {"id": "d", "type": "task", "dependsOn": ["h"]},
    ])
    g.conn.execute("UPDATE nodes SET status = 'failed' WHERE id = 'a'")
    g.conn.execute("UPDATE nodes SET status = 'needs_human' WHERE id = 'h'")
    report = deadlock.detect(g)
    assert report["stuck"] == 3
    assert [(b["id"], b["status"]) for b in report["blockers"]] == [("a", "failed"),
                                                                   ("h", "needs_human")]
    assert report["blockers"][0]["reason"].startswith("failed for good; not escalated")
    assert report["blockers"][1]["reason"] == "waits for a person's answer"
    chains = {c["node"]: c["chain"] for c in report["chains"]}
    assert chains == {"b": ["b", "a"], "c": ["c", "b", "a"], "d": ["d", "h"]}
    assert deadlock.describe(report).startswith("deadlock: blocked by a (failed for good")
    assert "3 open node(s) can never run" in deadlock.describe(report)


def test_auto_reset_reopens_a_failed_blocker_at_most_the_configured_times(g) -> None:
    g.state.root.mkdir(parents=True, exist_ok=True)
    g.state.config.write_text(json.dumps({"defaults": {"autoResetFailedMax": 1}}))
    edits.add_nodes(g, [{"id": "a", "type": "task"},
                                  {"id": "b", "type": "task", "dependsOn": ["a"]}])
    g.conn.execute("UPDATE nodes SET status = 'failed', attempts = 3 WHERE id = 'a'")
    assert deadlock.auto_reset(g) == ["a"]
    node = nodes.get_node(g, "a")
    assert (node["status"], node["attempts"], node["auto_resets"]) == ("open", 0, 1)
    g.conn.execute("UPDATE nodes SET status = 'failed' WHERE id = 'a'")
    assert deadlock.auto_reset(g) == []
    assert nodes.get_node(g, "a")["status"] == "failed"


def test_auto_reset_is_off_by_default(g) -> None:
    edits.add_nodes(g, [{"id": "a", "type": "task"},
                                  {"id": "b", "type": "task", "dependsOn": ["a"]}])
    g.conn.execute("UPDATE nodes SET status = 'failed' WHERE id = 'a'")
    assert deadlock.auto_reset(g) == []


def test_scaffold_never_links_a_gate_into_a_dependency_cycle(g) -> None:
    """A task that follows integration (say, added by a planner) gets its verify node, but that
    verify node cannot also be something integration waits for: integrate → verify-t2 → t2 →
    integrate would deadlock for good."""
    edits.add_nodes(g, [{"id": "t1", "type": "task"}])
    ensure_scaffolding(g)
    edits.add_nodes(g, [{"id": "t2", "type": "task", "dependsOn": ["integrate"]}])
    assert nodes.get_node(g, "verify-t2")["depends_on"] == ["t2"]
    assert nodes.get_node(g, "integrate")["depends_on"] == ["verify-t1"]
    # The final gate re-runs verify-t2's checks, so it waits for verify-t2 instead.
    assert sorted(nodes.get_node(g, "final-verify")["depends_on"]) == ["integrate", "verify-t2"]
    assert nodes.find_cycle({n["id"]: n["depends_on"] for n in nodes.list_nodes(g)}) is None
    assert ensure_scaffolding(g)["linked"] == 0


def test_deadlock_report_terminates_on_a_dependency_cycle(g) -> None:
    edits.add_nodes(g, [{"id": "a", "type": "task"},
                                  {"id": "b", "type": "task", "dependsOn": ["a"]}])
    g.conn.execute("INSERT INTO deps (graph_id, node_id, depends_on_id) "
                   "VALUES ('default', 'a', 'b')")  # a ⇄ b
    report = deadlock.detect(g)
    assert report is not None and report["stuck"] == 2
    chains = {c["node"]: c["chain"] for c in report["chains"]}
    assert chains["a"] == ["a", "b", "a"]
    assert "a -> b -> a" in deadlock.describe(report)


def test_each_graph_has_its_own_gates_and_its_own_deadlocks(g) -> None:
    """Node ids are unique per graph: a sprint's graph gets its own `integrate` and
    `final-verify` (not `integrate-2`), and a blocker in one graph stalls nothing in another."""
    from clavain.workgraph.graphs import Graph

    sprint = Graph(g.conn, "sprint-1", g.state)
    edits.add_nodes(g, [{"id": "t1", "type": "task"}])
    edits.add_nodes(sprint, [{"id": "t1", "type": "task"}, {"id": "t2", "type": "task"}])
    ensure_scaffolding(g)
    report = ensure_scaffolding(sprint)
    assert (report["verify"], report["integrate"], report["final"]) == (
        ["verify-t1", "verify-t2"], "integrate", "final-verify")
    assert nodes.get_node(g, "integrate")["depends_on"] == ["verify-t1"]
    assert nodes.get_node(sprint, "integrate")["depends_on"] == ["verify-t1", "verify-t2"]

    # Same ids in two more graphs: a failed for good in one, still runnable in the other.
    stalled, moving = Graph(g.conn, "sprint-2", g.state), Graph(g.conn, "run-x", g.state)
    for graph in (stalled, moving):
        edits.add_nodes(graph, [{"id": "a", "type": "task"},
                                {"id": "b", "type": "task", "dependsOn": ["a"]}])
    g.conn.execute("UPDATE nodes SET status = 'failed' WHERE graph_id = 'sprint-2' "
                   "AND id = 'a'")
    assert deadlock.detect(moving) is None
    stuck = deadlock.detect(stalled)
    assert stuck is not None and stuck["stuck"] == 1
    assert [b["id"] for b in stuck["blockers"]] == ["a"]
