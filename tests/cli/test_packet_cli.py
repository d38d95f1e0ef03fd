import json
from pathlib import Path

import pytest

NODES = {"nodes": [
    {"id": "plan-1", "type": "plan", "title": "the plan"},
    {"id": "task-a", "type": "task", "parent": "plan-1", "title": "Build it",
     "verify": ["pytest -q"]},
]}


@pytest.fixture
def graph(run_cli, project: Path) -> Path:
    result = run_cli("graph", "import", "-", input=json.dumps(NODES))
    assert result.returncode == 0, result.stderr
    run_cli("kv", "put", "--run", "--key", "ctx.plan", "--value", "PLAN-DRAFT " + "step " * 60)
    return project


def test_packet_prints_the_rendered_template(graph, run_cli) -> None:
    result = run_cli("graph", "packet", "task-a")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("# Clavain executor — node task-a")
    assert "Build it" in result.stdout and "PLAN-DRAFT" in result.stdout


def test_thin_packet_json(graph, cli_json) -> None:
    rendered = cli_json("graph", "packet", "task-a", "--thin")
    assert rendered["role"] == "executor" and rendered["context_omitted"] is True
    assert "PLAN-DRAFT" not in rendered["packet"]


def test_unknown_node(graph, run_cli) -> None:
    result = run_cli("graph", "packet", "nope")
    assert result.returncode == 2 and "unknown node 'nope'" in result.stderr
