"""`clavain plan lint FILE|-`: exit 0 clean, 1 with findings (one line each, errors first, then
a count), 2 on bad input (one line); `--json` for tools; stdin."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from clavain import cli

CLEAN = {"nodes": [{"id": "task-a", "type": "task", "title": "a",
                    "verify": ["test -f a.txt"], "ownership": ["a.txt"]}]}
DIRTY = {"nodes": [{"id": "task-a", "type": "task", "verify": ["pytets -q"],
                    "ownership": ["nowhere/*.py"]},
                   {"id": "task-b", "type": "task", "verify": ["true"], "ownership": ["b.txt"],
                    "dependsOn": ["task-zz"]}]}


def _markdown(document: dict) -> str:
    return f"# Plan\n\nThe approach.\n\n```json\n{json.dumps(document)}\n```\n"


def test_a_clean_plan_exits_0(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "plan.md").write_text(_markdown(CLEAN))
    (project / "graph.json").write_text(json.dumps(CLEAN))
    for name in ("plan.md", "graph.json"):
        assert cli.main(["plan", "lint", name]) == 0
        assert capsys.readouterr().out == "no findings\n"


def test_findings_are_one_line_each_errors_first_then_a_count(
        project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "plan.md").write_text(_markdown(DIRTY))
    assert cli.main(["plan", "lint", "plan.md"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0:2] for line in lines[:-1]] == [
        ["error", " task-a"], ["error", " task-b"], ["error", " task-b"], ["warning", " task-a"]]
    assert "runs 'pytets'" in lines[0] and "always passes" in lines[1]
    assert "'task-zz'" in lines[2] and "'nowhere/*.py'" in lines[3]
    assert lines[-1] == "3 error(s), 1 warning(s)"


def test_json_and_stdin(project: Path, capsys: pytest.CaptureFixture[str],
                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(DIRTY)))
    assert cli.main(["plan", "lint", "-", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert (report["errors"], report["warnings"]) == (3, 1)
    assert report["findings"][0] == {
        "severity": "error", "code": "verify_program_missing", "task": "task-a",
        "message": report["findings"][0]["message"]}
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(CLEAN)))
    assert cli.main(["plan", "lint", "-", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"findings": [], "errors": 0, "warnings": 0}


@pytest.mark.parametrize("content", [None, "# a plan without its block\n", "{not json",
                                     '{"nodes": "x"}', _markdown({"tasks": []}).replace(
                                         '"tasks"', '"nodes": 3, "x"')])
def test_bad_input_is_one_line_and_exit_2(project: Path, capsys: pytest.CaptureFixture[str],
                                          content: str | None) -> None:
    if content is not None:
        (project / "plan.md").write_text(content)
    assert cli.main(["plan", "lint", "plan.md"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("clavain: error: ") and captured.err.count("\n") == 1


def test_the_config_is_the_projects(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / ".clavain").mkdir()
    (project / ".clavain/config.json").write_text(json.dumps(
        {"plans": {"requireVerify": True, "maxTasks": 1}}))
    plan = {"nodes": [{**CLEAN["nodes"][0], "verify": []},
                      {**CLEAN["nodes"][0], "id": "task-b", "ownership": ["b.txt"]}]}
    (project / "plan.json").write_text(json.dumps(plan))
    assert cli.main(["plan", "lint", "plan.json", "--json"]) == 1
    codes = [f["code"] for f in json.loads(capsys.readouterr().out)["findings"]]
    assert codes == ["verify_missing", "too_many_tasks"]


def test_help_and_a_real_subprocess(run_cli, project: Path) -> None:
    done = run_cli("plan", "lint", "--help")
    assert done.returncode == 0 and "FILE" in done.stdout
    done = run_cli("plan", "lint", "-", input=json.dumps(CLEAN))
    assert (done.returncode, done.stdout) == (0, "no findings\n")
