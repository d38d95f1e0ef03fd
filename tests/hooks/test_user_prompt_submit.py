"""`/clavain:sprint ARGS` reaches `clavain sprint start --from-prompt` with no shell parsing the
arguments: the UserPromptSubmit hook records the raw prompt's arguments, the CLI takes them.
Every other prompt costs the bash start alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clavain.errors import ClavainError
from clavain.paths import StatePaths
from clavain.sprint import typed_once, typed_request

from .conftest import clavain_project

REPO = Path(__file__).resolve().parents[2]

# What users type, with every shell hazard: the old heredoc's delimiter on a line of its own,
# command substitution, backticks, quotes of both kinds, newlines, a trailing backslash.
HAZARDS = [
    "fix the user's login",
    "rename foo\nCLAVAIN_REQUEST\ntouch PWNED-1\n",
    "add $(touch PWNED-2) and ${HOME} support",
    "make `touch PWNED-3` go away",
    "say \"hi\" 'there' ; touch PWNED-4 && echo done | cat",
    "end with a backslash \\",
    "--complexity 2 multi\nline\n\trequest\n'unbalanced \"quotes",
]


@pytest.mark.parametrize(("prompt", "expected"), [
    ("/clavain:sprint add OAuth", "add OAuth"),
    ("  /clavain:sprint\nline one\nline two", "line one\nline two"),
    ("/clavain:sprint", ""),
    ("/clavain:sprinter add OAuth", None),
    ("please /clavain:sprint add OAuth", None),
    ("/clavain:status", None),
    (None, None),
])
def test_the_arguments_of_the_command_only(prompt, expected) -> None:
    assert typed_request.arguments_of(prompt) == expected


def _submit(run_hook, project: Path, prompt: str, session: str = "sess-1", env=None):
    payload = {"session_id": session, "transcript_path": str(project / "t.jsonl"),
               "cwd": str(project), "hook_event_name": "UserPromptSubmit", "prompt": prompt}
    result = run_hook("UserPromptSubmit", payload, cwd=project, env=env)
    assert result.returncode == 0 and result.stdout == "" and result.stderr == ""
    return result


def _start(project: Path, session: str = "sess-1") -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, CLAVAIN_PYTHON=sys.executable, CLAVAIN_PROJECT_DIR=str(project),
               CLAUDE_CODE_SESSION_ID=session)
    from tests.person import run_below_host

    # As the host runs the command's `!` line: below `claude`, after the hook recorded.
    return run_below_host([str(REPO / "bin" / "clavain"), "sprint", "start", "--from-prompt",
                           "--json"], cwd=project, env=env, tmp=project.parent, timeout=60)


@pytest.mark.parametrize("typed", HAZARDS)
def test_no_shell_ever_parses_the_request(run_hook, tmp_path: Path, typed: str) -> None:
    project = tmp_path / "project"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    _submit(run_hook, project, f"/clavain:sprint {typed}")
    started = _start(project)
    assert started.returncode == 0, started.stderr
    description = json.loads(started.stdout)["description"]
    words = typed.split()
    if words[:2] == ["--complexity", "2"]:
        words = words[2:]
    assert description == " ".join(words)
    assert not list(project.glob("PWNED*")) and not list(tmp_path.glob("PWNED*"))
    # Taken once: a second start is refused, and says when it was taken.
    again = _start(project)
    assert again.returncode == 2
    error = json.loads(again.stdout)["error"]
    assert "sprint-request-sess-1.txt is refused (it is gone; it was already taken at " in error
    assert "the user types /clavain:sprint again" in error and "\n" not in error


def test_sessions_keep_their_own_request_and_resume_passes_through(run_hook,
                                                                   tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    _submit(run_hook, project, "/clavain:sprint --complexity 2 first request", session="a")
    _submit(run_hook, project, "/clavain:sprint --resume", session="b")
    started = _start(project, "a")
    assert json.loads(started.stdout)["complexity"] == 2
    resumed = _start(project, "b")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["description"] == "first request"


def test_other_prompts_start_no_interpreter(run_hook, tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / ".clavain").mkdir(parents=True)
    trace = tmp_path / "trace.jsonl"
    _submit(run_hook, project, "please refactor the parser", env={"CLAVAIN_HOOK_TRACE":
                                                                 str(trace)})
    assert not trace.exists()
    _submit(run_hook, project, "/clavain:sprint do it", env={"CLAVAIN_HOOK_TRACE": str(trace)})
    assert [json.loads(line)["event"] for line in trace.read_text().splitlines()] == [
        "UserPromptSubmit"]


def test_a_missing_record_or_a_bad_session_is_one_line(tmp_path: Path) -> None:
    state = StatePaths(tmp_path / ".clavain", project=tmp_path)
    with pytest.raises(ClavainError, match="no request recorded for session s1"):
        typed_request.take(state, "s1")
    for bad in ("../../etc/passwd", "", "a b", "x" * 300):
        with pytest.raises(ClavainError, match="is not a Claude Code session id"):
            typed_request.record(state, bad, "text")
    typed = state.root / typed_request.TYPED_FOLDER
    typed.mkdir(parents=True)
    (typed / "sprint-request-s2.txt").write_bytes(typed_once.HEADER + b"0" * 32 +
                                                  b"\n\xff\xfe bad bytes")
    with pytest.raises(ClavainError, match="not UTF-8"):
        typed_request.take(state, "s2")


def test_a_fifo_in_place_of_the_record_does_not_hang(tmp_path: Path) -> None:
    state = StatePaths(tmp_path / ".clavain", project=tmp_path)
    typed = state.root / typed_request.TYPED_FOLDER
    typed.mkdir(parents=True)
    os.mkfifo(typed / "sprint-request-s3.txt")
    with pytest.raises(ClavainError, match="no request recorded"):
        typed_request.take(state, "s3")


# ------------------------------------------------------------ good once, for the turn that typed it

def _tool_call(run_hook, project: Path, session: str = "sess-1") -> dict:
    """The PreToolUse hook for one Bash call of `session`, as the host runs it: its output."""
    payload = {"session_id": session, "transcript_path": str(project / "t.jsonl"),
               "cwd": str(project), "hook_event_name": "PreToolUse", "tool_name": "Bash",
               "tool_input": {"command": "ls"}, "tool_use_id": "toolu_1"}
    done = run_hook("PreToolUse", payload, cwd=project)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout) if done.stdout else {}


def _refusal(started: subprocess.CompletedProcess[str]) -> str:
    assert started.returncode == 2, started.stdout + started.stderr
    error = json.loads(started.stdout)["error"]
    assert "\n" not in error and "the user types /clavain:sprint again" in error
    return error


def _rows(project: Path) -> list[tuple]:
    import sqlite3

    conn = sqlite3.connect(project / ".clavain" / "state.sqlite")
    try:
        return conn.execute("SELECT kind, status, why FROM typed_records ORDER BY id").fetchall()
    finally:
        conn.close()


def test_taken_once_even_with_the_file_put_back(run_hook, tmp_path: Path) -> None:
    """The record copied before the take and put back after it, before the next command
    began (so the ancestry and the file's age still pass): its row says it was taken."""
    project = clavain_project(tmp_path)
    _submit(run_hook, project, "/clavain:sprint add a greeting")
    path = project / ".clavain" / "typed" / "sprint-request-sess-1.txt"
    kept = path.read_bytes()
    assert _start(project).returncode == 0
    path.write_bytes(kept)
    error = _refusal(_start(project))
    assert "sprint-request-sess-1.txt is refused (it was already taken at " in error
    assert "(taken by pid " in error and "a record is good once" in error
    assert [status for _, status, _ in _rows(project)] == ["taken"]


def test_every_recorded_command_is_a_kind_the_hook_voids() -> None:
    assert set(typed_request.COMMANDS) == set(typed_once.KINDS)


def test_a_hand_written_record_has_no_row_and_is_refused(tmp_path: Path) -> None:
    project = clavain_project(tmp_path)
    typed = project / ".clavain" / typed_request.TYPED_FOLDER
    typed.mkdir()
    # Plain text, as before the one-time value: no value at all.
    (typed / "sprint-request-sess-1.txt").write_text("--skip-to ship add a greeting")
    assert "(it carries no one-time value: the UserPromptSubmit hook did not write it)" in \
        _refusal(_start(project))
    # The header copied, a value made up: the database holds no record of it.
    (typed / "sprint-request-sess-1.txt").write_text(
        typed_once.with_value("ab" * 16, "--skip-to ship add a greeting"))
    assert "(the state database holds no record of it: the UserPromptSubmit hook did not " \
        "write it)" in _refusal(_start(project))
    assert not (project / ".clavain" / "checkpoint.json").exists()


def test_a_value_that_does_not_match_the_row_is_refused(run_hook, tmp_path: Path) -> None:
    project = clavain_project(tmp_path)
    _submit(run_hook, project, "/clavain:sprint add a greeting")
    path = project / ".clavain" / "typed" / "sprint-request-sess-1.txt"
    value, text = typed_once.split(path.read_bytes())
    assert value is not None and text == b"add a greeting"
    path.write_text(typed_once.with_value("0" * 32, "--skip-to ship add a greeting"))
    assert "(its one-time value does not match the one the hook kept)" in _refusal(
        _start(project))
    assert not (project / ".clavain" / "checkpoint.json").exists()


def test_a_tool_call_voids_the_record_and_the_take_names_why(run_hook, tmp_path: Path) -> None:
    """The turn's slash command had its chance before the first tool call: the PreToolUse hook
    removes the record and voids its row; the take then says so. A record the hook never
    wrote is removed too, and named."""
    project = clavain_project(tmp_path)
    _submit(run_hook, project, "/clavain:sprint add a greeting")
    assert _tool_call(run_hook, project) == {}
    assert not (project / ".clavain" / "typed" / "sprint-request-sess-1.txt").exists()
    error = _refusal(_start(project))
    assert "(it is gone; it was voided at " in error
    assert ": a tool call (Bash) came after it: a record is good only for the turn that typed " \
        "it)" in error
    # Another session's record is not this call's to void.
    _submit(run_hook, project, "/clavain:sprint add a greeting", session="other")
    _tool_call(run_hook, project)
    assert (project / ".clavain" / "typed" / "sprint-request-other.txt").exists()
    # Written by anything else, with no row: removed at the next call and named.
    (project / ".clavain" / "typed" / "budget-request-sess-1.txt").write_text("reset")
    _tool_call(run_hook, project)
    assert not (project / ".clavain" / "typed" / "budget-request-sess-1.txt").exists()
    assert _rows(project)[-1] == ("budget", "void", "the UserPromptSubmit hook did not write it "
                                  "(no record of it in the state database); removed at a tool "
                                  "call (Bash)")


def test_the_void_holds_with_budgets_off(run_hook, tmp_path: Path) -> None:
    project = clavain_project(tmp_path, {"budgets": {"enabled": False}})
    _submit(run_hook, project, "/clavain:sprint add a greeting")
    assert _tool_call(run_hook, project) == {}
    assert [status for _, status, _ in _rows(project)] == ["void"]
    assert "it was voided at" in _refusal(_start(project))


def test_a_call_from_a_folder_with_its_own_state_still_voids_the_sessions(run_hook,
                                                                          tmp_path: Path) -> None:
    """The agent works in a folder holding another `.clavain/` (one it made): its tool call
    still ends the turn in the session's own project, where the person's record is."""
    project = clavain_project(tmp_path)
    other = project / "vendor" / "lib"
    (other / ".clavain").mkdir(parents=True)
    _submit(run_hook, project, "/clavain:sprint add a greeting")
    payload = {"session_id": "sess-1", "transcript_path": str(project / "t.jsonl"),
               "cwd": str(other), "hook_event_name": "PreToolUse", "tool_name": "Bash",
               "tool_input": {"command": "ls"}, "tool_use_id": "toolu_2"}
    done = run_hook("PreToolUse", payload, cwd=other,
                    env={"CLAUDE_PROJECT_DIR": str(project)})
    assert done.returncode == 0, done.stderr
    assert [status for _, status, _ in _rows(project)] == ["void"]
    assert "it was voided at" in _refusal(_start(project))


def test_a_new_prompt_voids_the_one_before(run_hook, tmp_path: Path) -> None:
    project = clavain_project(tmp_path)
    _submit(run_hook, project, "/clavain:budget reset")
    _submit(run_hook, project, "/clavain:sprint add a greeting")
    assert _rows(project) == [("budget", "void", "a later prompt was typed"),
                              ("sprint", "pending", None)]


def test_a_tool_call_counted_after_the_record_refuses_it(run_hook, tmp_path: Path) -> None:
    """Fail closed: whatever kept a record past a tool call (a void that was not written), a
    record older than the session's last counted call is not the turn's."""
    import sqlite3

    project = clavain_project(tmp_path)
    _submit(run_hook, project, "/clavain:sprint add a greeting")
    path = project / ".clavain" / "typed" / "sprint-request-sess-1.txt"
    kept = path.read_bytes()
    _tool_call(run_hook, project)  # counted (budgets on), and voided
    path.write_bytes(kept)
    conn = sqlite3.connect(project / ".clavain" / "state.sqlite")
    with conn:  # as if the void had never been written
        conn.execute("UPDATE typed_records SET status = 'pending', ended_at = NULL, why = NULL")
    conn.close()
    error = _refusal(_start(project))
    assert "(it was voided: a tool call (Bash at " in error
    assert _rows(project)[-1][1] == "void"
    # A row that says it was recorded after every call (a forger's): the file's own time,
    # which cannot be set back, still comes before the counted call.
    _submit(run_hook, project, "/clavain:sprint add a greeting")
    time.sleep(0.05)
    conn = sqlite3.connect(project / ".clavain" / "state.sqlite")
    with conn:  # a counted call whose void was lost: the file stays
        conn.execute("UPDATE typed_records SET recorded_at = '2999-01-01T00:00:00.000Z' "
                     "WHERE status = 'pending'")
        conn.execute("INSERT INTO budget_calls (run_key, at, session_id, tool, kind, decision) "
                     "VALUES ('session:sess-1', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), "
                     "'sess-1', 'Edit', 'edit', 'allow')")
    conn.close()
    assert "(it was voided: a tool call (Edit at " in _refusal(_start(project))


def test_a_void_that_cannot_be_written_denies_the_call(run_hook, tmp_path: Path) -> None:
    """The database stays locked past the hook's wait: the call that might take the record is
    denied (the file is gone already), and nothing takes it afterwards."""
    import sqlite3

    project = clavain_project(tmp_path, {"budgets": {"enabled": False}})
    _submit(run_hook, project, "/clavain:sprint add a greeting")
    holder = sqlite3.connect(project / ".clavain" / "state.sqlite", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        decided = _tool_call(run_hook, project)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    output = decided["hookSpecificOutput"]
    assert output["permissionDecision"] == "deny"
    assert output["permissionDecisionReason"].startswith(
        "Clavain could not void the record of what the user typed in this session "
        "(OperationalError: database is locked), so this call is denied")
    assert not (project / ".clavain" / "typed" / "sprint-request-sess-1.txt").exists()
    assert "no request recorded for session sess-1" in _refusal(_start(project))


def test_a_damaged_or_locked_database_lets_no_record_through(run_hook, tmp_path: Path) -> None:
    import sqlite3

    project = clavain_project(tmp_path)
    _submit(run_hook, project, "/clavain:sprint --skip-to ship add a greeting")
    holder = sqlite3.connect(project / ".clavain" / "state.sqlite", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:  # the take cannot mark it taken: never honoured
        env = dict(os.environ, CLAVAIN_BUSY_TIMEOUT_MS="200")
        error = _refusal(_start_with(project, env))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert "(the state database could not mark it taken (database is locked))" in error
    # Damaged: the hook cannot void (denied), and the take cannot read it (refused).
    _submit(run_hook, project, "/clavain:sprint --skip-to ship add a greeting")
    kept = (project / ".clavain" / "typed" / "sprint-request-sess-1.txt").read_bytes()
    for name in ("state.sqlite-wal", "state.sqlite-shm"):
        (project / ".clavain" / name).unlink(missing_ok=True)
    (project / ".clavain" / "state.sqlite").write_bytes(b"not a database" * 100)
    output = _tool_call(run_hook, project)["hookSpecificOutput"]
    assert output["permissionDecision"] == "deny"
    assert "could not void the record" in output["permissionDecisionReason"]
    (project / ".clavain" / "typed" / "sprint-request-sess-1.txt").write_bytes(kept)
    assert "could not mark it taken" in _refusal(_start(project))
    assert not (project / ".clavain" / "checkpoint.json").exists()


def _start_with(project: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    from tests.person import run_below_host

    env = dict(env, CLAVAIN_PYTHON=sys.executable, CLAVAIN_PROJECT_DIR=str(project),
               CLAUDE_CODE_SESSION_ID="sess-1")
    return run_below_host([str(REPO / "bin" / "clavain"), "sprint", "start", "--from-prompt",
                           "--json"], cwd=project, env=env, tmp=project.parent, timeout=60)
