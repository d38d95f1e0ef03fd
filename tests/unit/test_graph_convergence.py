"""An orchestrator's failure paths: nothing done before its dependencies, added work always
verified, escalations that converge, a second failure that is never a silent dead end, and the
reason `next_node` gives when nothing can run."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from clavain import clock
from clavain.errors import ClavainError
from clavain.workgraph import claim_pick, claims, deadlock, edits, nodes, results, schedule
from clavain.workgraph.scaffold import ensure_scaffolding
from clavain.workgraph.verifier import run_verify
from tests.checks import PASSES
from tests.sql import run_sql

OK = {"status": "success", "summary": "ok"}
FAIL = {"status": "fail", "summary": "broken"}


def _fingerprint(g) -> list:
    return [tuple(r) for r in run_sql(g.conn,
        "SELECT id, status, attempts, lock_run_id FROM nodes ORDER BY id")] + [
        run_sql(g.conn, f"SELECT count(*) FROM {t}").fetchone()[0]
        for t in ("deps", "events", "kv_latest")]


def _fail_for_good(g, node_id: str) -> dict:
    out: dict = {}
    while nodes.get_node(g, node_id)["status"] != "failed":
        run_sql(g.conn, "UPDATE nodes SET blocked_until = NULL WHERE id = ?", (node_id,))
        out = results.apply_result(g, node_id, FAIL)
    return out


def _config(state, **defaults: object) -> None:
    import json

    state.root.mkdir(parents=True, exist_ok=True)
    state.config.write_text(json.dumps({"defaults": defaults}))


# ---------------------------------------------------------------- dependencies first

def test_a_result_for_a_node_whose_dependency_is_open_is_refused(g) -> None:
    edits.add_nodes(g, [{"id": "a", "type": "task"},
                        {"id": "b", "type": "task", "dependsOn": ["a"]}])
    before = _fingerprint(g)
    with pytest.raises(ClavainError, match="'b' waits on a, not done yet"):
        results.apply_result(g, "b", OK)
    assert _fingerprint(g) == before
    results.apply_result(g, "a", OK)
    assert results.apply_result(g, "b", OK)["to"] == "done"


def test_a_dependency_reopened_after_the_claim_blocks_the_result(g) -> None:
    edits.add_nodes(g, [{"id": "a", "type": "task"},
                        {"id": "b", "type": "task", "dependsOn": ["a"]}])
    results.apply_result(g, "a", OK)
    claims.claim_node(g, "b", run_id="r1")
    edits.reset(g, "a")
    with pytest.raises(ClavainError, match="waits on a"):
        results.apply_result(g, "b", OK, run_id="r1")


def test_apply_never_borrows_the_holders_run_id(g, monkeypatch) -> None:
    monkeypatch.delenv("CLAVAIN_RUN_ID", raising=False)
    edits.add_nodes(g, [{"id": "a", "type": "task"}])
    claims.claim_node(g, "a", run_id="r1")
    with pytest.raises(ClavainError, match="claimed by run 'r1', not 'run-"):
        results.apply_result(g, "a", OK)
    monkeypatch.setenv("CLAVAIN_RUN_ID", "r1")  # the runner's own environment
    assert results.apply_result(g, "a", OK)["run_id"] == "r1"


def test_verify_claims_the_node_and_requires_its_dependencies(g) -> None:
    edits.add_nodes(g, [{"id": "t", "type": "task"},
                        {"id": "v", "type": "verify", "dependsOn": ["t"],
                         "verify": ["touch ran"]}])
    with pytest.raises(ClavainError, match="'v' waits on t"):
        run_verify(g, "v", run_id="r-v")
    assert not (g.state.project / "ran").exists()
    assert nodes.get_node(g, "v")["status"] == "open"
    results.apply_result(g, "t", OK)
    if g.state.store_url:
        return  # the check below reads the SQLite file from inside the verify command
    seen = ('python3 -c "import os, sqlite3; print(sqlite3.connect(os.environ[\'CLAVAIN_DB\'])'
            '.execute(\'SELECT status, lock_run_id, lock_pid FROM nodes WHERE id = ?\', '
            '(os.environ[\'CLAVAIN_NODE_ID\'],)).fetchone())" > seen.txt')
    run_sql(g.conn, "UPDATE nodes SET verify_json = json_array(?) WHERE id = 'v'", (seen,))
    report = run_verify(g, "v", run_id="r-v")
    assert report["result"]["status"] == "success"
    import os

    # While its commands ran, the verifier held the node with its own pid.
    assert (g.state.project / "seen.txt").read_text().strip() == \
        f"('in_progress', 'r-v', {os.getpid()})"
    assert nodes.get_node(g, "v")["status"] == "done"


def test_verify_never_borrows_the_holders_run_id(g, monkeypatch) -> None:
    monkeypatch.delenv("CLAVAIN_RUN_ID", raising=False)
    edits.add_nodes(g, [{"id": "v", "type": "verify", "verify": ["touch ran"]}])
    claims.claim_node(g, "v", run_id="supervisor-1")
    with pytest.raises(ClavainError, match="claimed by run 'supervisor-1', not 'verify-"):
        run_verify(g, "v")
    assert not (g.state.project / "ran").exists()
    # The holder itself may verify (claimed first by `graph next --claim`, then verified).
    assert run_verify(g, "v", run_id="supervisor-1")["apply"]["to"] == "done"


# ---------------------------------------------------------------- added work is verified

def _every_task_is_verified_before_integration(g) -> None:
    tasks = [n for n in nodes.list_nodes(g) if n["type"] == "task" and not n["superseded_by"]]
    verify_of = {n["verifies"]: n["id"] for n in nodes.list_nodes(g)
                 if n["type"] == "verify"}
    integrate = next(n for n in nodes.list_nodes(g) if n["type"] == "integrate")
    final = next(n for n in nodes.list_nodes(g) if n["type"] == "final_verify")
    for task in tasks:
        assert task["id"] in verify_of, f"{task['id']} has no verify node"
        assert verify_of[task["id"]] in integrate["depends_on"]
        for command in task["verify"]:
            assert command in final["verify"]


def test_tasks_a_plan_adds_after_scaffolding_get_verify_nodes(g) -> None:
    edits.add_nodes(g, [{"id": "t1", "type": "task", "verify": ["check-1"]},
                        {"id": "plan-more", "type": "plan"}])
    ensure_scaffolding(g)
    out = results.apply_result(g, "plan-more", {
        "status": "success", "summary": "more work",
        "next": {"addNodes": [{"id": "t2", "type": "task", "verify": ["test -f check-2"]}]}})
    assert out["scaffold"]["verify"] == ["verify-t2"]
    _every_task_is_verified_before_integration(g)


def test_a_task_added_by_hand_after_scaffolding_gets_its_verify_node(g) -> None:
    edits.add_nodes(g, [{"id": "t1", "type": "task", "verify": ["check-1"]}])
    ensure_scaffolding(g)
    edits.add_nodes(g, [{"id": "t2", "type": "task", "verify": ["check-2"]}])
    _every_task_is_verified_before_integration(g)


def test_final_verify_that_already_passed_runs_again_for_added_work(g) -> None:
    edits.add_nodes(g, [{"id": "t1", "type": "task"}, {"id": "p", "type": "plan"}])
    ensure_scaffolding(g)
    run_sql(g.conn, "UPDATE nodes SET status = 'done' WHERE id IN "
                   "('t1', 'verify-t1', 'integrate', 'final-verify')")
    results.apply_result(g, "p", {
        "status": "success", "summary": "s",
        "next": {"addNodes": [{"id": "t2", "type": "task"}]}})
    assert nodes.get_node(g, "final-verify")["status"] == "open"
    assert nodes.get_node(g, "integrate")["status"] == "open"


# ---------------------------------------------------------------- escalation converges

def _run_to_the_end(g, *, on_task=None) -> dict:
    """Drive the graph like a supervisor: tasks and plans succeed (after `on_task`), checks run
    in the shell verifier. Returns the final `next_node` envelope."""
    for _ in range(100):
        step = schedule.next_node(g, claim=True, run_id="sup")
        node = step["node"]
        if node is None:
            return step
        if node["type"] in ("verify", "final_verify"):
            run_verify(g, node["id"], run_id="sup")
        else:
            if on_task:
                on_task(node)
            results.apply_result(g, node["id"], OK, run_id="sup")
    raise AssertionError("the graph did not finish in 100 steps")


def test_the_planners_add_a_fix_task_remedy_converges(g) -> None:
    """The remedy the escalation's own text suggests: add a node that fixes the failure."""
    edits.add_nodes(g, [
        {"id": "task-a", "type": "task", "verify": ["test -f fixed"],
         "retryPolicy": {"maxAttempts": 1}},
        {"id": "task-b", "type": "task", "dependsOn": ["task-a"], "verify": [PASSES]},
    ])
    ensure_scaffolding(g)
    out = _fail_for_good(g, "task-a")
    assert (out["escalation"], out["escalation_action"]) == ("plan-escalate-task-a", "created")
    escalation = schedule.next_node(g, claim=True, run_id="sup")["node"]
    assert escalation["id"] == "plan-escalate-task-a"
    applied = results.apply_result(g, "plan-escalate-task-a", {
        "status": "success", "summary": "split out the fix",
        "next": {"addNodes": [{"id": "task-a-fix", "type": "task",
                               "verify": ["test -f fixed"]}]}}, run_id="sup")
    assert applied["replaced"] == {"node": "task-a", "action": "replaced",
                                   "nodes": ["task-a-fix"],
                                   "repointed": ["task-b", "verify-task-a"]}
    assert nodes.get_node(g, "task-a")["superseded_by"] == "plan-escalate-task-a"
    assert nodes.get_node(g, "task-b")["depends_on"] == ["task-a-fix"]
    notes = [r[0] for r in run_sql(g.conn, "SELECT note FROM events WHERE node_id = 'task-b'")]
    assert any("instead of task-a" in note for note in notes)
    _every_task_is_verified_before_integration(g)

    def fix(node: dict) -> None:
        if node["id"] == "task-a-fix":
            (g.state.project / "fixed").write_text("yes")

    end = _run_to_the_end(g, on_task=fix)
    assert end["reason"] == "all_done", end["message"]
    assert nodes.get_node(g, "final-verify")["status"] == "done"
    assert deadlock.detect(g) is None


def test_a_failed_check_runs_again_after_the_escalations_fix(g) -> None:
    edits.add_nodes(g, [{"id": "t", "type": "task", "verify": ["test -f fixed"]}])
    ensure_scaffolding(g)
    run_sql(g.conn, "UPDATE nodes SET retry_policy_json = '{\"max_attempts\": 1}'")
    results.apply_result(g, "t", OK)
    assert run_verify(g, "verify-t", run_id="v")["apply"]["to"] == "failed"
    applied = results.apply_result(g, "plan-escalate-verify-t", {
        "status": "success", "summary": "needs the fixture",
        "next": {"addNodes": [{"id": "make-fixture", "type": "task", "verify": [PASSES]}]}})
    assert applied["replaced"]["action"] == "rerun_after"
    check = nodes.get_node(g, "verify-t")
    assert check["status"] == "open" and "make-fixture" in check["depends_on"]

    def fix(node: dict) -> None:
        if node["id"] == "make-fixture":
            (g.state.project / "fixed").write_text("yes")

    assert _run_to_the_end(g, on_task=fix)["reason"] == "all_done"


def test_added_nodes_that_would_close_a_cycle_are_refused(g) -> None:
    edits.add_nodes(g, [{"id": "a", "type": "task", "retryPolicy": {"maxAttempts": 1}},
                        {"id": "b", "type": "task", "dependsOn": ["a"]}])
    _fail_for_good(g, "a")
    before = _fingerprint(g)
    with pytest.raises(ClavainError, match="cycle"):
        results.apply_result(g, "plan-escalate-a", {
            "status": "success", "summary": "s",
            "next": {"addNodes": [{"id": "fix", "type": "task", "dependsOn": ["b"]}]}})
    assert _fingerprint(g) == before


# ---------------------------------------------------------------- a second failure

def test_a_node_failing_again_after_its_escalation_finished_is_escalated_again_then_blocks(
        g) -> None:
    _config(g.state, maxEscalations=2)
    edits.add_nodes(g, [{"id": "x", "type": "task", "retryPolicy": {"maxAttempts": 1}},
                        {"id": "y", "type": "task", "dependsOn": ["x"]}])
    first = _fail_for_good(g, "x")
    assert first["escalation_action"] == "created"
    # The escalation decides to retry x with a new approach, as its text recommends.
    results.apply_result(g, "plan-escalate-x", {"status": "success",
                                                "summary": "retry x"})
    edits.reset(g, "x")
    second = _fail_for_good(g, "x")
    assert (second["escalation"], second["escalation_action"]) == ("plan-escalate-x", "reopened")
    assert schedule.next_node(g)["node"]["id"] == "plan-escalate-x"
    results.apply_result(g, "plan-escalate-x", {"status": "success", "summary": "again"})
    edits.reset(g, "x")
    third = _fail_for_good(g, "x")
    assert (third["escalation"], third["escalation_action"]) == (None, "limit")
    # Never a silent dead end: nothing runs, and both views name x as the blocker.
    step = schedule.next_node(g)
    assert step["node"] is None and step["reason"] == "deadlock"
    assert "x (failed for good; its escalation is done without replacing it (2 of 2" \
        in step["message"]
    report = deadlock.detect(g)
    assert [b["id"] for b in report["blockers"]] == ["x"]


def test_a_failed_node_nothing_depends_on_is_still_reported(g) -> None:
    _config(g.state, maxEscalations=0)
    edits.add_nodes(g, [{"id": "lonely", "type": "task",
                         "retryPolicy": {"maxAttempts": 1}}])
    assert _fail_for_good(g, "lonely")["escalation_action"] == "limit"
    from clavain import config

    report = deadlock.detect(g, config.load(g.state.config))
    assert report is not None and report["stuck"] == 0
    assert report["blockers"] == [{
        "id": "lonely", "status": "failed", "error": "broken",
        "reason": "failed for good; escalation is off (defaults.maxEscalations is 0)",
        "fix": "clavain graph reset lonely"}]
    assert schedule.next_node(g)["reason"] == "deadlock"


# ---------------------------------------------------------------- why nothing runs

def test_next_node_says_why_nothing_is_runnable(g) -> None:
    at = datetime(2030, 1, 1, tzinfo=timezone.utc)
    assert schedule.idle_reason(g, now=at)["reason"] == "empty"
    edits.add_nodes(g, [{"id": "a", "type": "task"},
                        {"id": "b", "type": "task", "dependsOn": ["a"]}])
    claims.claim_node(g, "a", run_id="r1", now=at)
    busy = schedule.next_node(g, now=at)
    assert busy["reason"] == "running" and "a (run r1)" in busy["message"]
    results.apply_result(g, "a", FAIL, run_id="r1", now=at)
    waiting = schedule.next_node(g, now=at)
    assert waiting["reason"] == "backoff"
    assert waiting["until"] == clock.later_iso(30, at) and "until" in waiting["message"]
    later = at + timedelta(seconds=31)
    claims.claim_node(g, "a", run_id="r2", now=later)
    results.apply_result(g, "a", {"status": "checkpoint", "summary": "?",
                                  "question": "Which port?"}, run_id="r2", now=later)
    human = schedule.next_node(g, now=later)
    assert human["reason"] == "needs_human" and "Which port?" in human["message"]
    edits.answer(g, "a", "8080")
    results.apply_result(g, "a", OK, now=later)
    results.apply_result(g, "b", OK, now=later)
    done = schedule.next_node(g, now=later)
    assert done == {"node": None, "graph_id": "default", "run_id": None, "claimed": False,
                    "released": [], "reset": [], "reason": "all_done",
                    "message": "all 2 node(s) are finished"}


def test_next_node_claims_under_the_run_id_rule(g, monkeypatch) -> None:
    edits.add_nodes(g, [{"id": "a", "type": "task"}, {"id": "b", "type": "task"}])
    monkeypatch.setenv("CLAVAIN_RUN_ID", "from-env")
    first = schedule.next_node(g, claim=True)
    assert (first["node"]["id"], first["run_id"], first["claimed"]) == ("a", "from-env", True)
    explicit = schedule.next_node(g, claim=True, run_id="given")
    assert (explicit["node"]["lock_run_id"], explicit["run_id"]) == ("given", "given")


def test_an_escalation_may_follow_its_own_advice_and_reset_the_node(g) -> None:
    """Its text says `clavain graph reset X`; doing that must not keep it from finishing, and
    X failing again is handed to it again."""
    edits.add_nodes(g, [{"id": "x", "type": "task", "retryPolicy": {"maxAttempts": 1}}])
    _fail_for_good(g, "x")
    claims.claim_node(g, "plan-escalate-x", run_id="planner")
    edits.reset(g, "x")
    done = results.apply_result(g, "plan-escalate-x",
                                {"status": "success", "summary": "try x again"},
                                run_id="planner")
    assert done["to"] == "done"
    assert schedule.next_node(g)["node"]["id"] == "x"
    again = _fail_for_good(g, "x")
    assert (again["escalation"], again["escalation_action"]) == ("plan-escalate-x", "reopened")


def test_a_replacement_is_what_the_reused_check_reads(g) -> None:
    edits.add_nodes(g, [{"id": "t", "type": "task", "verify": [PASSES],
                         "retryPolicy": {"maxAttempts": 1}}])
    ensure_scaffolding(g)
    _fail_for_good(g, "t")
    results.apply_result(g, "plan-escalate-t", {
        "status": "success", "summary": "s",
        "next": {"addNodes": [{"id": "t2", "type": "task", "verify": [PASSES]}]}})
    check = nodes.get_node(g, "verify-t")
    assert check["depends_on"] == ["t2"]
    assert check["inputs"] == [{"node_id": "t2", "key": "out.summary", "as": "taskSummary"}]


def test_nodes_an_escalation_added_on_an_earlier_attempt_still_replace(g) -> None:
    edits.add_nodes(g, [{"id": "a", "type": "task", "retryPolicy": {"maxAttempts": 1}},
                        {"id": "b", "type": "task", "dependsOn": ["a"]}])
    _fail_for_good(g, "a")
    with_fix = {"next": {"addNodes": [{"id": "fix-a", "type": "task"}]}}
    asked = results.apply_result(g, "plan-escalate-a", {
        "status": "checkpoint", "summary": "?", "question": "ok?", **with_fix})
    assert asked["added"] == ["fix-a"] and asked["replaced"] is None
    edits.answer(g, "plan-escalate-a", "yes")
    done = results.apply_result(g, "plan-escalate-a",
                                {"status": "success", "summary": "go", **with_fix})
    assert done["added"] == [] and done["replaced"]["nodes"] == ["fix-a"]
    assert nodes.get_node(g, "b")["depends_on"] == ["fix-a"]


def test_resetting_a_failed_node_closes_its_unclaimed_escalation(g) -> None:
    edits.add_nodes(g, [{"id": "a", "type": "task", "retryPolicy": {"maxAttempts": 1}}])
    _fail_for_good(g, "a")
    edits.reset(g, "a")
    assert nodes.get_node(g, "plan-escalate-a")["status"] == "done"
    results.apply_result(g, "a", OK)
    # No planner runs for a node that already succeeded: the graph is finished.
    assert schedule.next_node(g)["reason"] == "all_done"


def test_a_replaced_node_cannot_be_reset(g) -> None:
    edits.add_nodes(g, [{"id": "a", "type": "task", "retryPolicy": {"maxAttempts": 1}}])
    _fail_for_good(g, "a")
    results.apply_result(g, "plan-escalate-a", {
        "status": "success", "summary": "s",
        "next": {"addNodes": [{"id": "a2", "type": "task"}]}})
    with pytest.raises(ClavainError, match="'a' was replaced by what plan-escalate-a added"):
        edits.reset(g, "a")


def test_what_comes_after_a_plan_waits_for_the_plans_work(g) -> None:
    """A plan's dependents wait for what it added, also when it is an escalation's sink."""
    edits.add_nodes(g, [{"id": "p", "type": "plan"},
                        {"id": "after", "type": "task", "dependsOn": ["p"]}])
    results.apply_result(g, "p", {"status": "success", "summary": "s", "next": {
        "addNodes": [{"id": "t1", "type": "task"},
                     {"id": "t2", "type": "task", "dependsOn": ["t1"]}]}})
    assert sorted(nodes.get_node(g, "after")["depends_on"]) == ["p", "t2"]
    assert claim_pick.select_next(g) == "t1"


def test_a_claimed_node_whose_dependency_reopened_gives_its_claim_back(g) -> None:
    edits.add_nodes(g, [{"id": "t1", "type": "task", "verify": [PASSES]}])
    ensure_scaffolding(g)
    run_sql(g.conn, "UPDATE nodes SET status = 'done' WHERE id IN ('t1', 'verify-t1')")
    claims.claim_node(g, "integrate", run_id="r1")
    edits.add_nodes(g, [{"id": "t2", "type": "task", "verify": [PASSES]}])
    with pytest.raises(ClavainError, match=r"waits on verify-t2.*the claim was released"):
        results.apply_result(g, "integrate", OK, run_id="r1")
    node = nodes.get_node(g, "integrate")
    assert (node["status"], node["lock_run_id"], node["attempts"]) == ("open", None, 0)
