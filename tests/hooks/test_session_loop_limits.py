"""`/clavain:loop` and the loop's limits that outlive a run: the task's circuit breaker is where
the last loop of that task left it (open stays open until a person closes it), and every
iteration a session loops counts against the project's calls-per-hour window."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from .conftest import REPO
from .test_session_loop import EXISTS, SESSION, _project, _state, _stop, block


def _typed(run_hook, project: Path, typed: str, session: str = SESSION
           ) -> subprocess.CompletedProcess[str]:
    """Type `/clavain:loop TYPED` in `session` (the hook records it; the `!` line runs below
    the host), whatever comes of it."""
    from tests.person import run_below_host

    submitted = run_hook("UserPromptSubmit", {
        "session_id": session, "cwd": str(project), "hook_event_name": "UserPromptSubmit",
        "transcript_path": str(project / "t.jsonl"), "prompt": f"/clavain:loop {typed}"},
        cwd=project)
    assert submitted.returncode == 0, submitted.stderr
    env = dict(os.environ, CLAVAIN_PYTHON=sys.executable, CLAUDE_CODE_SESSION_ID=session,
               CLAVAIN_BOOTSTRAP="0")
    env.pop("CLAVAIN_PROJECT_DIR", None)
    return run_below_host([str(REPO / "bin" / "clavain"), "loop", "session-start",
                           "--from-prompt"], cwd=project, env=env, tmp=project.parent)


def _agent(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The session's agent running a `clavain` command from its Bash tool."""
    from tests.person import run_below_host

    env = dict(os.environ, CLAVAIN_PYTHON=sys.executable, CLAUDE_CODE_SESSION_ID=SESSION,
               CLAVAIN_BOOTSTRAP="0")
    env.pop("CLAVAIN_PROJECT_DIR", None)
    return run_below_host([str(REPO / "bin" / "clavain"), *args], cwd=project, env=env,
                          tmp=project.parent)


def _open_the_breaker(run_hook, project: Path, task: str) -> tuple[str, str]:
    """(the run id, its breaker's file)."""
    started = _typed(run_hook, project, task)
    assert started.returncode == 0, started.stderr
    run_id, breaker = _state(project)["run_id"], _state(project)["breaker"]
    _stop(run_hook, project, block(files=1), active=False)  # the agent's word alone
    _stop(run_hook, project, block(files=1))
    ended = _stop(run_hook, project, block(files=1))
    assert "circuit breaker open: 3 iterations in a row with no progress" in \
        ended["systemMessage"]
    assert _state(project) is None
    return run_id, breaker


def test_a_new_loop_of_the_same_task_finds_its_breaker_open(run_hook, tmp_path: Path) -> None:
    project = _project(tmp_path, EXISTS)
    first, breaker = _open_the_breaker(run_hook, project, "make done.txt")
    assert json.loads(Path(breaker).read_text())["state"] == "OPEN"
    again = _typed(run_hook, project, "make   done.txt")  # the same task, spaced otherwise
    assert again.returncode == 2 and _state(project) is None
    assert "circuit breaker open" in again.stderr
    assert f"/clavain:loop --reset-circuit {first}" in again.stderr
    other = _typed(run_hook, project, "write the changelog")  # another task: its own breaker
    assert other.returncode == 0, other.stderr
    assert _state(project)["breaker"] != breaker
    assert _stop(run_hook, project, block(), active=False)["decision"] == "block"
    cancelled = _typed(run_hook, project, "--cancel")
    assert cancelled.returncode == 0, cancelled.stderr
    # The agent cannot close it from its Bash tool; the person's slash command can.
    refused = _agent(project, "loop", "--reset-circuit", "--run", first)
    assert refused.returncode == 2 and "/clavain:loop --reset-circuit" in refused.stderr
    closed = _typed(run_hook, project, f"--reset-circuit {first}")
    assert closed.returncode == 0, closed.stderr
    assert "circuit CLOSED" in closed.stdout
    assert json.loads(Path(breaker).read_text())["state"] == "CLOSED"
    assert _typed(run_hook, project, "make done.txt").returncode == 0


def test_every_iteration_of_a_session_counts_against_the_project_window(
        run_hook, tmp_path: Path) -> None:
    project = _project(tmp_path, EXISTS, callsPerHour=2)
    assert _typed(run_hook, project, "make done.txt").returncode == 0  # call 1
    (project / "one.txt").write_text("1")
    assert _stop(run_hook, project, block(), active=False)["decision"] == "block"  # call 2
    run_id = _state(project)["run_id"]
    (project / "two.txt").write_text("2")
    ended = _stop(run_hook, project, block())
    assert "decision" not in ended and _state(project) is None
    assert "calls per hour: 2 loop call(s) in this project in the last hour" in \
        ended["systemMessage"]
    assert "clavain loop --reset-rate" in ended["systemMessage"]
    record = json.loads((project / ".clavain" / "runs" / run_id / "loop.json").read_text())
    assert record["status"] == "blocked"
    # A new loop (any task) starts only when the window has room again.
    refused = _typed(run_hook, project, "another task")
    assert refused.returncode == 2 and "calls per hour" in refused.stderr
    # The agent cannot empty it; the person's `/clavain:loop --reset-rate` does.
    agent = _agent(project, "loop", "--reset-rate")
    assert agent.returncode == 2 and "`/clavain:loop --reset-rate`" in agent.stderr
    emptied = _typed(run_hook, project, "--reset-rate")
    assert emptied.returncode == 0, emptied.stderr
    assert "Loop calls in this project in the last hour: 0 of 2" in emptied.stdout
    assert "last emptied by a person in Claude Code session" in emptied.stdout
    assert _typed(run_hook, project, "another task").returncode == 0
