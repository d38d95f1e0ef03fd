"""`clavain sprint done plan` through plan lint at the CLI: an error refuses the plan with one
line per finding, warnings print on stderr and the plan is recorded, and `--accept-lint REASON`
is a person's decision (refused to an agent, in the terminal and the slash form, and by the
PreToolUse hook's reading of the command), recorded in the checkpoint and the summary."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from clavain.guards.commands import person_only
from tests.person import run_below_host

REPO = Path(__file__).resolve().parents[2]


def _plan(verify: str, ownership: str = "a.txt") -> str:
    return ("# Plan\n\n```json\n" + json.dumps({"nodes": [
        {"id": "task-a", "type": "task", "title": "write a.txt", "verify": [verify],
         "ownership": [ownership]}]}) + "\n```\n")


def _start(run_cli, project: Path, plan: str) -> None:
    assert run_cli("sprint", "start", "--complexity", "2", "rename foo").returncode == 0
    (project / "a.txt").write_text("a")
    (project / "plan.md").write_text(plan)


def _checkpoint(project: Path) -> dict:
    return json.loads((project / ".clavain" / "checkpoint.json").read_text())


def test_a_plan_lint_refuses_is_not_recorded_one_line_per_finding(run_cli, project) -> None:
    _start(run_cli, project, _plan("echo ok"))
    refused = run_cli("sprint", "done", "plan", "--plan", "plan.md")
    assert refused.returncode == 2
    lines = refused.stderr.splitlines()
    assert lines[0].startswith("clavain: error: plan.md: the plan has 1 error(s) and was not "
                               "recorded (a person may record it anyway:")
    assert lines[1:] == ["error: task-a: verify 'echo ok' always passes: it checks nothing; "
                         "use a command that fails until the task is done"]
    assert _checkpoint(project)["current_step"] == "plan"
    assert run_cli("graph", "show", "task-a").returncode != 0  # nothing in the graph


def test_warnings_print_one_per_line_and_the_plan_is_recorded(run_cli, project) -> None:
    _start(run_cli, project, _plan("test -f a.txt", ownership="docs/**"))
    done = run_cli("sprint", "done", "plan", "--plan", "plan.md")
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        "warning: task-a: ownership 'docs/**' owns no file of the project and no task "
        "creates one"]
    assert "plan recorded: 1 task(s) added (task-a)" in done.stdout
    assert _checkpoint(project)["current_step"] != "plan"


def test_an_agent_is_refused_accept_lint_in_both_forms(run_cli, project) -> None:
    _start(run_cli, project, _plan("true"))
    for env in ({"CLAUDECODE": "1"}, {}):
        refused = run_cli("sprint", "done", "plan", "--plan", "plan.md", "--accept-lint",
                          "trust me", env=env)
        assert refused.returncode == 2
        assert "recording a plan with lint errors (--accept-lint) is a person's decision" in \
            refused.stderr
        assert "`/clavain:sprint --accept-lint plan.md REASON`" in refused.stderr
    slash = run_cli("sprint", "start", "--stdin", input="--accept-lint plan.md trust me")
    assert slash.returncode == 2 and "is a person's decision" in slash.stderr
    checkpoint = _checkpoint(project)
    assert checkpoint["current_step"] == "plan" and "plan_lint" not in checkpoint
    # The hook refuses the words before the CLI runs, as it does `--waive`.
    assert person_only("clavain sprint done plan --plan plan.md --accept-lint 'trust me'")
    assert person_only("clavain sprint done plan --plan plan.md") is None


def test_a_person_accepts_recorded_in_the_checkpoint_and_summary(run_cli, project) -> None:
    _start(run_cli, project, _plan("true"))
    done = run_cli("sprint", "done", "plan", "--plan", "plan.md", "--accept-lint",
                   "checked by hand on staging", person=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "lint findings ACCEPTED (checked by hand on staging)" in done.stdout
    assert run_cli("graph", "show", "task-a").returncode == 0  # recorded in the sprint's graph
    accepted = _checkpoint(project)["plan_lint"]
    assert [f["code"] for f in accepted["accepted"]] == ["verify_always_passes"]
    assert accepted["reason"] == "checked by hand on staging"
    assert accepted["decided_by"]["by"] == "person"
    assert accepted["decided_by"]["via"] == "terminal"
    summary = run_cli("sprint", "summary").stdout
    lines = [line for line in summary.splitlines() if "Plan lint ACCEPTED" in line]
    assert len(lines) == 1 and "checked by hand on staging" in lines[0]
    assert "by a person at /dev/" in lines[0]


@pytest.mark.parametrize("command", [
    "clavain sprint done plan --plan p.md --accept-li''nt x",
    "x=--accept-lint; clavain sprint done plan --plan p.md $x y",
    "env -u CLAUDECODE clavain sprint done plan --plan p.md --accept-lint x",
    "bash -c 'clavain graph import --from beads b.jsonl --accept-lint x'",
    "CLAUDECODE= clavain graph import b.json --accept-lint=x",
    'eval "clavain graph import b.json --accept-lint x"',
])
def test_a_hurried_agents_spellings_are_refused_by_the_hook(command: str) -> None:
    assert person_only(command), command


def test_everyday_commands_and_reads_stay_open() -> None:
    for command in ("clavain graph import b.json", "clavain plan lint p.md",
                    "cat .clavain/checkpoint.json", "clavain sprint done plan --plan p.md"):
        assert person_only(command) is None, command


def test_below_the_host_with_its_variables_emptied_the_cli_still_refuses(
        run_cli, project: Path, tmp_path: Path) -> None:
    """The hook aside: the CLI itself, run as a Bash tool call runs it (a `claude` ancestor),
    with CLAUDECODE and the session variables emptied, refuses both front doors."""
    _start(run_cli, project, _plan("true"))
    (project / "b.json").write_text(json.dumps({"nodes": [
        {"id": "t-b", "type": "task", "verify": ["true"]}]}))
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("CLAUDE", "CLAVAIN_"))}
    env.update(CLAUDECODE="", PYTHONPATH=str(REPO / "lib"))
    for argv in (["sprint", "done", "plan", "--plan", "plan.md", "--accept-lint", "x"],
                 ["graph", "import", "b.json", "--accept-lint", "x"]):
        refused = run_below_host([str(REPO / "bin" / "clavain"), *argv], cwd=project,
                                 env=env, tmp=tmp_path)
        assert refused.returncode != 0 and "is a person's decision" in refused.stderr, \
            refused.stderr
    assert "plan_lint" not in _checkpoint(project)
    assert run_cli("graph", "show", "t-b").returncode != 0  # nothing imported
