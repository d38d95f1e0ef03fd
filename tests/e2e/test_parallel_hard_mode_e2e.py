"""A parallel `clavain run` in hard mode, with the real `claude -p` runners: after a person's
plain `clavain init` (hard mode on, the default where the machine can sandbox), two workers run
the three-task plan, each executor in its own git worktree under `.clavain-worktrees/`, its
session in the project's sandbox (`--settings`): it writes its worktree, not `.clavain/`. The
work is merged, every check runs confined, and the worktrees are gone at the end."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from clavain import sandbox
from tests.e2e.conftest import REPO, ClaudeRunner, require_sandbox
from tests.e2e.scripted_model import bash, text, tool_results
from tests.e2e.three_tasks import TASKS, scenario_script
from tests.person import run_as_person

pytestmark = pytest.mark.e2e

GIT_ENV = {"GIT_AUTHOR_NAME": "e2e", "GIT_AUTHOR_EMAIL": "e2e@example.invalid",
           "GIT_COMMITTER_NAME": "e2e", "GIT_COMMITTER_EMAIL": "e2e@example.invalid"}


def _executor_command(name: str) -> str:
    """The executor's one Bash call: its file in its worktree, then what the sandbox lets it do
    (said on stdout for the test to read back)."""
    return (f"printf '{name}\\n' > {name}.txt; echo sandbox=${{SANDBOX_RUNTIME:-off}} "
            f"cwd=$(pwd); echo forged > \"$CLAVAIN_STATE_DIR/forged-{name}.txt\" "
            "2>/dev/null && echo state-written || echo state-refused")


HOST_SETUP_RACE = ("bwrap: Can't find source path", "bwrap: Can't get type of source")


def _script(seen: list[tuple[str, str, int]], said: dict[str, str]):
    lock = threading.Lock()

    def reply(request: dict[str, Any], node: str, turn: int) -> list[Any] | None:
        name = node.removeprefix("task-")
        if turn == 0:
            return [bash(_executor_command(name), f"Write {name}.txt")]
        results = tool_results(request)
        if not results:
            return None
        if any(race in results[-1].content for race in HOST_SETUP_RACE) and turn < 3:
            # The host's sandbox binds paths it saw a moment before; another worker's git can
            # remove one (`.git/config.lock`) in between. A model retries such a call.
            return [bash(_executor_command(name), f"Write {name}.txt again")]
        with lock:
            said[name] = results[-1].content
        return [text(f"Wrote {name}.txt.\n\n<result>"
                     f'{{"status":"success","summary":"wrote {name}.txt"}}</result>')]

    return scenario_script(seen, reply)


def _git(project: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=project, env={"PATH": "/usr/bin:/bin", **GIT_ENV},
                          check=True, text=True, capture_output=True).stdout


def _clavain(env: dict[str, str], cwd: Path, *args: str, stdin: str | None = None,
             timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(REPO / "bin" / "clavain"), *args], cwd=cwd, env=env,
                          input=stdin, capture_output=True, text=True, timeout=timeout)


def test_two_workers_run_the_plan_in_hard_mode(claude_runner: ClaudeRunner,
                                               claude_bin: Path) -> None:
    require_sandbox()
    project, state = claude_runner.project, claude_runner.project / ".clavain"
    env = claude_runner.env({"CLAVAIN_CLAUDE_BIN": str(claude_bin),
                             "CLAVAIN_PYTHON": sys.executable,
                             "CLAVAIN_PROJECT_DIR": str(project)})
    init = run_as_person([str(REPO / "bin" / "clavain"), "init"], cwd=project, env=env)
    assert init.returncode == 0, init.stdout + init.stderr
    assert "hard mode on" in init.stdout, init.stdout
    assert sandbox.hard_mode(project, state)
    config = {"defaults": {"snapshotMaxLagSeconds": 0, "retryBackoffSeconds": 0},
              "supervisor": {"claude": {"maxTurns": 8,
                                        "allowedTools": ["Bash", "Read", "Write", "Edit"],
                                        "extraArgs": ["--plugin-dir", str(REPO)]}}}
    (state / "config.json").write_text(json.dumps(config))
    _git(project, "add", "-A")
    _git(project, "commit", "-qm", "clavain init")
    assert _git(project, "status", "--porcelain") == ""  # the settings file is kept out of git
    graph = json.dumps({"nodes": [{"id": "plan-greeter", "type": "plan",
                                   "title": "Plan a greeter"}]})
    imported = _clavain(env, project, "graph", "import", "-", "--json", stdin=graph)
    assert imported.returncode == 0, imported.stderr

    seen: list[tuple[str, str, int]] = []
    said: dict[str, str] = {}
    claude_runner.model.script = _script(seen, said)
    done = _clavain(env, project, "run", "--workers", "2", "--json", timeout=400)
    detail = (f"exit {done.returncode}\nstdout: {done.stdout[-6000:]}\n"
              f"stderr: {done.stderr[-6000:]}\nmodel saw: {seen}\nsaid: {said}\n"
              f"script errors: {claude_runner.model.errors}")
    assert done.returncode == 0, detail
    report = json.loads(done.stdout)
    assert report["status"] == "complete", detail
    assert not claude_runner.model.errors, detail

    listed = json.loads(_clavain(env, project, "graph", "ls", "--json").stdout)
    nodes = listed["nodes"] if isinstance(listed, dict) else listed
    assert {n["status"] for n in nodes} == {"done"}, (nodes, detail)
    for name in TASKS:
        assert (project / f"{name}.txt").read_text() == f"{name}\n"
        # Each executor ran sandboxed, in its worktree beside the state folder, not in it.
        output = said[name]
        assert "sandbox=1" in output, output
        assert f"/.clavain-worktrees/{report['run_id']}/task-{name}" in output, output
        assert "state-refused" in output, output
        assert not (state / f"forged-{name}.txt").exists()
    assert report["metrics"]["peak_concurrency"] >= 2, report["metrics"]["timeline"]
    # Clavain removed what it made: no worktree, no run branch, a clean tree.
    worktrees = project / ".clavain-worktrees"
    assert [p.name for p in worktrees.iterdir()] == [".gitignore"], list(worktrees.iterdir())
    assert _git(project, "worktree", "list").count("\n") == 1
    assert _git(project, "branch", "--list", "clavain/*") == ""
    assert _git(project, "status", "--porcelain") == ""
