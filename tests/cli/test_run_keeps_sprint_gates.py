"""`clavain run` on the active sprint's graph never passes a gate before execute: a complexity-4
sprint whose plan is recorded but not reviewed is refused, naming the step and what the person
types; nothing is claimed. Once the sprint reaches execute, the same run goes ahead."""

from __future__ import annotations

import json
from pathlib import Path

PLAN = """# Plan

```json
{"nodes": [{"id": "task-a", "type": "task", "title": "write a.txt",
            "verify": ["test -f a.txt"], "ownership": ["a.txt"],
            "commands": ["echo a > a.txt"]}]}
```
"""


def _nodes(cli_json) -> dict[str, str]:
    return {node["id"]: node["status"] for node in cli_json("graph", "ls")}


def test_run_before_plan_review_is_refused_and_claims_nothing(run_cli, cli_json,
                                                              project: Path) -> None:
    started = cli_json("sprint", "start", "--complexity", "4", "rewrite the billing service")
    for step in ("brainstorm", "strategy"):
        assert run_cli("sprint", "done", step).returncode == 0
    (project / "plan.md").write_text(PLAN)
    assert run_cli("sprint", "done", "plan", "--plan", "plan.md").returncode == 0
    before = _nodes(cli_json)
    refused = run_cli("run", "--runner", "shell")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    [line] = refused.stderr.splitlines()
    assert f"sprint {started['sprint_id']}'s, which is at step plan-review" in line
    assert "/clavain:sprint --waive plan-review REASON" in line
    assert _nodes(cli_json) == before and set(before.values()) == {"open"}
    assert not (project / "a.txt").exists()
    # The person passes the gate; the same command now runs the sprint's tasks.
    assert run_cli("sprint", "done", "plan-review", "--waive", "read it",
                   person=True).returncode == 0
    ran = run_cli("run", "--runner", "shell", "--json")
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["exit_code"] == 0
    assert (project / "a.txt").exists()


def test_run_before_the_plan_is_recorded_says_to_record_it(run_cli, cli_json) -> None:
    cli_json("sprint", "start", "fix the typo in the README heading")
    refused = run_cli("run", "--runner", "shell")
    assert refused.returncode == 2
    assert "at step plan, before execute" in refused.stderr
    assert "clavain sprint done plan --plan FILE" in refused.stderr


def test_a_graph_that_is_not_the_sprints_runs_as_before(run_cli, cli_json,
                                                        project: Path) -> None:
    cli_json("sprint", "start", "fix the typo in the README heading")
    (project / "other.json").write_text(json.dumps({"nodes": [
        {"id": "x", "type": "task", "verify": ["test -f x.txt"], "ownership": ["x.txt"],
         "commands": ["echo x > x.txt"]}]}))
    assert run_cli("graph", "import", "other.json", "--graph", "side").returncode == 0
    ran = run_cli("run", "--runner", "shell", "--graph", "side", "--json")
    assert ran.returncode == 0, ran.stderr


def test_the_loop_keeps_the_gate_too(run_cli, cli_json, project: Path) -> None:
    cli_json("sprint", "start", "--complexity", "4", "rewrite the billing service")
    for step in ("brainstorm", "strategy"):
        assert run_cli("sprint", "done", step).returncode == 0
    (project / "plan.md").write_text(PLAN)
    assert run_cli("sprint", "done", "plan", "--plan", "plan.md").returncode == 0
    offered = run_cli("iterate")
    assert offered.returncode == 2 and "at step plan-review, before execute" in offered.stderr
    agent = project / "agent.sh"
    agent.write_text("#!/bin/sh\necho a > a.txt\n")
    agent.chmod(0o755)
    (project / ".clavain" / "config.json").write_text(json.dumps(
        {"runners": {"agent": {"command": [str(agent)]}}}))
    looped = run_cli("loop", "--runner", "agent", "--max-iterations", "1")
    assert looped.returncode != 0 and "at step plan-review" in looped.stderr + looped.stdout
    assert not (project / "a.txt").exists()


def test_a_damaged_checkpoint_does_not_stop_a_graph_no_sprint_owns(run_cli,
                                                                  project: Path) -> None:
    (project / "g.json").write_text(json.dumps({"nodes": [
        {"id": "x", "type": "task", "verify": ["test -f x.txt"], "ownership": ["x.txt"],
         "commands": ["echo x > x.txt"]}]}))
    assert run_cli("graph", "import", "g.json").returncode == 0
    (project / ".clavain" / "checkpoint.json").write_text("[]")
    ran = run_cli("run", "--runner", "shell", "--graph", "default", "--json")
    assert ran.returncode == 0, ran.stderr
    refused = run_cli("run", "--runner", "shell", "--graph", "sprint-20261128T000000Z-abcdef")
    assert refused.returncode == 2 and "checkpoint.json" in refused.stderr
