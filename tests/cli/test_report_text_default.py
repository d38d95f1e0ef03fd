"""Text `clavain report` with no option shows what `report --html` shows: the active sprint,
else what ran last — never "Run session (none counted yet)" with zeros after a `clavain run`."""

from __future__ import annotations

import json
from pathlib import Path


def test_text_report_after_a_run_that_counted_nothing_shows_that_run(run_cli,
                                                                    project: Path) -> None:
    (project / "g.json").write_text(json.dumps({"nodes": [
        {"id": "a", "type": "task", "verify": ["test -f a.txt"], "ownership": ["a.txt"],
         "commands": ["echo a > a.txt"]}]}))
    assert run_cli("graph", "import", "g.json").returncode == 0
    ran = run_cli("run", "--runner", "shell", "--json")
    assert ran.returncode == 0, ran.stderr
    run_id = json.loads(ran.stdout)["run_id"]
    report = run_cli("report")
    assert report.returncode == 0, report.stderr
    assert report.stdout.splitlines()[0].startswith(f"# Run run:{run_id} ")
    assert "none counted yet" not in report.stdout


def test_text_report_during_a_sprint_shows_the_sprint(run_cli, cli_json) -> None:
    started = cli_json("sprint", "start", "fix the typo in the README heading")
    report = run_cli("report")
    assert report.returncode == 0, report.stderr
    assert report.stdout.splitlines()[0].startswith(f"# Run sprint:{started['sprint_id']} ")


def test_text_report_during_a_sprint_adds_the_runs_of_its_graph(run_cli, cli_json,
                                                                project: Path) -> None:
    """What the page shows for a sprint: its own budgets and the `clavain run`s of its graph."""
    started = cli_json("sprint", "start", "fix the typo in the README heading")
    (project / "plan.md").write_text("""# Plan

```json
{"nodes": [{"id": "task-a", "type": "task", "title": "write a.txt",
            "verify": ["test -f a.txt"], "ownership": ["a.txt"],
            "commands": ["echo a > a.txt"]}]}
```
""")
    assert run_cli("sprint", "done", "plan", "--plan", "plan.md").returncode == 0
    ran = run_cli("run", "--runner", "shell", "--json")
    assert ran.returncode == 0, ran.stderr
    run_id = json.loads(ran.stdout)["run_id"]
    report = run_cli("report")
    assert report.returncode == 0, report.stderr
    assert report.stdout.splitlines()[0].startswith(f"# Run sprint:{started['sprint_id']} ")
    assert run_id in report.stdout
    as_json = json.loads(run_cli("report", "--json").stdout)
    assert [run["run_id"] for run in as_json["graph_runs"]] == [run_id]
