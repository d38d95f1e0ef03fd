import json
from pathlib import Path

import pytest

NODES = {"nodes": [
    {"id": "task-a", "type": "task", "title": "the task"},
    {"id": "verify-ok", "type": "verify", "dependsOn": ["task-a"],
     "verify": ["echo checking", "test -d .git"]},
    {"id": "verify-bad", "type": "verify", "verify": ["true", "echo nope >&2; exit 4"]},
]}


@pytest.fixture
def graph(run_cli, project: Path) -> Path:
    result = run_cli("graph", "import", "-", input=json.dumps(NODES))
    assert result.returncode == 0, result.stderr
    return project


def _result(stdout: str) -> dict:
    last = stdout.strip().splitlines()[-1]
    assert last.startswith("<result>") and last.endswith("</result>")
    return json.loads(last.removeprefix("<result>").removesuffix("</result>"))


def test_success_without_apply_prints_the_result_last(graph, run_cli, cli_json) -> None:
    result = run_cli("verify", "verify-ok", "--no-apply")
    assert result.returncode == 0, result.stderr
    assert _result(result.stdout)["status"] == "success"
    assert cli_json("graph", "show", "verify-ok")["status"] == "open"


def test_failure_names_the_command_and_exits_1(graph, run_cli) -> None:
    result = run_cli("verify", "verify-bad", "--no-apply")
    assert result.returncode == 1
    verdict = _result(result.stdout)
    assert verdict["status"] == "fail"
    assert "echo nope >&2; exit 4" in verdict["errors"][0] and "nope" in verdict["errors"][0]


def test_apply_records_the_result(graph, run_cli, cli_json) -> None:
    waiting = run_cli("verify", "verify-ok")
    assert waiting.returncode == 2 and "'verify-ok' waits on task-a" in waiting.stderr
    run_cli("graph", "apply", "task-a", "--result", "-", input='{"status":"success",'
            '"summary":"ok"}')
    report = cli_json("verify", "verify-ok")
    assert report["applied"] is True and report["apply"]["to"] == "done"
    assert Path(report["result_path"]).is_file()
    assert cli_json("graph", "show", "verify-ok")["status"] == "done"
    summary = cli_json("kv", "get", "--node", "verify-ok", "--key", "out.summary")
    assert summary["value"] == "all 2 verify commands passed"


def test_timeout_flag(graph, run_cli) -> None:
    run_cli("graph", "add", "--id", "verify-slow", "--type", "verify", "--verify", "sleep 300")
    result = run_cli("verify", "verify-slow", "--no-apply", "--timeout", "1")
    assert result.returncode == 1
    assert "timed out after 1s" in _result(result.stdout)["summary"]


def test_bad_input_is_one_line_and_writes_nothing(graph, run_cli, project) -> None:
    unknown = run_cli("verify", "nope")
    assert unknown.returncode == 2
    assert unknown.stderr.strip() == (
        "clavain: error: unknown node 'nope'; `clavain graph ls` lists the nodes")
    task = run_cli("verify", "task-a", "--json")
    assert task.returncode == 2
    assert "only verify and final_verify nodes" in json.loads(task.stdout)["error"]
    assert not (project / ".clavain" / "runs").exists() or not any(
        (project / ".clavain" / "runs").iterdir())
    assert run_cli("verify", "verify-ok", "--timeout", "0").returncode == 2
