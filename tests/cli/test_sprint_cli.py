"""`clavain sprint …` through the real launcher: the happy path, what /clavain:sprint passes on
stdin, and every error path (one line, exit 2, nothing written)."""

from __future__ import annotations

from pathlib import Path

import pytest


def test_start_from_what_the_slash_command_passes_then_resume(run_cli, cli_json,
                                                              project: Path) -> None:
    typed = "--complexity 2 rename foo to bar in the user's module; echo $HOME\n"
    started = run_cli("sprint", "start", "--stdin", input=typed)
    assert started.returncode == 0, started.stderr
    lines = started.stdout.splitlines()
    assert lines[0].endswith("rename foo to bar in the user's module; echo $HOME")
    assert lines[1] == "Complexity 2/5 (simple) — skipping brainstorm, strategy, plan-review"
    assert any(line.startswith("Next: step plan:") for line in lines)
    status = cli_json("sprint", "status")
    assert list(status)[:8] == ["sprint_id", "description", "complexity", "route",
                                "completed_steps", "current_step", "plan_path", "git_sha"]
    assert status["complexity"] == 2 and status["current_step"] == "plan"
    run_cli("sprint", "done", "plan", "--decision", "keep the old name as an alias")
    resumed = run_cli("sprint", "start", "--stdin", input="--resume\n")
    assert "Resuming from step 2 (execute). Completed: [plan]" in resumed.stdout
    summary = cli_json("sprint", "summary")
    assert (summary["steps_done"], summary["steps_total"]) == (1, 6)
    assert cli_json("sprint", "abandon")["archived"].startswith(".clavain/runs/sprint-")
    assert not (project / ".clavain" / "checkpoint.json").exists()


def test_classify_prints_the_score_and_the_signals(run_cli, cli_json) -> None:
    assert cli_json("sprint", "classify", "fix", "typo", "in", "README") == {
        "score": 1, "label": "trivial", "reasons": ["a mechanical edit: typo"]}
    shown = run_cli("sprint", "classify", "make it multi-tenant").stdout
    assert shown.startswith("4/5 (complex)\n- large blast radius: scale (multi-tenant")


@pytest.mark.parametrize(("args", "stdin", "message"), [
    (("sprint", "start"), None, "a sprint needs a description of the work"),
    (("sprint", "start", "--complexity", "7", "x"), None,
     "complexity must be 1, 2, 3, 4 or 5, got '7'"),
    (("sprint", "start", "--skip-to", "later", "x"), None,
     "unknown step 'later'; the steps are: brainstorm, strategy, plan, plan-review"),
    (("sprint", "start", "--stdin"), "--bogus do it\n", "unknown option --bogus"),
    (("sprint", "start", "--from-step", "plan", "x"), None, "--from-step goes with --resume"),
    (("sprint", "done", "plan"), None, "no active sprint; start one with /clavain:sprint"),
    (("sprint", "done", "celebrate"), None, "unknown step 'celebrate'"),
    (("sprint", "resume"), None, "no active sprint"),
    (("sprint", "status"), None, "no active sprint"),
    (("sprint", "summary"), None, "no active sprint"),
    (("sprint", "abandon"), None, "no active sprint"),
    (("sprint", "start", "--stdin"), "--resume\n", "no active sprint"),
])
def test_errors_are_one_line_exit_2_and_write_nothing(run_cli, project: Path, args, stdin,
                                                      message) -> None:
    result = run_cli(*args, input=stdin)
    assert result.returncode == 2, result.stdout + result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith("clavain: error: ") and message in line
    assert not (project / ".clavain" / "checkpoint.json").exists()
