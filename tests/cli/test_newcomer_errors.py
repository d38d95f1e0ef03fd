"""What a newcomer trips over first, each one clear line with the right exit code: a missing
`claude` for the plugin install, a `db migrate --to` into a folder that is not there, a
mistyped `--graph`, a config file that is not text, input that is not UTF-8, a parallel run
outside git; `report --run` and `budget status --run` of a loop run; and a clean first
`doctor` on a fresh clone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.checks import PASSES
from tests.conftest import BIN, REPO
from tests.supervisor import kit

PLAN = json.dumps({"nodes": [{"id": "task-a", "type": "task", "verify": [PASSES]}]})
STATUS_BLOCK = ("---CLAVAIN_STATUS---\nTASK_COMPLETED: none\nSTATUS: IN_PROGRESS\n"
                "FILES_MODIFIED: 0\nTESTS_STATUS: FAILING\nEXIT_SIGNAL: false\n"
                "NEXT_RECOMMENDATION: keep going\n---END_CLAVAIN_STATUS---\n")
# What the session and the CI machine may set that a newcomer's shell does not have.
SESSION_VARIABLES = ("CLAUDE_PLUGIN_ROOT", "CLAUDE_PLUGIN_DATA", "CLAVAIN_PLUGIN_DATA",
                     "CLAVAIN_CLAUDE_BIN", "CLAUDE_CODE_EXECPATH", "CLAUDE_CONFIG_DIR")


def _one_line(result: subprocess.CompletedProcess[str], code: int, *words: str) -> str:
    assert result.returncode == code, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("clavain: error: "), \
        result.stderr
    for word in words:
        assert word in result.stderr, result.stderr
    return result.stderr


def test_install_plugin_without_claude_says_what_to_install(tmp_path: Path) -> None:
    export = tmp_path / "export"
    result = subprocess.run([str(REPO / "scripts" / "install-plugin.sh")], cwd=REPO,
                            capture_output=True, text=True, timeout=120,
                            stdin=subprocess.DEVNULL,
                            env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin",
                                 "CLAVAIN_PLUGIN_EXPORT": str(export)})
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1 and "install Claude Code" in result.stderr
    assert "command not found" not in result.stderr and result.stdout == ""
    assert not export.exists()  # checked before anything was exported


def test_db_migrate_refuses_a_missing_folder(project: Path, run_cli, tmp_path: Path) -> None:
    target = tmp_path / "nowhere" / "deeper" / "x.sqlite"
    _one_line(run_cli("db", "migrate", "--to", str(target)), 2, str(target.parent),
              "does not exist")
    assert not (tmp_path / "nowhere").exists()
    copied = run_cli("db", "migrate", "--to", str(tmp_path / "x.sqlite"))
    assert copied.returncode == 0, copied.stderr


def test_a_mistyped_graph_is_refused_with_the_known_ones(project: Path, run_cli) -> None:
    assert run_cli("graph", "import", "-", "--graph", "release", input=PLAN).returncode == 0
    for args in (("graph", "ls"), ("graph", "next"), ("graph", "show", "task-a"),
                 ("graph", "mermaid"), ("graph", "reset", "task-a"), ("graph", "scaffold")):
        _one_line(run_cli(*args, "--graph", "relase"), 2, "no such graph 'relase'", "release")
    listed = run_cli("graph", "ls", "--graph", "release")
    assert listed.returncode == 0 and "task-a" in listed.stdout
    # Naming a new graph where work is added still makes it.
    assert run_cli("graph", "import", "-", "--graph", "other", input=PLAN).returncode == 0


def test_a_config_that_is_not_text_is_refused_by_budget_status_and_report(
        project: Path, run_cli) -> None:
    (project / ".clavain").mkdir()
    (project / ".clavain" / "config.json").write_bytes(b'{"budgets": {"bash\xff": 1}}')
    for args in (("budget", "status"), ("report",)):
        line = _one_line(run_cli(*args), 2, "config.json: not UTF-8 text",
                         "fix or remove the file")
        assert "UnicodeDecodeError" not in line and "codec" not in line
    as_json = run_cli("budget", "status", "--json")  # the error as --json gives every error
    assert as_json.returncode == 2
    assert "not UTF-8 text" in json.loads(as_json.stdout)["error"]


def test_status_blocks_and_verdicts_that_are_not_utf8_are_refused(project: Path, run_cli,
                                                                   tmp_path: Path) -> None:
    block = tmp_path / "status.txt"
    block.write_bytes(b"caf\xe9\n" + STATUS_BLOCK.encode())
    _one_line(run_cli("loop", "parse-status", str(block)), 2, "not UTF-8 text")
    verdict = tmp_path / "verdict.md"
    verdict.write_bytes(b"R\xe9sum\xe9\n\nVERDICT: CLEAN\nSUMMARY: fine\n")
    _one_line(run_cli("verdicts", "parse", str(verdict)), 2, "not UTF-8 text")
    block.write_text(STATUS_BLOCK)  # the same block as text still parses
    assert run_cli("loop", "parse-status", str(block)).returncode == 0


def test_a_parallel_run_outside_git_is_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "not-a-repo"
    folder.mkdir()
    env = {**os.environ, "CLAVAIN_PROJECT_DIR": str(folder), "CLAVAIN_PYTHON": sys.executable}

    def clavain(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(BIN / "clavain"), *args], cwd=folder, env=env, input=stdin,
                              capture_output=True, text=True, timeout=120)

    assert clavain("graph", "import", "-", stdin=PLAN).returncode == 0
    line = _one_line(clavain("run", "--workers", "2", "--runner", "shell"), 2,
                     "is not a git repository", "use one worker")
    assert "fatal:" not in line and "git status" not in line


def test_report_and_budget_status_of_a_loop_run(tmp_path: Path) -> None:
    runner = kit.script(tmp_path / "idle.py", f"""
        import sys
        sys.stdin.read()
        print({STATUS_BLOCK!r})
    """)
    state = kit.make_project(tmp_path / "p", {
        "runners": {"idle": {"command": [str(runner)]}},
        "checks": [{"id": "tests", "cmd": "false"}]})

    def clavain(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(BIN / "clavain"), *args], cwd=state.project,
                              env=kit.cli_env(state), capture_output=True, text=True,
                              timeout=120)

    ran = clavain("loop", "--runner", "idle", "--run-id", "loop-demo", "--max-iterations", "1")
    assert (state.runs / "loop-demo" / "loop.json").is_file(), ran.stderr
    report = clavain("report", "--run", "loop-demo")
    assert report.returncode == 0, report.stderr
    assert "run:loop-demo" in report.stdout and "Loop loop-demo:" in report.stdout
    assert "iterations: 1" in report.stdout
    data = json.loads(clavain("report", "--run", "loop-demo", "--json").stdout)
    assert data["run"] == "run:loop-demo" and data["loop_run"]["iterations"] == 1
    status = clavain("budget", "status", "--run", "loop-demo")
    assert status.returncode == 0, status.stderr
    assert status.stdout.startswith("Run run:loop-demo ") and "Bash commands" in status.stdout
    missing = clavain("budget", "status", "--run", "no-such-run")
    assert missing.returncode == 2 and "no budget run 'no-such-run'" in missing.stderr


def _newcomer_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in SESSION_VARIABLES}
    env.update({"HOME": str(tmp_path / "home"), "XDG_CACHE_HOME": str(tmp_path / "cache"),
                "PATH": "/usr/bin:/bin", "CLAVAIN_PYTHON": sys.executable, **extra})
    return env


def test_the_first_doctor_on_a_fresh_clone_is_clean(tmp_path: Path) -> None:
    """README's set-up command: the clone's own doctor, outside a session, no `.clavain/`, no
    claude: every row ok."""
    clone = tmp_path / "clone"
    clone.mkdir()
    subprocess.run(["git", "init", "-q", str(clone)], check=True)
    env = _newcomer_env(tmp_path)
    env.pop("CLAVAIN_PROJECT_DIR", None)
    result = subprocess.run([str(BIN / "clavain"), "doctor", "--json"], cwd=clone, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    rows = {row["check"]: row for row in json.loads(result.stdout)["checks"]}
    assert [name for name, row in rows.items() if row["status"] != "ok"] == [], rows
    root = rows["plugin_root"]
    assert root["install"] == "clone" and "a clone" in root["detail"]
    assert "Claude Code" in rows["claude"]["detail"]
    assert not (clone / ".clavain").exists()  # doctor only looks
    # A CLAVAIN_CLAUDE_BIN that points nowhere is the row's one thing to fix.
    env["CLAVAIN_CLAUDE_BIN"] = str(tmp_path / "no-claude")
    rows = {row["check"]: row for row in json.loads(subprocess.run(
        [str(BIN / "clavain"), "doctor", "--json"], cwd=clone, env=env, capture_output=True,
        text=True, timeout=120).stdout)["checks"]}
    assert rows["claude"]["status"] == "warn"
    assert "CLAVAIN_CLAUDE_BIN" in rows["claude"]["detail"]
