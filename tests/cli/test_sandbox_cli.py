"""Hard mode through the real `bin/clavain`: a person's plain `clavain init` turns it on where
the machine can sandbox and says how to turn it off; `--no-sandbox` takes away what Clavain
added and a later plain `init` leaves it off; where the host cannot sandbox, `init` and
`doctor` say it is best effort and what to install (`--sandbox` is refused there); an agent's
`init` changes no setting; and the hint a `clavain` gets when it ran inside Claude Code's
sandbox with `.clavain/` read-only."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from clavain import confine
from tests.conftest import BIN, REPO, subprocess_env

HOST_PROBLEM = confine.host_problem()
needs_bwrap = pytest.mark.skipif(HOST_PROBLEM is not None,
                                 reason=f"hard mode cannot run here: {HOST_PROBLEM}")


def _settings(project: Path) -> dict:
    return json.loads((project / ".claude" / "settings.local.json").read_text())


def _bare_path(tmp_path: Path, *extra: str) -> str:
    bare = tmp_path / "bare-bin"
    bare.mkdir()
    (bare / "bash").symlink_to("/bin/bash")  # bin/clavain's own interpreter, nothing else
    for name in extra:
        (bare / name).symlink_to(shutil.which(name) or "/bin/true")
    return str(bare)


@pytest.mark.parametrize("flag", ["--sandbox", "--no-sandbox"])
def test_an_agent_cannot_turn_hard_mode_on_or_off(run_cli, project: Path, flag: str) -> None:
    done = run_cli("init", flag)
    assert done.returncode == 2
    assert "a person's decision, not an agent's" in done.stderr
    assert f"runs `clavain init {flag}` in a terminal" in done.stderr
    assert not (project / ".claude").exists() and not (project / ".clavain").exists()


def test_an_agents_plain_init_creates_the_state_and_leaves_the_settings(
        run_cli, project: Path) -> None:
    done = run_cli("init")
    assert done.returncode == 0, done.stderr
    assert (project / ".clavain" / "verdicts").is_dir()
    assert not (project / ".claude").exists()
    assert "turning it on is a person's decision" in done.stdout
    doctor = json.loads(run_cli("doctor", "--json").stdout)
    row = next(r for r in doctor["checks"] if r["check"] == "authority")
    assert row["status"] == "warn"  # set up without a person: something to do
    assert "best effort against shortcuts" in row["detail"]


@needs_bwrap
def test_a_persons_plain_init_turns_it_on_once(run_cli, project: Path) -> None:
    (project / ".clavain").mkdir()  # an "off" no person decided (written by other means)
    (project / ".clavain" / "hard-mode.json").write_text('{"mode": "off", "by": {}}')
    first = run_cli("init", "--json", person=True)
    assert first.returncode == 0, first.stdout + first.stderr
    report = json.loads(first.stdout)["sandbox"]
    assert report["action"] == "turned_on" and report["mode"] == "hard mode"
    box = _settings(project)["sandbox"]
    assert (box["enabled"], box["failIfUnavailable"], box["allowUnsandboxedCommands"]) == (
        True, True, False)
    assert box["excludedCommands"] == ["clavain", "clavain *"]
    assert box["filesystem"]["denyWrite"][0] == report["deny_write"]
    assert report["deny_write"] == "/" + str((project / ".clavain").resolve())
    assert "/" + str(REPO.resolve()) in box["filesystem"]["denyWrite"]  # the plugin's code
    assert f"Edit(/{(project / '.clavain').resolve()}/config.json)" in _settings(project)[
        "permissions"]["deny"]
    assert (project / ".clavain" / "verdicts").is_dir()  # the folder exists before any session
    again = run_cli("init", person=True)
    assert again.returncode == 0, again.stdout + again.stderr
    line = next(x for x in again.stdout.splitlines() if "hard mode" in x)
    assert line.startswith("hard mode already on") and "`clavain init --no-sandbox`" in line
    explicit = run_cli("init", "--sandbox", person=True)  # the old opt-in: already on
    assert "hard mode already on" in explicit.stdout
    doctor = json.loads(run_cli("doctor", "--json").stdout)
    row = next(r for r in doctor["checks"] if r["check"] == "authority")
    assert row["status"] == "ok" and row["detail"].startswith("hard mode: the sandbox enforces")


@needs_bwrap
def test_no_sandbox_takes_away_what_clavain_added_and_keeps_the_rest(
        run_cli, project: Path) -> None:
    (project / ".claude").mkdir()
    mine = {"model": "opus", "permissions": {"allow": ["Bash(ls)"]},
            "sandbox": {"excludedCommands": ["docker *"]}}
    (project / ".claude" / "settings.local.json").write_text(json.dumps(mine))
    assert run_cli("init", person=True).returncode == 0
    assert _settings(project)["sandbox"]["enabled"] is True
    off = run_cli("init", "--no-sandbox", person=True)
    assert off.returncode == 0, off.stdout + off.stderr
    assert "hard mode off (removed what Clavain added" in off.stdout
    assert _settings(project) == mine
    later = run_cli("init", person=True)  # a plain init keeps the person's decision
    assert "a person turned hard mode off" in later.stdout
    assert _settings(project) == mine
    doctor = json.loads(run_cli("doctor", "--json").stdout)
    row = next(r for r in doctor["checks"] if r["check"] == "authority")
    assert row["status"] == "ok"  # the person's own decision: nothing to fix
    assert "best effort against shortcuts: a person turned hard mode off" in row["detail"]
    assert run_cli("init", "--sandbox", person=True).returncode == 0  # and back on
    assert _settings(project)["sandbox"]["enabled"] is True


def test_no_sandbox_on_a_fresh_project_writes_no_settings(run_cli, project: Path) -> None:
    done = run_cli("init", "--no-sandbox", person=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not (project / ".claude").exists()


def test_best_effort_where_the_host_cannot_sandbox(run_cli, project: Path,
                                                  tmp_path: Path) -> None:
    path = _bare_path(tmp_path, "bwrap", "git")  # socat missing
    done = run_cli("init", person=True, env={"PATH": path})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "best effort against shortcuts" in done.stdout
    assert "socat is not on PATH: install it with" in done.stdout
    assert "bubblewrap" not in done.stdout.split("install it with")[1]  # only what is missing
    assert not (project / ".claude").exists()
    doctor = run_cli("doctor", "--json", env={"PATH": path})
    row = next(r for r in json.loads(doctor.stdout)["checks"] if r["check"] == "authority")
    assert row["status"] == "warn" and "socat" in row["detail"]
    refused = run_cli("init", "--sandbox", person=True, env={"PATH": path})
    assert refused.returncode == 1, refused.stdout + refused.stderr
    out = refused.stdout + refused.stderr
    assert "hard mode is not available" in out and "install it with" in out
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
