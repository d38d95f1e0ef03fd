"""`clavain init --sandbox` through the real `bin/clavain`: a person's decision; refused, with
nothing written, where the host cannot sandbox; and the hint a `clavain` gets when it ran inside
Claude Code's sandbox with `.clavain/` read-only."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from clavain import sandbox
from tests.conftest import BIN, subprocess_env

HOST_PROBLEM = sandbox.host_problem()
needs_bwrap = pytest.mark.skipif(HOST_PROBLEM is not None,
                                 reason=f"hard mode cannot run here: {HOST_PROBLEM}")


def test_an_agent_cannot_turn_hard_mode_on(run_cli, project: Path) -> None:
    done = run_cli("init", "--sandbox")
    assert done.returncode == 2
    assert "a person's decision, not an agent's" in done.stderr
    assert "runs `clavain init --sandbox` in a terminal" in done.stderr
    assert not (project / ".claude").exists() and not (project / ".clavain").exists()


@needs_bwrap
def test_a_person_turns_it_on_once(run_cli, project: Path) -> None:
    first = run_cli("init", "--sandbox", "--json", person=True)
    assert first.returncode == 0, first.stdout + first.stderr
    report = json.loads(first.stdout)["sandbox"]
    settings = json.loads((project / ".claude" / "settings.local.json").read_text())
    box = settings["sandbox"]
    assert (box["enabled"], box["failIfUnavailable"], box["allowUnsandboxedCommands"]) == (
        True, True, False)
    assert box["excludedCommands"] == ["clavain", "clavain *"]
    assert box["filesystem"]["denyWrite"] == [report["deny_write"]]
    assert report["deny_write"] == "/" + str((project / ".clavain").resolve())
    assert (project / ".clavain" / "verdicts").is_dir()  # the folder exists before any session
    second = run_cli("init", "--sandbox", person=True)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "hard mode already on" in second.stdout


def test_refused_where_the_host_cannot_sandbox(run_cli, project: Path, tmp_path: Path) -> None:
    bare = tmp_path / "bare-bin"
    bare.mkdir()
    (bare / "bash").symlink_to("/bin/bash")  # bin/clavain's own interpreter, nothing else
    done = run_cli("init", "--sandbox", person=True, env={"PATH": str(bare)})
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout + done.stderr
    assert "hard mode is not available" in out and "apt-get install bubblewrap socat" in out
    assert not (project / ".claude").exists()


@needs_bwrap
def test_a_sandboxed_clavain_says_how_to_run_it(project: Path) -> None:
    """What the agent sees when it chains a `clavain` command in hard mode: the command ran in
    the sandbox (SANDBOX_RUNTIME=1, `.clavain/` read-only) and says to run it on its own."""
    state = project / ".clavain"
    subprocess.run([str(BIN / "clavain"), "init"], cwd=project, env=subprocess_env(),
                   check=True, capture_output=True)
    argv = ["bwrap", "--bind", "/", "/", "--ro-bind", str(state), str(state), "--",
            str(BIN / "clavain"), "sprint", "start", "add a greeting"]
    sandboxed = subprocess.run(argv, cwd=project, env=subprocess_env(SANDBOX_RUNTIME="1"),
                               capture_output=True, text=True, timeout=120)
    assert sandboxed.returncode != 0
    assert "ran inside Claude Code's sandbox" in sandboxed.stderr
    assert "as a Bash command of its own" in sandboxed.stderr
    plain = subprocess.run(argv, cwd=project, env=subprocess_env(), capture_output=True,
                           text=True, timeout=120)
    assert plain.returncode != 0 and "Claude Code's sandbox" not in plain.stderr
