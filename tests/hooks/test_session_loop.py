"""`/clavain:loop` in a session, at the payload level: the UserPromptSubmit hook records what was
typed, `clavain loop session-start --from-prompt` registers the loop for that session, and the
Stop hook (bin/clavain-hook Stop, as the host runs it) continues or ends it by the loop's rules:
the dual exit gate, BLOCKED items skipped, the breaker, the iteration cap. Other sessions are
never looped; `stop_hook_active` and the host's block cap are handled as session_loop says."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clavain.cli.loop import parse_loop_arguments
from clavain.errors import ClavainError

from .conftest import REPO

SESSION = "sess-1"


def _git(project: Path, *args: str) -> None:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@x", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@x")
    subprocess.run(["git", *args], cwd=project, env=env, check=True, capture_output=True)


def _project(tmp_path: Path, checks: list[dict] | None = None, **loop: object) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "README.md").write_text("# p\n")
    _git(project, "init", "-q", "-b", "main")
    _git(project, "add", "-A")
    _git(project, "commit", "-qm", "init")
    (project / ".clavain").mkdir()
    config: dict = {"checks": checks or []}
    if loop:
        config["loop"] = loop
    (project / ".clavain" / "config.json").write_text(json.dumps(config))
    return project


def _clavain(project: Path, *args: str, session: str = SESSION) -> subprocess.CompletedProcess:
    env = dict(os.environ, CLAVAIN_PYTHON=sys.executable, CLAUDE_CODE_SESSION_ID=session,
               CLAVAIN_BOOTSTRAP="0")
    env.pop("CLAVAIN_PROJECT_DIR", None)
    return subprocess.run([str(REPO / "bin" / "clavain"), *args], capture_output=True,
                          text=True, cwd=project, env=env, timeout=120)


def _terminal(project: Path, *args: str, session: str = SESSION) -> subprocess.CompletedProcess:
    """A person's own `clavain loop session-start` outside Claude Code, naming the session."""
    from tests.person import run_as_person

    env = dict(os.environ, CLAVAIN_PYTHON=sys.executable, CLAVAIN_BOOTSTRAP="0")
    for name in ("CLAVAIN_PROJECT_DIR", "CLAUDE_CODE_SESSION_ID", "CLAUDECODE"):
        env.pop(name, None)
    return run_as_person([str(REPO / "bin" / "clavain"), *args, "--session", session],
                         cwd=project, env=env)


def _register(run_hook, project: Path, typed: str, session: str = SESSION) -> str:
    """Type `/clavain:loop TYPED` in `session`: the hook records it, the `!` line registers."""
    submitted = run_hook("UserPromptSubmit", {
        "session_id": session, "cwd": str(project), "hook_event_name": "UserPromptSubmit",
        "transcript_path": str(project / "t.jsonl"), "prompt": f"/clavain:loop {typed}"},
        cwd=project)
    assert submitted.returncode == 0 and submitted.stdout == "", submitted.stderr
    from tests.person import run_below_host

    env = dict(os.environ, CLAVAIN_PYTHON=sys.executable, CLAUDE_CODE_SESSION_ID=session,
               CLAVAIN_BOOTSTRAP="0")
    env.pop("CLAVAIN_PROJECT_DIR", None)
    started = run_below_host([str(REPO / "bin" / "clavain"), "loop", "session-start",
                              "--from-prompt"], cwd=project, env=env, tmp=project.parent)
    assert started.returncode == 0, started.stderr
    return started.stdout


def _stop(run_hook, project: Path, message: object, *, session: str = SESSION,
          active: bool = True, env: dict | None = None, raw: str | None = None):
    payload = {"session_id": session, "cwd": str(project), "hook_event_name": "Stop",
               "transcript_path": str(project / "t.jsonl"), "stop_hook_active": active,
               "last_assistant_message": message}
    result = run_hook("Stop", raw if raw is not None else payload, cwd=project, env=env)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    return json.loads(result.stdout) if result.stdout else None


def block(status: str = "IN_PROGRESS", *, task: str = "none", files: int = 0,
          exit_signal: bool = False) -> str:
    return (f"Did things.\n\n---CLAVAIN_STATUS---\nTASK_COMPLETED: {task}\nSTATUS: {status}\n"
            f"FILES_MODIFIED: {files}\nTESTS_STATUS: NOT_RUN\n"
            f"EXIT_SIGNAL: {'true' if exit_signal else 'false'}\n"
            "NEXT_RECOMMENDATION: go on\n---END_CLAVAIN_STATUS---\n")


def _state(project: Path, session: str = SESSION) -> dict | None:
    path = project / ".clavain" / "loops" / f"{session}.json"
    return json.loads(path.read_text()) if path.exists() else None


def _loop_record(project: Path, run_id: str) -> dict:
    return json.loads((project / ".clavain" / "runs" / run_id / "loop.json").read_text())


EXISTS = [{"id": "exists", "cmd": "test -f done.txt", "description": "done.txt exists"}]


def test_registration_and_every_continuation_names_the_iteration(run_hook,
                                                                   tmp_path: Path) -> None:
    project = _project(tmp_path, EXISTS)
    first = _register(run_hook, project, "--max-iterations 5 --automation ask make done.txt")
    assert first.startswith("Clavain loop — iteration 1 of 5")
    assert "Task: make done.txt" in first and "check:exists" in first
    assert "automation: ask" in first
    state = _state(project)
    assert state["iteration"] == 1 and state["max_iterations"] == 5
    # The task's breaker, kept across runs, not in the run's folder.
    assert "/.clavain/loops/limits/breaker-" in state["breaker"]
    assert _loop_record(project, state["run_id"])["status"] == "running"
    answer = _stop(run_hook, project, block(), active=False)
    assert answer["decision"] == "block"
    assert answer["reason"].startswith("Clavain loop — iteration 2 of 5")
    assert "check:exists" in answer["reason"] and "Task: make done.txt" in answer["reason"]
    assert _state(project)["iteration"] == 2
    third = _stop(run_hook, project, block(files=1))  # the agent's word: no progress
    assert third["reason"].startswith("Clavain loop — iteration 3 of 5")
    second = json.loads((project / ".clavain" / "runs" / state["run_id"] / "iteration-2.json")
                        .read_text())
    assert second["progress"]["progress"] is False and second["progress"]["unconfirmed"]


def test_the_dual_exit_gate_needs_both_halves(run_hook, tmp_path: Path) -> None:
    project = _project(tmp_path, EXISTS)
    _register(run_hook, project, "make done.txt")
    # EXIT_SIGNAL true while the check still fails: not done.
    again = _stop(run_hook, project, block(exit_signal=True), active=False)
    assert again["decision"] == "block" and "check:exists" in again["reason"]
    (project / "done.txt").write_text("ok\n")
    # Nothing actionable, but the agent has not said so: the exit prompt.
    confirm = _stop(run_hook, project, block("COMPLETE", task="check:exists", files=1))
    assert confirm["reason"].startswith("Clavain loop — iteration 3 of 100")
    assert "Every check passes" in confirm["reason"]
    run_id = _state(project)["run_id"]
    assert _stop(run_hook, project, block("COMPLETE", exit_signal=True)) is None
    assert _state(project) is None
    summary = _clavain(project, "loop", "summary", run_id, "--json")
    assert summary.returncode == 0, summary.stderr
    data = json.loads(summary.stdout)
    assert data["status"] == "done" and data["iterations"] == 3
    assert data["confirmed_done"] == ["check:exists"]
    assert data["claimed_not_confirmed"] == []


def test_blocked_items_are_skipped_then_all_blocked_ends_the_loop(run_hook,
                                                                   tmp_path: Path) -> None:
    checks = [{"id": "a", "cmd": "false"}, {"id": "b", "cmd": "false"}]
    project = _project(tmp_path, checks)
    _register(run_hook, project, "fix both")
    first = _stop(run_hook, project, block("BLOCKED", task="check:a"), active=False)
    assert "Skipped (BLOCKED earlier in this run, waiting for a person): check:a" in \
        first["reason"]
    assert "check:b" in first["reason"]
    assert _state(project)["blocked"] == ["check:a"]
    ended = _stop(run_hook, project, block("BLOCKED", task="check:b"))
    assert "every item left is BLOCKED" in ended["systemMessage"]
    assert "decision" not in ended and _state(project) is None


def test_the_breaker_stops_a_model_that_makes_no_progress(run_hook, tmp_path: Path) -> None:
    project = _project(tmp_path, EXISTS)
    _register(run_hook, project, "make done.txt")
    run_id = _state(project)["run_id"]
    assert _stop(run_hook, project, block(), active=False)["decision"] == "block"
    assert _stop(run_hook, project, "no block at all")["decision"] == "block"
    ended = _stop(run_hook, project, block())
    assert "circuit breaker open: 3 iterations in a row with no progress" in \
        ended["systemMessage"]
    assert _state(project) is None
    record = _loop_record(project, run_id)
    assert record["status"] == "breaker_open" and record["exit_code"] == 3
    second = json.loads((project / ".clavain" / "runs" / run_id / "iteration-2.json")
                        .read_text())
    assert second["status"] is None and "no ---CLAVAIN_STATUS--- block" in \
        second["status_error"]


def test_max_iterations_ends_a_loop_that_keeps_progressing(run_hook, tmp_path: Path) -> None:
    project = _project(tmp_path, EXISTS)
    _register(run_hook, project, "--max-iterations 2 make done.txt")
    (project / "one.txt").write_text("1")
    assert _stop(run_hook, project, block(), active=False)["decision"] == "block"
    (project / "two.txt").write_text("2")
    ended = _stop(run_hook, project, block())
    assert "max iterations: stopped after 2 iteration(s)" in ended["systemMessage"]
    assert _state(project) is None


def test_another_session_in_the_project_is_never_looped(run_hook, tmp_path: Path) -> None:
    project = _project(tmp_path, EXISTS)
    _register(run_hook, project, "make done.txt")
    before = _state(project)
    for active in (False, True):
        assert _stop(run_hook, project, block(), session="sess-2", active=active) is None
        assert _stop(run_hook, project, block(), session="../loops/sess-1",
                     active=active) is None
    assert _state(project) == before
    assert not (project / ".clavain" / "loops" / "sess-2.json").exists()


def test_stop_hook_active_rules_and_the_host_cap(run_hook, tmp_path: Path) -> None:
    project = _project(tmp_path, EXISTS)
    # No loop: never blocked by the loop, whatever stop_hook_active says.
    assert _stop(run_hook, project, block(), active=False) is None
    assert _stop(run_hook, project, block(), active=True) is None
    _register(run_hook, project, "make done.txt")
    cap = {"CLAUDE_CODE_STOP_HOOK_BLOCK_CAP": "2"}
    first = _stop(run_hook, project, block(files=1), active=False, env=cap)
    assert "Claude Code ends a turn" not in first["reason"]
    second = _stop(run_hook, project, block(files=1), env=cap)  # active on continuations
    assert "Note: Claude Code ends a turn after 2 Stop-hook continuations" in second["reason"]
    state = _state(project)
    assert state["blocks_in_row"] == 2 and state["host_block_cap"] == 2
    # The host ended the chain (its cap); the person's next message ends with stop_hook_active
    # false: the loop resumes with the same iteration, and that turn is not counted.
    resumed = _stop(run_hook, project, "what is going on?", active=False)
    assert resumed["reason"].startswith("Clavain loop — iteration 3 of")
    assert "Resumed" in resumed["reason"] and "Resumed" in resumed["systemMessage"]
    state = _state(project)
    assert state["iteration"] == 3 and state["host_cuts"] == 1 and state["blocks_in_row"] == 1
    runs = project / ".clavain" / "runs" / state["run_id"]
    assert not (runs / "iteration-3.json").exists()
    # A resumed turn that ends with a status block is the iteration.
    _stop(run_hook, project, block(), active=True)
    assert (runs / "iteration-3.json").exists()


def test_cancel_ends_the_loop_of_this_session_only(run_hook, tmp_path: Path) -> None:
    project = _project(tmp_path, EXISTS)
    _register(run_hook, project, "make done.txt")
    _register(run_hook, project, "make done.txt", session="sess-2")
    refused = _terminal(project, "loop", "session-start", "again")
    assert refused.returncode == 2 and "already registered" in refused.stderr
    run_id = _state(project)["run_id"]
    cancelled = _register(run_hook, project, "--cancel")
    assert "cancelled" in cancelled and f"Loop {run_id}: cancelled" in cancelled
    assert _state(project) is None and _state(project, "sess-2") is not None
    assert _loop_record(project, run_id)["status"] == "cancelled"
    assert _stop(run_hook, project, "ok, cancelled", active=False) is None
    missing = _terminal(project, "loop", "cancel")  # a person's, at a terminal
    assert missing.returncode == 2 and "no loop registered for session sess-1" in missing.stderr
    other = _terminal(project, "loop", "cancel", "--json", session="sess-2")
    assert json.loads(other.stdout)["status"] == "cancelled"


@pytest.mark.parametrize("message", [
    "\x00\x1b[31m\ufffd garbage \udcff",
    "---CLAVAIN_STATUS---\nSTATUS: COMPLETE\n",  # cut off
    "x" * 1_000_000 + block(),
    12, None, ["a list"],
])
def test_garbage_in_the_message_is_no_progress_never_a_traceback(run_hook, tmp_path: Path,
                                                                  message) -> None:
    project = _project(tmp_path, EXISTS)
    _register(run_hook, project, "make done.txt")
    answer = _stop(run_hook, project, message, active=False)
    assert answer["decision"] == "block"
    run_id = _state(project)["run_id"]
    first = json.loads((project / ".clavain" / "runs" / run_id / "iteration-1.json").read_text())
    if isinstance(message, str) and message.endswith(block()):
        assert first["status"]["status"] == "IN_PROGRESS"
    else:
        assert first["status"] is None and first["status_error"].startswith("bad status block")
        assert first["progress"]["progress"] is False


def test_bad_bytes_on_stdin_leave_the_loop_waiting(run_hook, tmp_path: Path) -> None:
    project = _project(tmp_path, EXISTS)
    _register(run_hook, project, "make done.txt")
    before = _state(project)
    result = subprocess.run(
        [str(REPO / "bin" / "clavain-hook"), "Stop"], input=b"\xff\xfe{bad", cwd=project,
        capture_output=True, timeout=60,
        env=dict(os.environ, CLAVAIN_PYTHON=sys.executable, CLAUDE_PROJECT_DIR=str(project)))
    assert result.returncode == 0 and result.stdout == b"" and result.stderr == b""
    assert _state(project) == before
    assert "Stop" in (project / ".clavain" / "logs" / "hooks.log").read_text()


@pytest.mark.parametrize("damage", [
    b"\xff\xfe not json", b"[]", b'{"version": 1}',
    "iteration", "session_id", "snapshot", "run_id",
])
def test_a_damaged_state_file_ends_the_loop_with_a_message(run_hook, tmp_path: Path,
                                                            damage) -> None:
    project = _project(tmp_path, EXISTS)
    _register(run_hook, project, "make done.txt")
    path = project / ".clavain" / "loops" / f"{SESSION}.json"
    if isinstance(damage, bytes):
        path.write_bytes(damage)
    else:
        state = json.loads(path.read_text())
        state[damage] = {"iteration": "two", "session_id": "sess-9", "snapshot": {"x": 1},
                         "run_id": "../../elsewhere"}[damage]
        path.write_text(json.dumps(state))
    answer = _stop(run_hook, project, block(), active=False)
    assert answer == {"systemMessage": f"Clavain loop ended: its state file {path} was "
                                       "damaged (removed)."}
    assert not path.exists()
    assert _stop(run_hook, project, block(), active=False) is None


def test_an_unexpected_failure_ends_the_loop_with_a_message(run_hook, tmp_path: Path) -> None:
    project = _project(tmp_path, EXISTS)
    _register(run_hook, project, "make done.txt")
    run_id = _state(project)["run_id"]
    (project / ".clavain" / "config.json").write_text('{"loop": {"breaker": {"noProgress": 0}}}')
    answer = _stop(run_hook, project, block(), active=False)
    assert answer["systemMessage"].startswith("Clavain loop ended: ClavainError")
    assert _state(project) is None
    assert _loop_record(project, run_id)["status"] == "error"


@pytest.mark.parametrize(("typed", "expected"), [
    ("make it", {"cancel": False, "max_iterations": None, "automation": None,
                 "task": "make it"}),
    ("--max-iterations=3 --automation plan  two\nlines $(x) `y`",
     {"cancel": False, "max_iterations": 3, "automation": "plan",
      "task": "two\nlines $(x) `y`"}),
    ("--max-iterations 4 -- --not-an-option",
     {"cancel": False, "max_iterations": 4, "automation": None, "task": "--not-an-option"}),
    ("  --cancel  ", {"cancel": True, "max_iterations": None, "automation": None, "task": ""}),
    ("--reset-circuit loop-x", {"cancel": False, "max_iterations": None, "automation": None,
                                "reset_circuit": "loop-x", "task": ""}),
    ("--reset-rate", {"cancel": False, "max_iterations": None, "automation": None,
                      "reset_rate": True, "task": ""}),
])
def test_the_typed_arguments(typed: str, expected: dict) -> None:
    assert parse_loop_arguments(typed) == {"reset_circuit": None, "reset_rate": False,
                                           **expected}


@pytest.mark.parametrize(("typed", "problem"), [
    ("--max-iteration 3 x", "unknown option '--max-iteration'"),
    ("--max-iterations 0 x", "is not a whole number"),
    ("--max-iterations", "is not a whole number"),
    ("--cancel now", "--cancel takes nothing else"),
    ("--reset-rate now", "--reset-rate takes nothing else"),
    ("--reset-rate=1", "unknown option '--reset-rate'"),
])
def test_bad_typed_arguments_are_one_line(typed: str, problem: str) -> None:
    with pytest.raises(ClavainError, match=problem):
        parse_loop_arguments(typed)


def test_a_check_slower_than_the_stop_hook_may_run_is_refused(tmp_path: Path) -> None:
    project = _project(tmp_path, [{"id": "slow", "cmd": "true", "timeout": 900}])
    refused = _terminal(project, "loop", "session-start", "--json", "go")
    assert refused.returncode == 2
    assert "checks in .clavain/config.json may take 900 s together" in \
        json.loads(refused.stdout)["error"]
    assert not (project / ".clavain" / "loops").exists()
    (project / ".clavain" / "config.json").write_text(json.dumps({"checks": EXISTS}))
    started = _terminal(project, "loop", "session-start", "--json", "--max-iterations", "2",
                        "go")
    assert started.returncode == 0, started.stderr
    assert json.loads(started.stdout)["prompt"].startswith("Clavain loop — iteration 1 of 2")
