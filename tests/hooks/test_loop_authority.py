"""Who may end or loosen a loop, and which session a command acts on: ending a running
`/clavain:loop` and a `--rate` above `loop.callsPerHour` are a person's decisions; inside Claude
Code a command acts on the host's own session, whatever `CLAUDE_CODE_SESSION_ID=… clavain` or
`--session` says; a lock another process holds ends the loop (and fails a sprint command)
within a bound instead of hanging."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import REPO
from .test_session_loop import EXISTS, SESSION, _project, _register, _state, _stop, block

CLI = str(REPO / "bin" / "clavain")


def _env(session: str = SESSION) -> dict[str, str]:
    env = dict(os.environ, CLAVAIN_PYTHON=sys.executable, CLAUDE_CODE_SESSION_ID=session,
               CLAVAIN_BOOTSTRAP="0")
    env.pop("CLAVAIN_PROJECT_DIR", None)
    return env


def _agent(project: Path, command: str) -> subprocess.CompletedProcess[str]:
    """A shell command line of session sess-1's agent (its Bash tool, below the host)."""
    from tests.person import run_below_host

    return run_below_host(["bash", "-c", command + "; exit $?"], cwd=project, env=_env(),
                          tmp=project.parent)


def test_the_agent_cannot_end_its_loop_or_another_sessions(run_hook, tmp_path: Path) -> None:
    project = _project(tmp_path, EXISTS)
    _register(run_hook, project, "make done.txt")
    _register(run_hook, project, "make done.txt", session="sess-2")
    own = _agent(project, f"{CLI} loop cancel")
    assert own.returncode == 2, own.stdout
    assert "ending a session's /clavain:loop is a person's decision" in own.stderr
    assert "/clavain:loop --cancel" in own.stderr
    # Another session's loop: neither the variable nor --session reaches it.
    spoofed = _agent(project, f"CLAUDE_CODE_SESSION_ID=sess-2 {CLI} loop cancel")
    assert spoofed.returncode == 2 and "is a person's decision" in spoofed.stderr
    named = _agent(project, f"{CLI} loop cancel --session sess-2")
    assert named.returncode == 2
    assert "--session 'sess-2' is not this Claude Code session (sess-1)" in named.stderr
    assert _state(project) is not None and _state(project, "sess-2") is not None
    # The person's `/clavain:loop --cancel` still ends it (the typed record's path).
    cancelled = _register(run_hook, project, "--cancel")
    assert "cancelled" in cancelled and _state(project) is None
    assert _state(project, "sess-2") is not None


def test_a_command_takes_only_its_own_sessions_typed_record(run_hook, tmp_path: Path) -> None:
    """sess-2's person typed `/clavain:loop …`; sess-1's agent names sess-2 in the variable
    and runs the `!` line itself: it finds no record of its own session, and sess-2's stays."""
    project = _project(tmp_path, EXISTS)
    submitted = run_hook("UserPromptSubmit", {
        "session_id": "sess-2", "cwd": str(project), "hook_event_name": "UserPromptSubmit",
        "transcript_path": str(project / "t.jsonl"), "prompt": "/clavain:loop make done.txt"},
        cwd=project)
    assert submitted.returncode == 0, submitted.stderr
    record = project / ".clavain" / "typed" / "loop-request-sess-2.txt"
    assert record.exists()
    time.sleep(0.05)
    taken = _agent(project, f"CLAUDE_CODE_SESSION_ID=sess-2 {CLI} loop session-start "
                   "--from-prompt")
    assert taken.returncode == 2 and "no request recorded for session sess-1" in taken.stderr
    assert record.exists() and _state(project, "sess-2") is None


def test_a_rate_above_the_configured_one_is_a_persons(tmp_path: Path) -> None:
    project = _project(tmp_path, EXISTS, callsPerHour=10)
    raised = _agent(project, f"{CLI} loop --rate 100000 --runner nope")
    assert raised.returncode == 2, raised.stdout
    assert "--rate 100000 above loop.callsPerHour (10) is a person's decision" in raised.stderr
    assert "`clavain loop --rate 100000` in a terminal" in raised.stderr
    # At or below it the loop only slows down: past the authority, to the runner's check.
    for rate in ("10", "3"):
        lower = _agent(project, f"{CLI} loop --rate {rate} --runner nope")
        assert lower.returncode == 2 and "unknown runner 'nope'" in lower.stderr, lower.stderr
    from tests.person import run_as_person

    env = {k: v for k, v in _env().items() if k != "CLAUDE_CODE_SESSION_ID"}
    person = run_as_person([CLI, "loop", "--rate", "100000", "--runner", "nope"], cwd=project,
                           env=env)
    assert person.returncode == 2 and "unknown runner 'nope'" in person.stderr, person.stderr


def _hold(lock: Path) -> subprocess.Popen[str]:
    """Another process holding `lock` (opened read-only, as anyone who can read it may)."""
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, sys, time; f = open(sys.argv[1]); "
         "fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(600)", str(lock)],
        stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    return holder


@pytest.fixture
def hold():
    holders: list[subprocess.Popen[str]] = []

    def start(lock: Path) -> None:
        lock.parent.mkdir(parents=True, exist_ok=True)
        lock.touch()
        holders.append(_hold(lock))

    yield start
    for holder in holders:
        holder.kill()
        holder.wait()


@pytest.mark.parametrize("name", ["calls.json.lock", "breaker"])
def test_a_held_limits_lock_ends_the_loop_instead_of_hanging(run_hook, tmp_path: Path, hold,
                                                            name: str) -> None:
    project = _project(tmp_path, EXISTS)
    _register(run_hook, project, "make done.txt")
    state = _state(project)
    lock = Path(state["breaker"] + ".lock") if name == "breaker" else \
        project / ".clavain" / "loops" / "limits" / name
    hold(lock)
    began = time.monotonic()
    answer = _stop(run_hook, project, block(), active=False)
    assert time.monotonic() - began < 45  # returned: the hook's own limit is 600 s
    assert "decision" not in answer  # no further iteration past uncounted limits
    assert f"{lock} is locked by another process" in answer["systemMessage"]
    assert _state(project) is None
    loop = json.loads((project / ".clavain" / "runs" / state["run_id"] / "loop.json")
                      .read_text())
    assert loop["status"] == "error" and "is locked by another process" in loop["message"]


def test_a_held_checkpoint_lock_fails_a_change_naming_it(tmp_path: Path, hold,
                                                        monkeypatch) -> None:
    from clavain.errors import ClavainError
    from clavain.paths import StatePaths
    from clavain.sprint import checkpoint

    project = _project(tmp_path)
    state = StatePaths.discover(project)
    lock = state.root / "checkpoint.json.lock"
    hold(lock)
    monkeypatch.setattr(checkpoint, "LOCK_SECONDS", 0.5)
    with pytest.raises(ClavainError, match=r"checkpoint\.json\.lock is locked by another process"):
        checkpoint.change(state, lambda current: {"never": "written"})
    assert not state.sprint_checkpoint.exists()
