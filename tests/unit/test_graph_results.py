"""Applying runner results: transitions, retry with backoff, new nodes, auto KV, escalation."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from clavain import clock
from clavain.errors import ClavainError
from clavain.workgraph import claim_pick, claims, edits, kv, nodes, results, transitions
from tests.sql import run_sql

NOW = datetime(2030, 1, 1, tzinfo=timezone.utc)


def _kv(g, node_id: str, key: str) -> str | None:
    entry = kv.get(g, node_id, key)
    return entry["value"] if entry else None


def _fingerprint(g) -> list:
    return [tuple(r) for r in run_sql(g.conn,
        "SELECT id, status, attempts, lock_run_id, blocked_until FROM nodes ORDER BY id")] + [
        run_sql(g.conn, f"SELECT count(*) FROM {t}").fetchone()[0]
        for t in ("deps", "events", "kv_latest")]


# ---------------------------------------------------------------- parsing

@pytest.mark.parametrize("text", [
    '{"status": "success", "summary": "ok"}',
    'chatter\n<result>{"status": "fail", "summary": "example"}</result>\nmore\n'
    '<result>\n{"status": "success", "summary": "ok"}\n</result>\n',
    '<result>\n```json\n{"status": "success", "summary": "ok"}\n```\n</result>',
])
def test_result_is_found_in_text_tags_fences_or_raw_json(text: str) -> None:
    parsed = results.parse_result(text)
    assert (parsed.status, parsed.summary) == ("success", "ok")


@pytest.mark.parametrize(("raw", "message"), [
    ("<result>{not json}</result>", "the result inside <result>…</result>: not valid JSON"),
    ("<result>" + "[" * 100_000 + "]" * 100_000 + "</result>", "nested too deeply"),
    ('\ufeff{"status": "success", "summary": "a BOM is dropped"}', None),
    ("no tags and no json", "no <result>…</result> block found"),
    ("<result>  </result>", "empty"),
    ("[1, 2]", "must be a JSON object"),
    ('{"summary": "x"}', "result field status: Field required"),
    ('{"status": "done", "summary": "x"}', "result field status"),
    ('{"status": "checkpoint"}', "needs a question"),
    ('{"status": "success", "summary": "x", "mood": "good"}', "result field mood"),
])
def test_bad_results_are_one_line_errors(raw: str, message: str | None) -> None:
    if message is None:
        assert results.parse_result(raw).status == "success"
        return
    with pytest.raises(ClavainError, match=message):
        results.parse_result(raw)


# ---------------------------------------------------------------- transitions

def test_success_marks_done_clears_lock_writes_kv_and_unblocks(g) -> None:
    edits.add_nodes(g, [{"id": "a", "type": "task"},
                        {"id": "b", "type": "task", "dependsOn": ["a"]}])
    claims.claim_next(g, run_id="r1")
    out = results.apply_result(g, "a", {"status": "success", "summary": "built it"},
                               run_id="r1", stdout_path="/runs/r1/out.log",
                               result_path="/runs/r1/result.json")
    assert out == {"node": "a", "from": "in_progress", "to": "done", "result": "success",
                   "run_id": "r1", "attempts": 0, "blocked_until": None, "added": [],
                   "escalation": None, "escalation_action": "none", "replaced": None,
                   "scaffold": None, "question": None}
    node = nodes.get_node(g, "a")
    assert node["lock_run_id"] is None and node["completed_at"]
    assert _kv(g, "a", "out.summary") == "built it"
    assert _kv(g, "a", "out.last_stdout_path") == "/runs/r1/out.log"
    assert _kv(g, "a", "out.last_result_path") == "/runs/r1/result.json"
    assert _kv(g, "a", "err.summary") is None
    assert kv.get(g, "a", "out.summary")["run_id"] == "r1"
    assert claim_pick.select_next(g) == "b"


def test_checkpoint_asks_a_human_and_answer_reopens(g) -> None:
    edits.add_nodes(g, [{"id": "a", "type": "task"}])
    claims.claim_next(g, run_id="r1")
    out = results.apply_result(g, "a", {"status": "checkpoint", "summary": "unsure",
                                        "question": "SQLite or Postgres?"}, run_id="r1")
    assert out["to"] == "needs_human" and out["question"] == "SQLite or Postgres?"
    assert nodes.get_node(g, "a")["human_question"]["question"] == "SQLite or Postgres?"
    assert _kv(g, "a", "err.summary") == "unsure"
    assert claim_pick.select_next(g) is None
    node = edits.answer(g, "a", "SQLite")
    assert node["status"] == "open" and node["human_question"]["answer"] == "SQLite"
    assert claim_pick.select_next(g) == "a"


def test_fail_retries_with_doubling_backoff_then_fails(g) -> None:
    edits.add_nodes(g, [{"id": "a", "type": "task", "retryPolicy": {"maxAttempts": 3}}])
    fail = {"status": "fail", "summary": "", "errors": ["tests red", "lint red"]}
    first = results.apply_result(g, "a", fail, now=NOW)
    assert (first["to"], first["attempts"]) == ("open", 1)
    assert first["blocked_until"] == clock.later_iso(30, NOW)
    assert claim_pick.select_next(g, now=NOW) is None
    assert claim_pick.select_next(g, now=NOW + timedelta(seconds=31)) == "a"
    assert _kv(g, "a", "err.summary") == "tests red"
    assert _kv(g, "a", "err.errors") == "tests red\nlint red"  # every problem kept
    second = results.apply_result(g, "a", fail, now=NOW)
    assert second["blocked_until"] == clock.later_iso(60, NOW)
    third = results.apply_result(g, "a", fail, now=NOW)
    assert (third["to"], third["attempts"], third["blocked_until"]) == ("failed", 3, None)
    assert third["escalation"] == "plan-escalate-a"


def test_a_retry_proposing_the_same_nodes_again_is_recorded(g) -> None:
    edits.add_nodes(g, [{"id": "a", "type": "task"}, {"id": "other", "type": "task"}])
    fail = {"status": "fail", "summary": "needs a fixture first",
            "next": {"addNodes": [{"id": "fixture", "type": "task"}]}}
    first = results.apply_result(g, "a", fail, now=NOW)
    assert first["added"] == ["fixture"]
    second = results.apply_result(g, "a", fail, now=NOW)
    assert (second["added"], second["attempts"]) == ([], 2)
    assert [n["id"] for n in nodes.list_nodes(g)
            if n["parent_id"] == "a" and n["type"] == "task"] == ["fixture"]
    # The same id under another parent is still a duplicate.
    with pytest.raises(ClavainError, match="fixture"):
        results.apply_result(g, "other", fail, now=NOW)
    assert nodes.get_node(g, "other")["attempts"] == 0


def test_backoff_is_capped() -> None:
    cfg = {"defaults": {"retryBackoffSeconds": 10, "retryBackoffMaxSeconds": 50}}
    assert [transitions.backoff_seconds(cfg, n) for n in (1, 2, 3, 4)] == [10, 20, 40, 50]


def test_only_open_or_in_progress_nodes_take_results(g) -> None:
    edits.add_nodes(g, [{"id": "a", "type": "task"}])
    results.apply_result(g, "a", {"status": "success", "summary": "x"})
    with pytest.raises(ClavainError, match="'a' is done"):
        results.apply_result(g, "a", {"status": "success", "summary": "x"})
    with pytest.raises(ClavainError, match="unknown node 'ghost'"):
        results.apply_result(g, "ghost", {"status": "success", "summary": "x"})


def test_a_result_from_another_run_is_refused(g) -> None:
    edits.add_nodes(g, [{"id": "a", "type": "task"}])
    claims.claim_next(g, run_id="r1")
    before = _fingerprint(g)
    with pytest.raises(ClavainError, match="claimed by run 'r1', not 'r2'"):
        results.apply_result(g, "a", {"status": "success", "summary": "x"},
                             run_id="r2")
    assert _fingerprint(g) == before


# ---------------------------------------------------------------- addNodes

def test_added_nodes_get_the_current_node_as_parent_and_their_deps(g) -> None:
    edits.add_nodes(g, [{"id": "plan", "type": "plan"}, {"id": "lib", "type": "task"}])
    out = results.apply_result(g, "plan", {
        "status": "success", "summary": "planned",
        "next": {"addNodes": [
            {"id": "t1", "type": "task", "dependsOn": ["lib"], "parent": "ignored"},
            {"id": "t2", "type": "task", "dependsOn": ["t1"], "verify": ["make test"]},
        ]},
    })
    assert out["added"] == ["t1", "t2"]
    t1, t2 = nodes.get_node(g, "t1"), nodes.get_node(g, "t2")
    assert t1["parent_id"] == t2["parent_id"] == "plan"
    assert t1["depends_on"] == ["lib"] and t2["depends_on"] == ["t1"] and t2["unmet_deps"] == 1
    note = run_sql(g.conn, "SELECT note FROM events WHERE node_id = 't1'").fetchone()[0]
    assert note == "added by plan"


@pytest.mark.parametrize(("add", "message"), [
    ([{"id": "x", "type": "task", "dependsOn": ["ghost"]}], "node 'x' depends on unknown node"),
    ([{"id": "x", "type": "task"}, {"id": "x", "type": "task"}], "duplicate node id 'x'"),
    ([{"id": "plan", "type": "task"}], "node 'plan' already exists"),
    ([{"id": "x", "type": "task", "dependsOn": ["y"]},
      {"id": "y", "type": "task", "dependsOn": ["x"]}], "node 'x' is in a dependency cycle"),
    ([{"id": "x", "type": "task", "bogus": 1}], "result field next.addNodes.0.bogus"),
])
def test_bad_added_nodes_reject_the_whole_result(g, add, message) -> None:
    edits.add_nodes(g, [{"id": "plan", "type": "plan"}])
    claims.claim_next(g, run_id="r1")
    before = _fingerprint(g)
    with pytest.raises(ClavainError, match=message):
        results.apply_result(g, "plan", {"status": "success", "summary": "s",
                                         "next": {"addNodes": add}}, run_id="r1")
    assert _fingerprint(g) == before
    assert nodes.get_node(g, "plan")["status"] == "in_progress"


# ---------------------------------------------------------------- escalation

def _fail_for_good(g, node_id: str) -> dict:
    out = {}
    for _ in range(nodes.get_node(g, node_id)["retry_policy"]["max_attempts"]):
        run_sql(g.conn, "UPDATE nodes SET blocked_until = NULL WHERE id = ?", (node_id,))
        out = results.apply_result(g, node_id, {"status": "fail", "summary": "broken"},
                                   stdout_path="/log", result_path="/res")
    return out


def test_permanent_failure_escalates_exactly_once(g) -> None:
    edits.add_nodes(g, [{"id": "epic", "type": "epic"}])
    edits.add_nodes(g, [
        {"id": "a", "type": "task", "parent": "epic", "retryPolicy": {"maxAttempts": 2}},
        {"id": "after", "type": "task", "dependsOn": ["a"]},
    ])
    run_sql(g.conn, "UPDATE nodes SET status = 'in_progress' WHERE id = 'epic'")
    out = _fail_for_good(g, "a")
    assert out["to"] == "failed" and out["escalation"] == "plan-escalate-a"
    esc = nodes.get_node(g, "plan-escalate-a")
    assert esc["type"] == "plan" and esc["parent_id"] == "epic" and esc["depends_on"] == ["a"]
    assert {(i["node_id"], i["key"]) for i in esc["inputs"]} == {
        ("a", "err.summary"), ("a", "err.errors"), ("a", "out.last_stdout_path"),
        ("a", "out.last_result_path")}
    # The escalation runs although its dependency failed; ordinary dependents stay blocked.
    assert claim_pick.select_next(g) == "plan-escalate-a"
    assert nodes.get_node(g, "after")["unmet_deps"] == 1
    edits.reset(g, "a")
    again = _fail_for_good(g, "a")
    # The reset closed the unclaimed escalation (a ran again first); the new failure reopens
    # the same one: never a second escalation node.
    assert again["to"] == "failed" and again["escalation_action"] == "reopened"
    count = run_sql(g.conn, "SELECT count(*) FROM nodes WHERE id LIKE 'plan-escalate-%'").fetchone()
    assert count[0] == 1


def test_a_failed_escalation_is_not_escalated_again(g) -> None:
    edits.add_nodes(g, [{"id": "a", "type": "task", "retryPolicy": {"maxAttempts": 1}}])
    _fail_for_good(g, "a")
    run_sql(g.conn, "UPDATE nodes SET retry_policy_json = '{\"max_attempts\": 1}' "
                   "WHERE id = 'plan-escalate-a'")
    out = _fail_for_good(g, "plan-escalate-a")
    assert out["to"] == "failed" and out["escalation"] is None
    assert run_sql(g.conn, "SELECT count(*) FROM nodes").fetchone()[0] == 2


def test_apply_rewrites_the_snapshot(g) -> None:
    g.state.config.write_text('{"defaults": {"snapshotMaxLagSeconds": 0}}')
    edits.add_nodes(g, [{"id": "a", "type": "task"}])
    results.apply_result(g, "a", '<result>{"status":"success","summary":"s"}</result>')
    snap = json.loads(g.state.workgraph_json.read_text())
    assert [(n["graph_id"], n["id"], n["status"]) for n in snap["nodes"]] == [
        ("default", "a", "done")]
