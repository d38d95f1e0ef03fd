"""`clavain budget status|reset` and `clavain report` on a real project."""

from __future__ import annotations

import json
from pathlib import Path

from clavain.guards import budget, policy
from clavain.guards.commands import compile_patterns
from clavain.store import db


def _calls(project: Path, run: str, commands: list[str], **settings) -> None:
    (project / ".clavain").mkdir(exist_ok=True)
    conn = db.connect(project / ".clavain" / "state.sqlite")
    limits, _ = policy.resolve(settings, {})
    for command in commands:
        call = budget.describe("Bash", {"command": command}, compile_patterns([]))
        budget.check(conn, run_key=run, session_id=None, call=call, limits=limits, problems=[],
                     started=0.0)
    conn.close()


def test_status_report_and_reset(project: Path, run_cli, cli_json) -> None:
    _calls(project, "session:s1", ["pytest", "pytest", "ls", "pytest"], maxCommands=3)
    status = cli_json("budget", "status")
    assert status["run"] == "session:s1" and status["profile"] == "strict"
    assert status["budgets"][0] == {"budget": "Bash commands", "used": 3, "limit": 45}
    table = run_cli("budget", "status").stdout
    assert "Bash commands" in table and "LEFT" in table
    report = cli_json("report")
    assert report["top_commands"][0] == {"command": "pytest", "count": 2}  # the 3rd was denied
    text = run_cli("report").stdout
    assert "## Budgets" in text and "- Bash commands: 3 / 45" in text and "2× `pytest`" in text
    assert "## Tokens and cost" in text
    assert cli_json("report", "--run", "s1")["run"] == "session:s1"  # the bare id
    refused = run_cli("budget", "reset")  # no terminal: an agent's, or a script's
    assert refused.returncode == 2 and "`/clavain:budget reset`" in refused.stderr
    assert cli_json("budget", "status")["budgets"][0]["used"] == 3
    reset = cli_json("budget", "reset", person=True)
    assert (reset["run"], reset["calls_removed"]) == ("session:s1", 4)
    assert reset["decided_by"]["via"] == "terminal"
    after = cli_json("budget", "status")  # nothing counted since: the limits, unused
    assert after["budgets"][0] == {"budget": "Bash commands", "used": 0, "limit": 45}
    decided = cli_json("report", "--run", "s1")["person_decisions"]
    assert [d["what"] for d in decided] == ["budget reset (4 call(s) forgotten)"]
    assert "## A person's decisions" in run_cli("report", "--run", "s1").stdout


def test_denied_calls_are_not_top_commands_and_the_last_one_is_called_so(project: Path,
                                                                         cli_json) -> None:
    _calls(project, "session:s1", ["pytest -k a", "pytest -k b", "pytest -k c", "pytest -k d"],
           maxCommands=3)
    report = cli_json("report")
    assert [c["count"] for c in report["top_commands"]] == [1, 1, 1]
    assert len(report["denied"]) == 1
    conn = db.connect(project / ".clavain" / "state.sqlite")
    warned = conn.execute("SELECT reason FROM budget_calls WHERE decision = 'warn'").fetchall()
    assert [row[0] for row in warned] == [
        "Clavain budget: Bash commands 3 of 3 used: that was the last; the next is denied. "
        "Finish or hand over now."]


def test_settings_problems_reach_the_person(project: Path, run_cli, cli_json) -> None:
    (project / ".clavain").mkdir()
    (project / ".clavain" / "config.json").write_text('{"budgets": {"profile": "fast"}}')
    status = run_cli("budget", "status", env={"CLAVAIN_BUDGET_MAX_COMMANDS": "abc"})
    assert status.returncode == 2  # a printed error never exits 0
    assert "Bash commands" in status.stdout  # the limits applied meanwhile are still shown
    assert 'error: budget settings: budget profile "fast"' in status.stderr
    assert 'maxCommands "abc" (CLAVAIN_BUDGET_MAX_COMMANDS)' in status.stderr


def test_a_misspelled_key_is_named_in_status_report_and_doctor(project: Path, run_cli,
                                                              cli_json) -> None:
    (project / ".clavain").mkdir()
    (project / ".clavain" / "config.json").write_text('{"budgets": {"maxComands": 5}}')
    named = 'budgets key "maxComands" is not a budget setting (did you mean maxCommands?)'
    status = run_cli("budget", "status")
    assert status.returncode == 2 and named in status.stderr and "error" in status.stderr
    as_json = run_cli("budget", "status", "--json")
    assert as_json.returncode == 2 and named in json.loads(as_json.stdout)["problems"][0]
    report = run_cli("report")
    assert report.returncode == 2 and f"Budget settings error (defaults used): {named}" in \
        report.stdout
    assert "budgets.maxComands: not a known key" in report.stderr
    doctor = json.loads(run_cli("doctor", "--json").stdout)
    row = next(row for row in doctor["checks"] if row["check"] == "budgets")
    assert row["status"] == "fail" and named in row["detail"] and not doctor["healthy"]
    config = next(row for row in doctor["checks"] if row["check"] == "config")
    assert config["status"] == "fail"  # the schema refuses the same key


def test_budget_status_names_every_config_problem_not_only_the_budgets(project: Path,
                                                                       run_cli) -> None:
    (project / ".clavain").mkdir()
    (project / ".clavain" / "config.json").write_text('{"supervisor": {"workers": 0}}')
    status = run_cli("budget", "status")
    assert status.returncode == 2 and "Bash commands" in status.stdout
    assert "supervisor.workers: 0 (expected a whole number" in status.stderr


def test_doctor_shows_the_budgets_that_apply(project: Path, run_cli) -> None:
    (project / ".clavain").mkdir()
    (project / ".clavain" / "config.json").write_text(
        '{"budgets": {"profile": "yolo", "maxCommands": 12, "maxCostUsd": 2.5}}')
    doctor = json.loads(run_cli("doctor", "--json",
                                env={"CLAVAIN_BUDGET_MAX_TOKENS": "1000"}).stdout)
    row = next(row for row in doctor["checks"] if row["check"] == "budgets")
    assert row["status"] == "ok" and row["detail"].startswith("yolo/medium: bash commands 12,")
    assert row["limits"]["maxTokens"] == 1000 and "dollars $2.50" in row["detail"]
    bad = json.loads(run_cli("doctor", "--json",
                             env={"CLAVAIN_BUDGET_MAX_TOKENS": "lots"}).stdout)
    row = next(row for row in bad["checks"] if row["check"] == "budgets")
    assert row["status"] == "fail" and "CLAVAIN_BUDGET_MAX_TOKENS" in row["detail"]


def test_the_report_shows_how_an_unknown_model_was_priced(project: Path, run_cli) -> None:
    from clavain.clock import now_iso

    transcript = project / "session.jsonl"
    lines = [json.dumps({"type": "assistant", "requestId": f"r{i}", "timestamp": now_iso(),
                         "message": {"id": f"m{i}", "model": model, "usage": {
                             "input_tokens": tokens, "output_tokens": 0,
                             "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}})
             for i, (model, tokens) in enumerate([("claude-opus-9", 1000),
                                                  ("claude-sonnet-4-5-20250929", 1000),
                                                  ("<synthetic>", 0)])]
    transcript.write_text("\n".join(lines) + "\n")
    _calls(project, "session:s", ["ls"])
    conn = db.connect(project / ".clavain" / "state.sqlite")
    conn.execute("INSERT INTO budget_usage (run_key, transcript, added_at) VALUES "
                 "('session:s', ?, ?)", (str(transcript), now_iso()))
    conn.commit()
    conn.close()
    report = run_cli("report", "--run", "session:s").stdout
    assert ("claude-opus-9: $0.0040 (priced as claude-opus-5-5: unknown model claude-opus-9 "
            "(the newest opus row))") in report
    assert "claude-sonnet-4-5-20250929: $0.0030\n" in report  # a known model: no note
    assert "unknown model <synthetic>" not in report  # nothing to price


def test_the_active_sprint_is_the_current_run(project: Path, cli_json, run_cli) -> None:
    started = cli_json("sprint", "start", "--complexity", "4", "rework the billing service",
                       person=True)
    _calls(project, "session:old", ["ls"])
    _calls(project, f"sprint:{started['sprint_id']}", ["make test"])
    status = cli_json("budget", "status")
    assert status["run"] == f"sprint:{started['sprint_id']}" and status["scope"] == "large"
    other = cli_json("report", "--run", "session:old")
    assert other["run"] == "session:old"
    missing = run_cli("report", "--run", "session:nope")
    assert missing.returncode == 2 and "no budget run 'session:nope'" in missing.stderr


def test_a_finished_sprint_keeps_its_report(project: Path, cli_json) -> None:
    started = cli_json("sprint", "start", "--complexity", "2", "rename foo", person=True)
    _calls(project, f"sprint:{started['sprint_id']}", ["pytest", "pytest"])
    summary = cli_json("sprint", "summary")
    assert summary["budgets"][1] == {"budget": "Test runs", "used": 2, "limit": 5}
    cli_json("sprint", "abandon")
    report = (project / ".clavain" / "runs" / started["sprint_id"] / "report.md").read_text()
    assert "- Test runs: 2 / 5" in report, report
    archived = json.loads((project / ".clavain" / "runs" / started["sprint_id"] /
                           "summary.json").read_text())
    assert archived["budgets"][0]["used"] == 2


def test_before_anything_is_counted_the_limits_show_unused(run_cli, cli_json) -> None:
    report = cli_json("report")
    assert report["run"] == "session (none counted yet)" and report["tokens"] == 0
    assert report["budgets"][0] == {"budget": "Bash commands", "used": 0, "limit": 45}
    started = cli_json("sprint", "start", "--complexity", "5", "research caching options",
                       person=True)
    status = cli_json("budget", "status")
    assert status["run"] == f"sprint:{started['sprint_id']}" and status["scope"] == "large"
    missing = run_cli("report", "--run", "sprint:nope", "--json")
    # The sprint's start made the database (its workgraph), but no budget run is counted yet.
    error = json.loads(missing.stdout)["error"]
    assert missing.returncode == 2 and "no budget run 'sprint:nope'" in error
    assert "recent: none yet" in error
