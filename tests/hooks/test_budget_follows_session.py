"""Fresh starts give nothing back: a session's budget counts follow the session, not the sprint,
so abandoning a sprint and starting another keeps what was spent; a sprint's summary still finds
the run that worked on it; a command cannot leave its session's counts by emptying a variable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from clavain.paths import StatePaths
from clavain.sprint import lifecycle
from tests.person import run_below_host

from .conftest import REPO, payload_for

LIMIT = {"CLAVAIN_BUDGET_MAX_COMMANDS": "3"}


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    (project / ".clavain").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    return project


def _bash(run_hook, project: Path, command: str, session: str = "s1") -> dict | None:
    payload = {**payload_for("PreToolUse", project), "session_id": session,
               "hook_event_name": "PreToolUse", "tool_name": "Bash",
               "tool_input": {"command": command}}
    result = run_hook("PreToolUse", payload, cwd=project, env=LIMIT)
    assert result.returncode == 0 and result.stderr == ""
    return json.loads(result.stdout)["hookSpecificOutput"] if result.stdout else None


def _denied(output: dict | None) -> bool:
    return output is not None and output.get("permissionDecision") == "deny"


def test_abandoning_and_starting_again_gives_nothing_back(run_hook, tmp_path: Path) -> None:
    project = _project(tmp_path)
    state = StatePaths.discover(project)
    first = lifecycle.start(state, "add OAuth login", complexity=2)
    assert [_denied(_bash(run_hook, project, f"ls {i}")) for i in range(3)] == [False] * 3
    assert _denied(_bash(run_hook, project, "ls 3"))
    lifecycle.abandon(state)
    second = lifecycle.start(state, "add OAuth login", complexity=2)
    assert second["sprint_id"] != first["sprint_id"]
    # The same session, a new sprint: still spent.
    output = _bash(run_hook, project, "ls 4")
    assert _denied(output) and "Bash commands 3 of 3 used" in output["permissionDecisionReason"]
    # Another session on the same sprint has counts of its own.
    assert not _denied(_bash(run_hook, project, "ls 5", session="s2"))


def test_a_sprints_summary_finds_the_session_that_worked_on_it(run_hook,
                                                              tmp_path: Path) -> None:
    from clavain.sprint.summary import budget_report
    from clavain.store import db

    project = _project(tmp_path)
    state = StatePaths.discover(project)
    sprint = lifecycle.start(state, "add OAuth login", complexity=2)
    _bash(run_hook, project, "ls")
    _bash(run_hook, project, "ls -l")
    report = budget_report(state, sprint["sprint_id"])
    assert report is not None and report["run"] == "session:s1"
    assert report["budgets"][0]["used"] == 2
    conn = db.connect(state.db)
    try:
        rows = conn.execute("SELECT sprint_id, run_key FROM budget_sprints").fetchall()
    finally:
        conn.close()
    assert [tuple(row) for row in rows] == [(sprint["sprint_id"], "session:s1")]


def _cli(project: Path, *args: str, tmp: Path, session: str = "s1",
         inner: str = "", **host: str) -> subprocess.CompletedProcess[str]:
    """`clavain ARGS` as the agent's Bash tool runs it: below the host, in a shell the host
    started with the session's variable and `host` (`inner` is the agent's prefix, e.g. an
    emptied variable)."""
    env = {**os.environ, "CLAVAIN_PYTHON": sys.executable, "CLAUDE_CODE_SESSION_ID": session,
           "CLAVAIN_PROJECT_DIR": str(project), **host}
    command = f"{inner} {REPO / 'bin' / 'clavain'} " + " ".join(args) + "; exit $?"
    return run_below_host(["bash", "-c", command], cwd=project, env=env, tmp=tmp)


def test_an_emptied_session_variable_does_not_move_a_command_to_fresh_counts(
        run_hook, tmp_path: Path) -> None:
    project = _project(tmp_path)
    lifecycle.start(StatePaths.discover(project), "add OAuth login", complexity=2)
    for i in range(3):
        _bash(run_hook, project, f"ls {i}")
    for inner in ("", "CLAUDE_CODE_SESSION_ID=", "env -u CLAUDE_CODE_SESSION_ID",
                  "CLAUDE_CODE_SESSION_ID=other"):
        status = _cli(project, "budget", "status", "--json", tmp=tmp_path, inner=inner)
        assert status.returncode == 0, status.stderr
        report = json.loads(status.stdout)
        assert report["run"] == "session:s1", inner
        assert report["budgets"][0]["used"] == 3, inner


def test_a_terminal_without_a_session_sees_the_sprints_run(run_hook, tmp_path: Path) -> None:
    project = _project(tmp_path)
    sprint = lifecycle.start(StatePaths.discover(project), "add OAuth login", complexity=2)
    _bash(run_hook, project, "ls", session="s9")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAUDE")}
    status = subprocess.run([str(REPO / "bin" / "clavain"), "budget", "status", "--json"],
                            cwd=project, capture_output=True, text=True, timeout=60,
                            env={**env, "CLAVAIN_PYTHON": sys.executable})
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["run"] == "session:s9"
    named = subprocess.run([str(REPO / "bin" / "clavain"), "budget", "status", "--json",
                            "--run", f"sprint:{sprint['sprint_id']}"], cwd=project,
                           capture_output=True, text=True, timeout=60,
                           env={**env, "CLAVAIN_PYTHON": sys.executable})
    assert json.loads(named.stdout)["run"] == "session:s9"


def test_a_variable_in_front_of_the_command_raises_no_limit(run_hook, tmp_path: Path) -> None:
    project = _project(tmp_path)
    # One node per attempt: a refused verify waits out its retry backoff.
    nodes = {"nodes": [{"id": f"verify-{i}", "type": "verify", "verify": ["pytest -q"]}
                       for i in range(3)]}
    (project / "pytest").write_text("#!/bin/sh\ntouch ran\n")
    (project / "pytest").chmod(0o755)
    env = {**os.environ, "CLAVAIN_PYTHON": sys.executable, "CLAVAIN_PROJECT_DIR": str(project)}
    imported = subprocess.run([str(REPO / "bin" / "clavain"), "graph", "import", "-"],
                              input=json.dumps(nodes), cwd=project, env=env, text=True,
                              capture_output=True, timeout=60)
    assert imported.returncode == 0, imported.stderr
    host = {"CLAVAIN_BUDGET_MAX_TEST_RUNS": "0", "CLAVAIN_BUDGET_MAX_COMMANDS": "3",
            "PATH": f"{project}:{os.environ['PATH']}"}
    for i, inner in enumerate(("CLAVAIN_BUDGET_MAX_TEST_RUNS=99",
                               "env -u CLAVAIN_BUDGET_MAX_TEST_RUNS",
                               "env -i PATH=\"$PATH\" CLAVAIN_PYTHON=\"$CLAVAIN_PYTHON\"")):
        verify = _cli(project, "verify", f"verify-{i}", tmp=tmp_path, inner=inner, **host)
        assert "test runs are set to 0" in verify.stdout + verify.stderr, inner
        assert not (project / "ran").exists(), inner
        status = _cli(project, "budget", "status", "--json", tmp=tmp_path,
                      inner="CLAVAIN_BUDGET_MAX_COMMANDS=99", **host)
        limits = {b["budget"]: b["limit"] for b in json.loads(status.stdout)["budgets"]}
        assert limits["Bash commands"] == 3 and limits["Test runs"] == 0, limits
