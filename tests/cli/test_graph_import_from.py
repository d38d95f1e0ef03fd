"""`clavain graph import [--from FORMAT] FILE`: each tracker's file becomes a graph whose nodes
keep their origin; importing again updates rather than duplicates; a bad file, an unknown format
or a lint error is one line (or one per finding) and nothing is written; `--accept-lint` is a
person's decision."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clavain import cli
from clavain.plans import findings as plan_findings
from clavain.plans import lint

pytestmark = pytest.mark.usefixtures("backend")

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "imports"


def _write(project: Path, name: str, specs: list[dict[str, Any]]) -> str:
    (project / name).write_text(json.dumps({"nodes": specs}))
    return name


def _spec(number: int, title: str = "", *, deps: tuple[int, ...] = (),
          status: str | None = None) -> dict[str, Any]:
    origin = {"format": "beads", "source_id": f"bd-{number}",
              **({"status": status} if status else {})}
    return {"id": f"bd-{number}", "type": "task", "title": title or f"bead {number}",
            "dependsOn": [f"bd-{d}" for d in deps], "verify": [f"test -f f{number}.txt"],
            "ownership": [f"f{number}.txt"], "origin": origin}


def _nodes(cli_json) -> list[tuple[Any, ...]]:
    return [(n["id"], n["status"], n["title"], n["depends_on"], n["origin"])
            for n in cli_json("graph", "ls")]


def _sample(fmt: str) -> Path:
    found = sorted(SAMPLES.glob(f"{fmt}*")) if SAMPLES.is_dir() else []
    if not found:
        pytest.fail(f"no sample of {fmt} in {SAMPLES} (plans/import_formats' samples)")
    return found[0]


@pytest.mark.parametrize("fmt", ["github", "markdown", "beads", "taskmaster"])
def test_each_format_imports_once_with_its_origin_and_dependencies(run_cli, cli_json,
                                                                   fmt: str) -> None:
    sample = _sample(fmt)
    first = cli_json("graph", "import", "--from", fmt, str(sample))
    assert first["added"] and first["updated"] == {}
    shown = _nodes(cli_json)
    assert all(origin and origin["format"] == fmt and origin["source_id"]
               for _, _, _, _, origin in shown)
    assert any(deps for _, _, _, deps, _ in shown), "the sample's dependencies are kept"
    again = cli_json("graph", "import", "--from", fmt, str(sample))
    assert (again["added"], again["updated"], again["done"]) == ([], {}, [])
    assert _nodes(cli_json) == shown


def test_reimport_updates_refuses_a_started_change_and_closes_done_items(
        run_cli, cli_json, project: Path) -> None:
    name = _write(project, "beads.json", [_spec(1), _spec(2, deps=(1,)), _spec(3, deps=(2,))])
    result = run_cli("graph", "import", name)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "added 3 node(s) to graph default\n"
    result = run_cli("graph", "import", name)
    assert result.stdout == ("added 0 node(s) to graph default\n"
                             "unchanged: 3 node(s): bd-1, bd-2, bd-3\n")
    _write(project, name, [_spec(1, "bead one, renamed"), _spec(2, deps=(1,)),
                           _spec(3, deps=(2,), status="closed")])
    result = run_cli("graph", "import", name)
    assert result.stdout == ("added 0 node(s) to graph default\n"
                             "updated: 1 node(s): bd-1\n"
                             "unchanged: 1 node(s): bd-2\n"
                             "done at its source: 1 node(s): bd-3\n")
    show = run_cli("graph", "show", "bd-3").stdout
    assert "status:         done" in show and '"source_id": "bd-3"' in show
    assert cli_json("graph", "claim", "bd-1")["node"]["id"] == "bd-1"
    before = _nodes(cli_json)
    _write(project, name, [_spec(1, "renamed again"), _spec(2, "also renamed", deps=(1,))])
    result = run_cli("graph", "import", name)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [
        "clavain: error: node 'bd-1' already started, and the import changes it (title); a "
        "started node keeps its definition: give the item a new id, or `clavain graph reset` "
        "the node first if it must run again"]
    assert _nodes(cli_json) == before


def test_an_id_held_by_a_node_not_imported_is_refused_by_name(run_cli, cli_json,
                                                              project: Path) -> None:
    assert run_cli("graph", "add", "--id", "bd-2", "--type", "task").returncode == 0
    result = run_cli("graph", "import", _write(project, "b.json", [_spec(1), _spec(2)]))
    assert result.returncode == 2
    assert result.stderr == ("clavain: error: node 'bd-2' already exists in graph 'default' and "
                             "was not imported (this one is beads item 'bd-2'); pick another "
                             "id\n")
    assert [n["id"] for n in cli_json("graph", "ls")] == ["bd-2"]


@pytest.mark.parametrize(("args", "content", "expected"), [
    (("graph", "import", "--from", "beads", "missing.jsonl"), None,
     "clavain: error: cannot read missing.jsonl: No such file or directory"),
    (("graph", "import", "nodes.json"), "{not json",
     "clavain: error: nodes.json"),
    (("graph", "import", "--from", "jira", "nodes.json"), "{}",
     "clavain: error: unknown import format 'jira' (formats: github, markdown, beads, "
     "taskmaster)"),
])
def test_a_bad_file_or_format_is_one_line_and_writes_nothing(run_cli, project: Path,
                                                             args: tuple, content: str | None,
                                                             expected: str) -> None:
    if content is not None:
        (project / args[-1]).write_text(content)
    result = run_cli(*args)
    assert result.returncode == 2 and result.stdout == ""
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith(expected)
    assert not (project / ".clavain").exists()


def _error(*_: Any, **__: Any) -> list[plan_findings.Finding]:
    return [plan_findings.Finding(plan_findings.ERROR, "verify_always_passes", "bd-1",
                         "bd-1: verify `true` always passes"),
            plan_findings.Finding(plan_findings.WARNING, "ownership_matches_nothing", "bd-1",
                         "bd-1: ownership f1.txt matches no file")]


def test_a_lint_error_refuses_the_import_and_writes_nothing(project: Path, monkeypatch,
                                                            capsys) -> None:
    monkeypatch.setattr(lint, "lint_specs", _error)
    name = _write(project, "b.json", [_spec(1)])
    assert cli.main(["graph", "import", name]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[1:] == ["error: bd-1: verify `true` always passes",
                       "warning: bd-1: ownership f1.txt matches no file"]
    assert err[0] == ("clavain: error: b.json: 1 lint error(s); nothing was imported (a person "
                      "may accept them: `clavain graph import b.json --accept-lint REASON`):")
    assert not (project / ".clavain").exists()


def test_lint_warnings_print_and_the_import_goes_on(project: Path, monkeypatch,
                                                     capsys) -> None:
    monkeypatch.setattr(lint, "lint_specs", lambda *a, **k: _error()[1:])
    assert cli.main(["graph", "import", _write(project, "b.json", [_spec(1)])]) == 0
    out, err = capsys.readouterr()
    assert out == "added 1 node(s) to graph default\n"
    assert err == "warning: bd-1: ownership f1.txt matches no file\n"


def test_accept_lint_from_an_agent_is_refused_saying_what_the_person_runs(
        run_cli, project: Path) -> None:
    result = run_cli("graph", "import", _write(project, "b.json", [_spec(1)]),
                     "--accept-lint", "known")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (
        "clavain: error: accepting a plan's lint findings (--accept-lint) is a person's "
        "decision, not an agent's: the user runs `clavain graph import b.json --accept-lint "
        "REASON` in a terminal\n")
    assert not (project / ".clavain").exists()


def test_a_persons_acceptance_is_recorded_on_the_graph(run_cli, cli_json,
                                                       project: Path) -> None:
    result = run_cli("graph", "import", _write(project, "b.json", [_spec(1)]),
                     "--accept-lint", "checked by hand", person=True)
    assert result.returncode == 0, result.stderr
    assert "lint findings accepted: checked by hand" in result.stdout
    record = json.loads(cli_json("kv", "get", "--run", "--key", "import.lint_accepted")["value"])
    assert record["reason"] == "checked by hand" and record["source"] == "b.json"
    assert record["decided_by"]["by"] == "person"
    assert record["decided_by"]["via"] == "terminal"
