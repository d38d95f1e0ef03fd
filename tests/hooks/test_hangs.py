"""Nothing hangs, and no denial turns into an allow: every hook returns within a bound when a
state file is a FIFO, stdin is read with a bound in size and time, SubagentStop waits for a
transcript once, the Stop hook's checks stop at its deadline, and a spent budget is denied on
a `.clavain/` nobody may write."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from clavain.store import db
from tests.unwritable import unwritable

from .conftest import REPO, clavain_project, payload_for, start_sprint

BOUND = 20  # seconds: "returned, did not hang" (each hook or command takes well under 1 s)


def _project(tmp_path: Path, config: dict | None = None) -> Path:
    return clavain_project(tmp_path, config)


def _payload(event: str, project: Path) -> dict:
    """A payload for `event` that reaches the state files the hook reads."""
    base = {**payload_for(event, project), "session_id": "s1", "hook_event_name": event}
    extra: dict = {
        "UserPromptSubmit": {"prompt": "/clavain:sprint add a greeting"},
        "PreCompact": {"trigger": "manual", "custom_instructions": ""},
        "Stop": {"stop_hook_active": False, "last_assistant_message": "done"},
        "SubagentStart": {"agent_type": "clavain:reviewer", "agent_id": "a1"},
        "SubagentStop": {"agent_type": "clavain:reviewer", "agent_id": "a1",
                         "agent_transcript_path": str(project / "missing.jsonl"),
                         "last_assistant_message": "Lens: quality\nVERDICT: CLEAN\n"},
        "PreToolUse": {"tool_name": "Bash", "tool_input": {"command": "ls"},
                       "tool_use_id": "t1"},
        "PostToolUseFailure": {"tool_name": "Bash", "tool_input": {"command": "pytest -q"},
                               "tool_use_id": "t1", "error": "exit 1"},
    }.get(event, {})
    return {**base, **extra}


def _hook(project: Path, event: str, stdin: bytes | str | dict, *,
          env: dict | None = None) -> subprocess.CompletedProcess[bytes]:
    """bin/clavain-hook as the host runs it; TimeoutExpired (a failed test) past BOUND."""
    full_env = dict(os.environ, CLAVAIN_PYTHON=sys.executable, CLAUDE_PROJECT_DIR=str(project),
                    CLAVAIN_BOOTSTRAP="0", CLAUDE_CONFIG_DIR=str(project.parent / "cc"),
                    **(env or {}))
    data = json.dumps(stdin) if isinstance(stdin, dict) else stdin
    return subprocess.run([str(REPO / "bin" / "clavain-hook"), event], capture_output=True,
                          input=data.encode() if isinstance(data, str) else data, cwd=project,
                          env=full_env, timeout=BOUND)


def _log(project: Path) -> str:
    log = project / ".clavain" / "logs" / "hooks.log"
    return log.read_text() if log.exists() else ""


EVENTS = ("SessionStart", "UserPromptSubmit", "PreCompact", "Stop", "SubagentStart",
          "SubagentStop", "PreToolUse", "PostToolUseFailure")


@pytest.mark.parametrize("name", ["state.sqlite", "state.sqlite-wal"])
def test_a_fifo_database_hangs_no_hook_and_the_call_is_denied(tmp_path: Path,
                                                             name: str) -> None:
    project = _project(tmp_path)
    start_sprint(project)  # SessionStart and PreCompact then read the sprint's nodes
    database = project / ".clavain" / "state.sqlite"
    for suffix in ("-wal", "-shm"):
        Path(f"{database}{suffix}").unlink(missing_ok=True)
    fifo = project / ".clavain" / name
    fifo.unlink(missing_ok=True)
    os.mkfifo(fifo)
    for event in EVENTS:
        result = _hook(project, event, _payload(event, project))
        assert result.returncode == 0 and result.stderr == b"", (event, result.stderr)
        if event == "PreToolUse":  # the counters cannot be read: denied, never allowed
            decision = json.loads(result.stdout)["hookSpecificOutput"]
            assert decision["permissionDecision"] == "deny"
            assert decision["permissionDecisionReason"].startswith(
                f"Clavain budget: {fifo} is a FIFO, not a regular file; Clavain does not "
                "open it (it could wait for ever): remove it. This call is denied")
    assert fifo.exists() and not fifo.is_file()  # nothing replaced it behind the person's back


@pytest.mark.parametrize("name", ["config.json", "checkpoint.json"])
def test_a_fifo_config_or_checkpoint_hangs_no_hook(tmp_path: Path, name: str) -> None:
    project = _project(tmp_path)
    db.connect(project / ".clavain" / "state.sqlite").close()
    os.mkfifo(project / ".clavain" / name)
    for event in EVENTS:
        result = _hook(project, event, _payload(event, project))
        assert result.returncode == 0 and result.stderr == b"", (event, result.stderr)
        if event == "PreToolUse" and name == "config.json":  # named, with the defaults used
            assert f"{project / '.clavain' / name} is a FIFO" in json.loads(
                result.stdout)["hookSpecificOutput"]["additionalContext"]
    # The call was counted, against the defaults.
    counted = db.connect(project / ".clavain" / "state.sqlite")
    assert counted.execute("SELECT commands FROM budget_runs").fetchone()[0] == 1
    counted.close()


def test_a_fifo_hooks_log_does_not_hang_a_failing_hook(tmp_path: Path) -> None:
    project = _project(tmp_path)
    (project / ".clavain" / "logs").mkdir()
    os.mkfifo(project / ".clavain" / "logs" / "hooks.log")
    for event in ("SessionStart", "PreToolUse"):
        result = _hook(project, event, "{not json")  # the failure goes to hooks.log
        assert result.returncode == 0 and result.stdout == b"" and result.stderr == b""


# ---------------------------------------------------------------- stdin

def test_a_payload_over_the_limit_is_logged_and_ignored(tmp_path: Path) -> None:
    from clavain.hooks import STDIN_MAX_BYTES

    project = _project(tmp_path, {"budgets": {"maxCommands": 0}})
    huge = json.dumps({**_payload("PreToolUse", project), "pad": "x" * STDIN_MAX_BYTES})
    result = _hook(project, "PreToolUse", huge)
    assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")
    assert f"PreToolUse stdin is over {STDIN_MAX_BYTES} bytes; ignored" in _log(project)
    # Through the bash launcher's own read: what was typed is not recorded.
    prompt = {**_payload("UserPromptSubmit", project),
              "prompt": "/clavain:sprint " + "x" * STDIN_MAX_BYTES}
    result = _hook(project, "UserPromptSubmit", prompt)
    assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")
    assert f"UserPromptSubmit stdin is over {STDIN_MAX_BYTES} bytes; ignored" in _log(project)
    assert not list((project / ".clavain").glob("typed/*"))


@pytest.mark.parametrize("event", ["PreToolUse", "UserPromptSubmit"])
def test_stdin_that_never_ends_is_not_read_for_ever(tmp_path: Path, event: str) -> None:
    """PreToolUse is read by Python; UserPromptSubmit first by bin/clavain-hook's bash."""
    project = _project(tmp_path)
    read_end, write_end = os.pipe()
    payload = {**_payload(event, project), "prompt": "/clavain:sprint add a flag"}
    os.write(write_end, json.dumps(payload).encode())
    env = dict(os.environ, CLAVAIN_PYTHON=sys.executable, CLAUDE_PROJECT_DIR=str(project),
               CLAVAIN_BOOTSTRAP="0")
    try:  # the write end stays open: no end of file ever comes
        result = subprocess.run([str(REPO / "bin" / "clavain-hook"), event],
                                stdin=read_end, capture_output=True, cwd=project, env=env,
                                timeout=BOUND)
    finally:
        os.close(read_end)
        os.close(write_end)
    assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")
    assert not list((project / ".clavain").glob("typed/*"))  # nothing taken as typed
    if event == "PreToolUse":
        from clavain.hooks import STDIN_SECONDS

        assert f"stdin did not end within {STDIN_SECONDS:g} s; ignored" in _log(project)


def test_nul_bytes_in_a_payload_print_nothing_on_stderr(tmp_path: Path) -> None:
    project = _project(tmp_path)
    for event in ("UserPromptSubmit", "PreToolUse", "SessionStart"):
        text = json.dumps(_payload(event, project)).replace(
            '"s1"', '"s\u0000"').replace("/clavain:sprint add", "/clavain:sprint a\u0000dd")
        result = _hook(project, event, text.encode("utf-8"))
        assert (result.returncode, result.stdout, result.stderr) == (0, b"", b""), event
        assert f"{event} BadText: stdin: not valid JSON (Invalid control character" \
            in _log(project)


# ---------------------------------------------------------------- SubagentStop

def test_subagent_stop_waits_for_an_unwritten_transcript_once(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The host has created the reviewer's transcript but written nothing yet: the lens and the
    token count wait on the same 5 s, not 5 s each (a fake clock: no real waiting)."""
    from clavain.hooks import subagent_stop

    now = [1000.0]
    slept = []
    clock = types.SimpleNamespace(monotonic=lambda: now[0],
                                  sleep=lambda s: (slept.append(s), now.__setitem__(0, now[0] + s)))
    monkeypatch.setattr(subagent_stop, "time", clock)
    transcript = project / "agent.jsonl"
    transcript.write_text("")
    notes: list[str] = []
    written = subagent_stop.record({
        "session_id": "s1", "cwd": str(project), "agent_type": "clavain:reviewer",
        "agent_id": "a1", "agent_transcript_path": str(transcript),
        "last_assistant_message": "Lens: quality\nVERDICT: CLEAN\nFINDINGS_COUNT: 0\n"},
        notes=notes)
    assert written is not None and json.loads(written.read_text())["agent"] == \
        "clavain:reviewer/quality"
    assert subagent_stop.TRANSCRIPT_WAIT_SECONDS <= sum(slept) \
        < subagent_stop.TRANSCRIPT_WAIT_SECONDS + 0.2
    assert any("lacks the final message" in note for note in notes)


# ---------------------------------------------------------------- Stop: the checks' deadline

def test_the_stop_hook_stops_checks_at_its_deadline(project: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from clavain.loop import session_loop
    from clavain.paths import StatePaths

    config = project / ".clavain" / "config.json"
    config.parent.mkdir()
    config.write_text(json.dumps({"checks": [{"id": "slow", "cmd": "true", "timeout": 60}]}))
    session_loop.start(StatePaths.discover(project), "sess-1", "the task")
    # The check now hangs; the Stop hook's total is shortened so the test need not wait 540 s.
    config.write_text(json.dumps({"checks": [{"id": "slow", "cmd": "sleep 60",
                                              "timeout": 120}]}))
    monkeypatch.setattr(session_loop, "CHECKS_SECONDS", 2)
    started = time.monotonic()
    answer = session_loop.on_stop({"session_id": "sess-1", "cwd": str(project),
                                   "stop_hook_active": True, "last_assistant_message": "…"})
    assert time.monotonic() - started < BOUND
    assert answer["decision"] == "block"
    assert "check:slow" in answer["reason"]  # failing work, never a pass
    assert "[not finished: stopped when the checks' total time ran out]" in answer["reason"]


# ---------------------------------------------------------------- a read-only .clavain/

def test_a_spent_budget_is_denied_on_a_read_only_state_folder(tmp_path: Path) -> None:
    project = _project(tmp_path, {"budgets": {"maxCommands": 2}})
    state = project / ".clavain"
    for index in range(2):
        assert _hook(project, "PreToolUse", {**_payload("PreToolUse", project),
                                             "tool_input": {"command": f"ls {index}"}}
                     ).returncode == 0
    database = state / "state.sqlite"
    conn = db.connect(database)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("SELECT commands FROM budget_runs").fetchone()[0] == 2
    conn.close()
    assert not Path(f"{database}-shm").exists()  # so no -shm can be made while read-only
    with unwritable(state):
        result = _hook(project, "PreToolUse", {**_payload("PreToolUse", project),
                                               "tool_input": {"command": "ls 2"}})
    assert result.returncode == 0
    decision = json.loads(result.stdout)["hookSpecificOutput"]
    assert decision["permissionDecision"] == "deny", result.stdout
    assert "Bash commands 2 of 2 used" in decision["permissionDecisionReason"]
