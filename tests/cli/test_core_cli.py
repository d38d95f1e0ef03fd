import json
import subprocess
import sys
from pathlib import Path

import pytest

from clavain import __version__
from clavain.cli import build_parser


def test_version(run_cli) -> None:
    result = run_cli("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"clavain {__version__}"


def _command_paths(parser, prefix=()):
    """Every command path in the CLI, e.g. ('graph', 'add')."""
    for action in parser._actions:
        choices = getattr(action, "choices", None)
        if isinstance(choices, dict):
            for name, sub in choices.items():
                yield (*prefix, name)
                yield from _command_paths(sub, (*prefix, name))


def test_every_command_has_help(run_cli) -> None:
    paths = list(_command_paths(build_parser()))
    assert ("init",) in paths and ("doctor",) in paths
    for path in paths:
        result = run_cli(*path, "--help")
        assert result.returncode == 0, (path, result.stderr)
        assert "usage: clavain" in result.stdout


def test_no_command_prints_help(run_cli) -> None:
    result = run_cli()
    assert result.returncode == 0
    assert "COMMAND" in result.stdout


def test_unknown_command_exits_2(run_cli) -> None:
    result = run_cli("frobnicate")
    assert result.returncode == 2
    assert "invalid choice" in result.stderr


def test_init_creates_state_and_gitignore_once(run_cli, project: Path) -> None:
    (project / ".gitignore").write_text("node_modules/")  # no trailing newline on purpose
    first = run_cli("init", "--json")
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert report["created"] is True and report["gitignore_updated"] is True
    for folder in ("verdicts", "artifacts", "runs", "scratch", "logs"):
        assert (project / ".clavain" / folder).is_dir()
    assert report["gitignore"] == str(project / ".git" / "info" / "exclude")
    second = json.loads(run_cli("init", "--json").stdout)
    assert second["created"] is False and second["gitignore_updated"] is False
    # The person's .gitignore is left as it was: the ignores are this clone's own.
    assert (project / ".gitignore").read_text() == "node_modules/"
    text = (project / ".git" / "info" / "exclude").read_text()
    assert text.splitlines().count("/.clavain/state.sqlite") == 1
    # git really ignores the volatile parts but would still see a user's config.json.
    (project / ".clavain" / "state.sqlite").write_text("x")
    (project / ".clavain" / "verdicts" / "a.json").write_text("{}")
    (project / ".clavain" / "config.json").write_text("{}")
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"],
                            cwd=project, capture_output=True, text=True, check=True).stdout
    assert ".clavain/config.json" in status
    assert "state.sqlite" not in status and "verdicts" not in status


def test_init_adds_the_lines_an_older_init_did_not_write(run_cli, project: Path) -> None:
    from clavain.project import GITIGNORE_MARKER

    (project / ".gitignore").write_text(f"{GITIGNORE_MARKER}\n/.clavain/state.sqlite\n")
    report = json.loads(run_cli("init", "--json").stdout)
    assert report["gitignore_updated"] is True
    assert (project / ".gitignore").read_text() == f"{GITIGNORE_MARKER}\n/.clavain/state.sqlite\n"
    lines = (project / ".git" / "info" / "exclude").read_text().splitlines()
    assert "/.clavain/state.sqlite" not in lines and "/.clavain-worktrees/" in lines
    assert json.loads(run_cli("init", "--json").stdout)["gitignore_updated"] is False


def test_init_human_output(run_cli, project: Path) -> None:
    result = run_cli("init")
    assert result.returncode == 0
    assert f"created {project / '.clavain'}" in result.stdout


@pytest.mark.parametrize("extra_env", [{}, {"CLAUDE_PLUGIN_DATA": "/nonexistent/data"}])
def test_doctor_json_reports_every_check(run_cli, extra_env) -> None:
    result = run_cli("doctor", "--json", env=extra_env)
    report = json.loads(result.stdout)
    names = [row["check"] for row in report["checks"]]
    assert names == ["python", "venv", "dependencies", "claude", "plugin_root", "state_dir",
                     "authority", "config", "budgets", "schema", "database", "store", "sprint",
                     "git", "hook_cost", "state_links"]
    assert report["version"] == __version__
    assert result.returncode == (0 if report["healthy"] else 1)
    deps = next(row for row in report["checks"] if row["check"] == "dependencies")
    assert deps["status"] == "ok" and set(deps["versions"]) == {"pydantic", "jsonschema",
                                                               "filelock"}


def test_doctor_table_for_people(run_cli) -> None:
    result = run_cli("doctor")
    header = result.stdout.splitlines()[0].split()
    assert header == ["CHECK", "STATUS", "DETAIL"]


def test_doctor_reports_schema_after_db_exists(run_cli, project: Path) -> None:
    from clavain.store import db

    db.connect(project / ".clavain" / "state.sqlite").close()
    report = json.loads(run_cli("doctor", "--json").stdout)
    schema = next(row for row in report["checks"] if row["check"] == "schema")
    assert schema["version"] == db.latest_version() and schema["status"] == "ok"


def test_doctor_shows_what_the_budget_hook_costs(run_cli, project: Path) -> None:
    from clavain.guards import budget, policy
    from clavain.guards.commands import compile_patterns
    from clavain.store import db

    conn = db.connect(project / ".clavain" / "state.sqlite")
    limits, _ = policy.resolve({}, {})
    for index in range(20):
        call = budget.describe("Bash", {"command": f"ls {index}"}, compile_patterns([]))
        budget.check(conn, run_key="session:s", session_id="s", call=call, limits=limits,
                     problems=[])
        conn.execute("UPDATE budget_calls SET hook_ms = ? WHERE id = last_insert_rowid()",
                     (float(index + 1),))
    conn.close()
    report = json.loads(run_cli("doctor", "--json").stdout)
    row = next(row for row in report["checks"] if row["check"] == "hook_cost")
    assert (row["p50_ms"], row["p95_ms"], row["calls"]) == (11.0, 20.0, 20)
    assert "PreToolUse p50 11.0 ms, p95 20.0 ms over 20 calls" in row["detail"]


def test_missing_dependency_is_one_clear_line(monkeypatch, capsys) -> None:
    """Before the venv exists, a command needing pydantic says so instead of a traceback."""
    import argparse

    from clavain import cli

    def needs_pydantic(args: argparse.Namespace) -> int:
        raise ModuleNotFoundError("No module named 'pydantic'", name="pydantic")

    parser = argparse.ArgumentParser(prog="clavain")
    parser.set_defaults(handler=needs_pydantic, command="x")
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    assert cli.main([]) == 3
    err = capsys.readouterr().err
    assert err.startswith(f"clavain: error: {sys.executable} lacks the pydantic package: ")
    # From this checkout: the README's set-up line, the one thing to do.
    assert "python3 -m venv .venv && .venv/bin/pip install -e" in err


def test_other_missing_modules_are_real_bugs(monkeypatch) -> None:
    import argparse

    from clavain import cli

    def broken(args: argparse.Namespace) -> int:
        raise ModuleNotFoundError("No module named 'clavain.nope'", name="clavain.nope")

    parser = argparse.ArgumentParser(prog="clavain")
    parser.set_defaults(handler=broken, command="x")
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    with pytest.raises(ModuleNotFoundError):
        cli.main([])


def test_init_outside_git_creates_no_gitignore(run_cli, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    result = run_cli("init", "--json", env={"CLAVAIN_PROJECT_DIR": str(plain)}, cwd=plain)
    report = json.loads(result.stdout)
    assert report["created"] is True and report["gitignore_updated"] is False
    assert (plain / ".clavain").is_dir() and not (plain / ".gitignore").exists()
