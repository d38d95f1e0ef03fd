"""`clavain sprint …` through the real launcher: the happy path, what /clavain:sprint passes on
stdin, and every error path (one line, exit 2, nothing written)."""

from __future__ import annotations

from pathlib import Path

import pytest

PLAN = """# Plan

```json
{"nodes": [{"id": "task-a", "type": "task", "title": "write a.txt", "verify": ["test -f a.txt"],
            "ownership": ["a.txt"]}]}
```
"""


def test_start_from_what_the_slash_command_passes_then_resume(run_cli, cli_json,
                                                              project: Path) -> None:
    typed = "--complexity 2 rename foo to bar in the user's module; echo $HOME\n"
    started = run_cli("sprint", "start", "--stdin", input=typed)
    assert started.returncode == 0, started.stderr
    lines = started.stdout.splitlines()
    assert lines[0].startswith("Sprint sprint-")
    assert lines[0].endswith(". Complexity 2/5 (simple) — skipping brainstorm, strategy, "
                             "plan-review")
    assert lines[1].startswith("Next: step plan:") and len(lines) == 2
    status = cli_json("sprint", "status")
    assert status["description"] == "rename foo to bar in the user's module; echo $HOME"
    assert list(status)[:8] == ["sprint_id", "description", "complexity", "route",
                                "completed_steps", "current_step", "plan_path", "git_sha"]
    assert status["complexity"] == 2 and status["current_step"] == "plan"
    (project / "plan.md").write_text(PLAN)
    done = run_cli("sprint", "done", "plan", "--plan", "plan.md", "--decision",
                   "keep the old name as an alias")
    assert done.returncode == 0, done.stderr
    assert "plan done; plan recorded: 1 task(s) added (task-a)" in done.stdout
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
    (("sprint", "done", "plan"), None, "no active sprint; start one with `clavain sprint start"),
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


def test_every_shortcut_is_one_line_exit_2_and_the_checkpoint_untouched(run_cli, project: Path
                                                                        ) -> None:
    assert run_cli("sprint", "start", "--complexity", "3", "add a greeting",
                   person=True).returncode == 0
    checkpoint = project / ".clavain" / "checkpoint.json"
    before = checkpoint.read_bytes()
    for args, message in (
        (("ship",), "the sprint is at step brainstorm, not ship"),
        (("quality-gates",), "the sprint is at step brainstorm, not quality-gates"),
    ):
        result = run_cli("sprint", "done", *args)
        assert result.returncode == 2
        [line] = result.stderr.splitlines()
        assert line.startswith("clavain: error: ") and message in line
    assert checkpoint.read_bytes() == before
    for step in ("brainstorm", "strategy"):
        assert run_cli("sprint", "done", step).returncode == 0
    (project / "plan.md").write_text(PLAN)
    assert run_cli("sprint", "done", "plan", "--plan", "plan.md").returncode == 0
    refused = run_cli("sprint", "done", "plan-review")
    assert refused.returncode == 2 and "no verdict yet from lens plan" in refused.stderr
    waived = run_cli("sprint", "done", "plan-review", "--waive", "the user read the plan",
                     person=True)
    assert waived.returncode == 0 and "gate WAIVED (the user read the plan)" in waived.stdout
    refused = run_cli("sprint", "done", "execute")
    assert refused.returncode == 2
    assert "1 task(s) not done: task-a (open)" in refused.stderr


def _doctor(run_cli) -> list[dict]:
    import json

    return json.loads(run_cli("doctor", "--json").stdout)["checks"]


def test_abandon_sets_a_damaged_checkpoint_aside_and_doctor_names_it(run_cli, cli_json,
                                                                     project: Path) -> None:
    assert run_cli("sprint", "start", "fix the typo").returncode == 0
    checkpoint = project / ".clavain" / "checkpoint.json"
    checkpoint.write_bytes(b"\xff{not json")
    for args in (("sprint", "status"), ("sprint", "start", "another thing")):
        result = run_cli(*args)
        assert result.returncode == 2 and "`clavain sprint abandon` sets it aside" in \
            result.stderr
    doctor = {row["check"]: row for row in _doctor(run_cli)}
    assert doctor["sprint"]["status"] == "fail"
    assert "clavain sprint abandon" in doctor["sprint"]["detail"]
    abandoned = run_cli("sprint", "abandon")
    assert abandoned.returncode == 0, abandoned.stderr
    assert "The damaged checkpoint was set aside as .clavain/checkpoint.corrupt-" in \
        abandoned.stdout
    [kept] = (project / ".clavain").glob("checkpoint.corrupt-*.json")
    assert kept.read_bytes() == b"\xff{not json"  # nothing of a person's data is lost
    assert not checkpoint.exists()
    doctor = {row["check"]: row for row in _doctor(run_cli)}
    assert doctor["sprint"]["status"] == "ok" and kept.name in doctor["sprint"]["detail"]
    assert run_cli("sprint", "start", "another thing").returncode == 0


def test_a_new_sprint_never_sees_an_abandoned_sprints_tasks(run_cli, cli_json,
                                                            project: Path) -> None:
    run_cli("sprint", "start", "--complexity", "2", "first piece of work", person=True)
    (project / "plan.md").write_text(PLAN)
    assert run_cli("sprint", "done", "plan", "--plan", "plan.md").returncode == 0
    first = cli_json("sprint", "status")["sprint_id"]
    abandoned = cli_json("sprint", "abandon")
    assert sorted(abandoned["cancelled"]) == ["final-verify", "integrate", "task-a",
                                              "verify-task-a"]
    run_cli("sprint", "start", "--complexity", "2", "second piece of work", person=True)
    nothing = run_cli("graph", "next")
    assert nothing.returncode == 3 and "task-a" not in nothing.stdout + nothing.stderr
    # Task ids need only be unique within a sprint: the same plan records again.
    assert run_cli("sprint", "done", "plan", "--plan", "plan.md").returncode == 0
    everything = cli_json("graph", "ls", "--all")
    rows = everything["nodes"] if isinstance(everything, dict) else everything
    assert {(n["graph_id"], n["status"]) for n in rows if n["id"] == "task-a"} == {
        (first, "cancelled"), (cli_json("sprint", "status")["sprint_id"], "open")}
    archive = project / ".clavain" / "runs" / first
    assert (archive / "report.md").exists() and (archive / "workgraph.json").exists()


def test_summary_shows_the_last_sprint_that_ended(run_cli, cli_json, project: Path) -> None:
    run_cli("sprint", "start", "--complexity", "2", "first piece of work", person=True)
    sprint_id = cli_json("sprint", "status")["sprint_id"]
    run_cli("sprint", "abandon")
    summary = cli_json("sprint", "summary")
    assert summary["sprint_id"] == sprint_id and summary["outcome"] == "abandoned"
    assert cli_json("sprint", "summary", "--sprint", sprint_id)["sprint_id"] == sprint_id
    missing = run_cli("sprint", "summary", "--sprint", "sprint-nope")
    assert missing.returncode == 2 and "no sprint 'sprint-nope'" in missing.stderr


def test_read_only_commands_work_on_a_read_only_state_folder(run_cli, project: Path) -> None:
    import os
    import stat

    if os.geteuid() == 0:
        pytest.skip("root writes through read-only modes")
    run_cli("sprint", "start", "--complexity", "2", "first piece of work", person=True)
    root = project / ".clavain"
    modes = {p: p.stat().st_mode for p in [root, *root.rglob("*")]}
    try:
        for path in modes:
            path.chmod(stat.S_IMODE(modes[path]) & ~0o222)
        for args in (("sprint", "status"), ("sprint", "resume"), ("sprint", "summary"),
                     ("status",)):
            result = run_cli(*args)
            assert result.returncode == 0, (args, result.stderr)
    finally:
        for path, mode in modes.items():
            path.chmod(stat.S_IMODE(mode))


@pytest.mark.parametrize("env", [{"CLAUDECODE": "1"}, {"CLAUDECODE": ""}, {}],
                         ids=["inside-claude-code", "emptied-variable", "no-variable"])
def test_without_a_person_at_a_terminal_the_cli_refuses_a_waiver_or_a_skip(
        run_cli, project: Path, env: dict) -> None:
    """No variable makes a person: with it set, emptied or gone, a command with no terminal
    (an agent's, a script's) is refused, and says what the person types instead."""
    refused = run_cli("sprint", "start", "--skip-to", "ship", "rename foo", env=env)
    assert refused.returncode == 2 and "is a person's decision" in refused.stderr
    assert "/clavain:sprint --skip-to STEP TASK" in refused.stderr
    assert not (project / ".clavain" / "checkpoint.json").exists()
    lowered = run_cli("sprint", "start", "--complexity", "1", "add a login page with oauth",
                      env=env)
    assert lowered.returncode == 2 and "below the classifier's" in lowered.stderr
    assert run_cli("sprint", "start", "--complexity", "2", "rename foo", env=env
                   ).returncode == 0  # not below the classifier's: anyone's choice
    (project / "plan.md").write_text(PLAN)
    assert run_cli("sprint", "done", "plan", "--plan", "plan.md", env=env).returncode == 0
    refused = run_cli("sprint", "done", "execute", "--waive", "trust me", env=env)
    assert refused.returncode == 2 and "passing a gate (--waive) is a person's decision" in \
        refused.stderr
    assert "`/clavain:sprint --waive execute REASON`" in refused.stderr
    abbreviated = run_cli("sprint", "done", "execute", "--wai", "trust me")
    assert abbreviated.returncode == 2 and "unrecognized arguments: --wai" in abbreviated.stderr
    # The person, in a terminal: allowed, and recorded as theirs.
    assert run_cli("sprint", "done", "execute", "--waive", "ran it on staging",
                   person=True).returncode == 0
    import json

    waiver = json.loads((project / ".clavain" / "checkpoint.json").read_text())["waivers"][0]
    assert waiver["decided_by"]["by"] == "person" and waiver["decided_by"]["via"] == "terminal"
    assert waiver["decided_by"]["terminal"].startswith("/dev/")
    summary = run_cli("sprint", "summary").stdout
    assert "WAIVED execute: ran it on staging" in summary and "by a person at /dev/" in summary
