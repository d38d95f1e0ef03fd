"""`clavain status`: one screen of where the work stands; read-only."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_status_shows_running_waiting_needs_you_blocked_next_and_verdicts(
        run_cli, cli_json, project: Path) -> None:
    from clavain.paths import StatePaths
    from clavain.store import db
    from clavain.verdicts import files
    from clavain.workgraph import claims, edits, results
    from clavain.workgraph.graphs import DEFAULT_GRAPH, Graph

    state = StatePaths(project / ".clavain")
    conn = db.connect(state.db)
    g = Graph(conn, DEFAULT_GRAPH, state)
    edits.add_nodes(g, [
        {"id": "run-me", "type": "task"}, {"id": "crashed", "type": "task"},
        {"id": "retry-me", "type": "task"}, {"id": "ask-me", "type": "task"},
        {"id": "broken", "type": "task", "retryPolicy": {"maxAttempts": 1}},
        {"id": "after-broken", "type": "task", "dependsOn": ["broken"]},
        {"id": "ready", "type": "task", "title": "the next one"}])
    state.config.write_text(json.dumps({"defaults": {"maxEscalations": 0}}))
    claims.claim_node(g, "run-me", run_id="r1")
    claims.claim_node(g, "crashed", run_id="r2", pid=_dead_pid())
    results.apply_result(g, "retry-me", {"status": "fail", "summary": "red"})
    results.apply_result(g, "ask-me", {"status": "checkpoint", "summary": "?",
                                       "question": "Which port?"})
    results.apply_result(g, "broken", {"status": "fail", "summary": "no"})
    files.write(state.verdicts, files.build(
        {"type": "verdict", "status": "NEEDS_ATTENTION", "summary": "retry loop has no cap"},
        agent="clavain:fd-quality"))
    conn.close()

    report = cli_json("status")
    graph_part = report["workgraph"]
    assert graph_part["graph_id"] == "default"
    assert graph_part["counts"] == {"done": 0, "in_progress": 2, "open": 3, "needs_human": 1,
                                    "failed": 1, "replaced": 0, "cancelled": 0}
    running = {r["id"]: r for r in graph_part["running"]}
    assert running["run-me"]["stale"] is None and "is gone" in running["crashed"]["stale"]
    assert [w["id"] for w in graph_part["waiting"]] == ["retry-me"]
    assert graph_part["needs_human"] == [{"id": "ask-me", "question": "Which port?"}]
    assert graph_part["next"] == {"node": "ready", "title": "the next one", "attempts": 0,
                                  "last_error": None}
    assert report["verdicts"]["counts"] == {"NEEDS_ATTENTION": 1}
    screen = run_cli("status").stdout
    for expected in ("Running    run-me (run r1", "stale: lock holder pid",
                     "`clavain graph next` releases it",
                     "Waiting    retry-me until", "Needs you  ask-me: Which port?",
                     "Next       ready — the next one",
                     "Verdicts   1 NEEDS_ATTENTION",
                     "NEEDS_ATTENTION clavain:fd-quality: retry loop has no cap"):
        assert expected in screen, expected
    # Read-only: the dead runner's lock is reported, not released.
    assert cli_json("graph", "show", "crashed")["status"] == "in_progress"


def test_status_names_the_blocker_when_nothing_can_run(run_cli, cli_json) -> None:
    cli_json("graph", "import", "-", input=json.dumps({"nodes": [
        {"id": "a", "type": "task", "retryPolicy": {"maxAttempts": 1}},
        {"id": "b", "type": "task", "dependsOn": ["a"]}]}))
    run_cli("graph", "apply", "a", "--result", "-", input='{"status":"fail","summary":"x"}')
    run_cli("graph", "apply", "plan-escalate-a", "--result", "-",
            input='{"status":"success","summary":"nothing to add"}')
    screen = run_cli("status").stdout
    assert "Blocked    a: failed for good" in screen
    assert "Next       nothing to start: deadlock" in screen


def test_status_in_an_empty_project_creates_nothing(run_cli, project: Path) -> None:
    result = run_cli("status")
    assert result.returncode == 0
    assert result.stdout.splitlines() == ["Workgraph  default: no nodes yet (clavain graph "
                                          "import PLAN.json)", "Verdicts   none yet"]
    assert not (project / ".clavain").exists()


def test_status_shows_a_replaced_node_and_why_the_next_one_retries(run_cli, cli_json) -> None:
    cli_json("graph", "import", "-", input=json.dumps({"nodes": [
        {"id": "a", "type": "task", "retryPolicy": {"maxAttempts": 1}},
        {"id": "b", "type": "task", "dependsOn": ["a"], "retryPolicy": {"maxAttempts": 3}}]}))
    run_cli("graph", "apply", "a", "--result", "-", input='{"status":"fail","summary":"x"}')
    run_cli("graph", "apply", "plan-escalate-a", "--result", "-", input=json.dumps(
        {"status": "success", "summary": "split",
         "next": {"addNodes": [{"id": "a2", "type": "epic"}]}}))
    counts = cli_json("status")["workgraph"]["counts"]
    assert (counts["failed"], counts["replaced"]) == (0, 1)
    run_cli("graph", "apply", "a2", "--result", "-", input='{"status":"success","summary":"ok"}')
    from clavain.paths import StatePaths
    from clavain.store import db

    state = StatePaths.discover()
    conn = db.connect(state.db)
    conn.execute("UPDATE nodes SET attempts = 1 WHERE id = 'b'")
    conn.execute("INSERT INTO kv_latest (graph_id, node_id, key, value_text, updated_at) "
                 "VALUES ('default', 'b', 'err.summary', 'tests red: test_login', 'now')")
    conn.close()
    screen = run_cli("status").stdout
    assert "Next       b (after 1 failed attempt(s); last error: tests red: test_login)" in screen
    assert "1 replaced" in screen


def test_a_failed_node_is_named_while_other_work_still_runs(run_cli, cli_json,
                                                            project: Path) -> None:
    (project / ".clavain").mkdir()
    (project / ".clavain" / "config.json").write_text('{"defaults": {"maxEscalations": 0}}')
    cli_json("graph", "import", "-", input=json.dumps({"nodes": [
        {"id": "x", "type": "task", "retryPolicy": {"maxAttempts": 1}},
        {"id": "y", "type": "task", "dependsOn": ["x"]}, {"id": "other", "type": "task"}]}))
    run_cli("graph", "apply", "x", "--result", "-", input='{"status":"fail","summary":"boom"}')
    screen = run_cli("status").stdout
    assert ("Blocked    x: failed for good; escalation is off (defaults.maxEscalations is 0); "
            "error: boom (clavain graph reset x)") in screen
    assert "Next       other" in screen
