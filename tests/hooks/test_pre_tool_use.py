"""The budget hooks as the host runs them: PreToolUse denies with the host's JSON, fails open on
a broken database, stays stdlib-only; the async PostToolUse hooks remember red tests and measure
tokens and cost from the transcript."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clavain.store import db

from .conftest import REPO, clavain_project, payload_for


def _project(tmp_path: Path, config: dict | None = None) -> Path:
    return clavain_project(tmp_path, config)


def _payload(project: Path, tool: str, tool_input: dict, session: str = "s1", **extra) -> dict:
    return {**payload_for("PreToolUse", project), "session_id": session,
            "hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": tool_input,
            **extra}


def _pre(run_hook, project: Path, tool: str, tool_input: dict, env=None, **extra):
    result = run_hook("PreToolUse", _payload(project, tool, tool_input, **extra), cwd=project,
                      env=env)
    assert result.returncode == 0 and result.stderr == ""
    return json.loads(result.stdout)["hookSpecificOutput"] if result.stdout else None


def test_the_fourth_command_is_denied_with_a_reason(run_hook, tmp_path: Path) -> None:
    project = _project(tmp_path, {"budgets": {"maxCommands": 3}})
    outputs = [_pre(run_hook, project, "Bash", {"command": f"ls {i}"}) for i in range(4)]
    assert outputs[:2] == [None, None]
    assert outputs[2]["additionalContext"].startswith("Clavain budget: Bash commands 3 of 3")
    assert outputs[3]["permissionDecision"] == "deny"
    assert "Bash commands 3 of 3 used" in outputs[3]["permissionDecisionReason"]
    # The env beats the config file.
    assert _pre(run_hook, project, "Bash", {"command": "ls"}, session="s2",
                env={"CLAVAIN_BUDGET_MAX_COMMANDS": "0"})["permissionDecision"] == "deny"


def test_a_project_without_clavain_state_is_left_alone(run_hook, tmp_path: Path) -> None:
    project = tmp_path / "plain"
    project.mkdir()
    assert _pre(run_hook, project, "Bash", {"command": "ls"}) is None
    assert not (project / ".clavain").exists()


def test_disabled_budgets_count_nothing(run_hook, tmp_path: Path) -> None:
    project = _project(tmp_path, {"budgets": {"enabled": False, "maxCommands": 0}})
    assert _pre(run_hook, project, "Bash", {"command": "ls"}) is None
    assert not (project / ".clavain" / "state.sqlite").exists()


def test_a_broken_database_lets_the_call_run_and_tells_the_person(run_hook,
                                                                  tmp_path: Path) -> None:
    project = _project(tmp_path, {"budgets": {"maxCommands": 0}})
    (project / ".clavain" / "state.sqlite").write_bytes(b"not a database at all" * 50)
    result = run_hook("PreToolUse", _payload(project, "Bash", {"command": "ls"}), cwd=project)
    output = json.loads(result.stdout)
    assert "hookSpecificOutput" not in output  # the tool runs (nothing can be counted)
    assert "file is not a database" in output["systemMessage"]
    log = (project / ".clavain" / "logs" / "hooks.log").read_text()
    assert "PreToolUse" in log and "could not record" in log


def test_a_bad_config_is_one_warning_and_the_defaults(run_hook, tmp_path: Path) -> None:
    project = _project(tmp_path, {"budgets": {"profile": "reckless", "maxCommands": "x"}})
    first = _pre(run_hook, project, "Bash", {"command": "ls"})
    assert 'budget profile "reckless"' in first["additionalContext"]
    assert 'maxCommands "x"' in first["additionalContext"]
    assert _pre(run_hook, project, "Bash", {"command": "ls 2"}) is None  # warned once
    (project / ".clavain" / "config.json").write_text("{broken")
    warned = _pre(run_hook, project, "Bash", {"command": "ls 3"}, session="s3")
    assert "unreadable" in warned["additionalContext"]


def test_a_failed_test_rerun_unchanged_is_denied_in_yolo(run_hook, tmp_path: Path) -> None:
    project = _project(tmp_path, {"budgets": {"profile": "yolo"}})
    command = {"command": "pytest -q"}
    assert _pre(run_hook, project, "Bash", command) is None
    failure = {**_payload(project, "Bash", command), "hook_event_name": "PostToolUseFailure",
               "error": "Exit code 1\nFAILED", "is_interrupt": False}
    assert run_hook("PostToolUseFailure", failure, cwd=project).returncode == 0
    denied = _pre(run_hook, project, "Bash", command)
    assert denied["permissionDecision"] == "deny"
    assert "failed and nothing has changed" in denied["permissionDecisionReason"]


def test_an_interrupted_or_timed_out_test_is_not_red(run_hook, tmp_path: Path) -> None:
    project = _project(tmp_path, {"budgets": {"profile": "yolo"}})
    command = {"command": "pytest -x", "timeout": 1000}
    for extra in ({"is_interrupt": True, "error": "Interrupted"},
                  {"is_interrupt": False, "error": "Command timed out after 1s"}):
        assert _pre(run_hook, project, "Bash", command) is None
        failure = {**_payload(project, "Bash", command), "hook_event_name": "PostToolUseFailure",
                   **extra}
        assert run_hook("PostToolUseFailure", failure, cwd=project).returncode == 0
    third = _pre(run_hook, project, "Bash", command)  # a longer timeout may run it again
    assert third is None or "permissionDecision" not in third


def test_tokens_and_cost_are_measured_in_the_background(run_hook, tmp_path: Path) -> None:
    project = _project(tmp_path)
    transcript = tmp_path / "session.jsonl"
    transcript.write_text(json.dumps({"type": "assistant", "requestId": "r1", "message": {
        "id": "m1", "model": "claude-sonnet-4-5", "usage": {
            "input_tokens": 1000, "output_tokens": 1000, "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0}}}) + "\n")
    _pre(run_hook, project, "Bash", {"command": "ls"}, transcript_path=str(transcript))
    conn = db.connect(project / ".clavain" / "state.sqlite")
    assert conn.execute("SELECT tokens FROM budget_runs").fetchone()["tokens"] == 0  # not yet
    conn.execute("UPDATE budget_runs SET measured_at = '2000-01-01T00:00:00.000Z'")
    _pre(run_hook, project, "Bash", {"command": "ls 1"}, transcript_path=str(transcript))
    deadline = time.monotonic() + 30
    while conn.execute("SELECT tokens FROM budget_runs").fetchone()["tokens"] == 0:
        assert time.monotonic() < deadline, "the measurement never landed"
        time.sleep(0.1)
    row = conn.execute("SELECT tokens, cost_usd, measured_at FROM budget_runs").fetchone()
    assert row["tokens"] == 2000 and row["cost_usd"] == pytest.approx(0.018)
    # The next call within 30 s starts no second measurement.
    measured_at = row["measured_at"]
    _pre(run_hook, project, "Bash", {"command": "ls 2"}, transcript_path=str(transcript))
    assert conn.execute("SELECT measured_at FROM budget_runs").fetchone()[0] == measured_at
    assert not (project / ".clavain" / "logs" / "hooks.log").exists()


def test_spent_dollars_deny_the_next_call(run_hook, tmp_path: Path) -> None:
    project = _project(tmp_path, {"budgets": {"maxCostUsd": 0.01}})
    _pre(run_hook, project, "Bash", {"command": "ls"})
    conn = db.connect(project / ".clavain" / "state.sqlite")
    conn.execute("UPDATE budget_runs SET cost_usd = 0.02")
    denied = _pre(run_hook, project, "Edit", {"file_path": "a", "old_string": "x",
                                              "new_string": "y"})
    assert denied["permissionDecision"] == "deny"
    assert "Dollars $0.02 of $0.01" in denied["permissionDecisionReason"]


def test_the_hot_path_is_stdlib_only(tmp_path: Path) -> None:
    project = _project(tmp_path, {"budgets": {"maxCommands": 5}})
    env = dict(os.environ, PYTHONPATH=str(REPO / "lib"), CLAUDE_PROJECT_DIR=str(project),
               CLAVAIN_BOOTSTRAP="0")
    for _ in range(2):  # the second run is the steady state (no migration)
        result = subprocess.run(
            [sys.executable, "-S", "-X", "importtime", "-c",
             "import sys; from clavain.hooks import main; sys.exit(main())", "PreToolUse"],
            input=json.dumps(_payload(project, "Bash", {"command": "pytest -q"})),
            capture_output=True, text=True, env=env, cwd=project, timeout=60)
    names = {line.rsplit("|", 1)[1].strip() for line in result.stderr.splitlines()
             if line.startswith("import time:") and "|" in line}
    assert "clavain.guards.budget" in names
    # Each of these costs more than the whole budget check (measured: benchmarks/).
    forbidden = {"pydantic", "jsonschema", "filelock", "clavain.models", "shlex", "typing",
                 "re", "json", "pathlib", "datetime", "hashlib", "subprocess", "contextlib"}
    assert not names & forbidden, names & forbidden


def test_the_agent_cannot_waive_a_sprint_gate(run_hook, tmp_path: Path) -> None:
    project = _project(tmp_path)
    for command in ('clavain sprint done quality-gates --waive "reviewers are slow"',
                    "cd src && clavain sprint done ship --waive=done"):
        denied = _pre(run_hook, project, "Bash", {"command": command})
        assert denied["permissionDecision"] == "deny"
        assert "`clavain … --waive` is a person's decision" in \
            denied["permissionDecisionReason"]
    # The gate itself, and waive mentioned elsewhere, are not the agent lifting it.
    assert _pre(run_hook, project, "Bash", {"command": "clavain sprint done ship"}) is None
    assert _pre(run_hook, project, "Bash", {"command": "grep -- --waive README.md"}) is None


@pytest.mark.parametrize("command", [
    "bash -c 'clavain sprint done ship --waive=x'",
    "env FOO=1 clavain sprint done ship --waive x",
    '"$CLAVAIN_BIN" sprint done quality-gates --waive "slow"',
    "python3 -m clavain sprint done ship --waive x",
    "(cd src && /opt/plugin/bin/clavain sprint done test --waive r)",
    # Split quotes, an emptied variable, words made at run time: read as words, or refused.
    'CLAUDECODE= clavain sprint done execute --wai""ve "not needed"',
    "clavain sprint done execute --wai\\ve x",
    "env -u CLAUDECODE clavain sprint done execute --waive x",
    "x=reset; clavain budget $x",
    'clavain budget "$(echo reset)"',
    "clavain budget `echo reset`",
    "clavain budget $'re\\x73et'",
    'eval "clavain budget reset"',
    "echo reset | xargs clavain budget",
    "c=clavain; $c budget reset",
    "$CLAVAIN_BIN budget reset",
    "setsid clavain budget reset &",
    "nohup clavain loop --reset-circuit --run r &",
    "clavain sprint start --skip-to execute add greeting",
    "clavain sprint start --from-prompt",
    "clavain loop session-start fix everything",
    "echo clavain sprint start --from-prompt | sh",
    "xargs clavain < args.txt",
    'python3 -c "from clavain.sprint import lifecycle; lifecycle.done(s, \'ship\', waive=1)"',
])
def test_no_spelling_of_a_persons_decision_gets_past(run_hook, tmp_path: Path,
                                                     command: str) -> None:
    project = _project(tmp_path)
    denied = _pre(run_hook, project, "Bash", {"command": command})
    assert denied is not None and denied["permissionDecision"] == "deny", command
    assert "is a person's decision" in denied["permissionDecisionReason"]


def test_a_link_planted_in_the_agents_folder_leads_nowhere(run_hook, tmp_path: Path) -> None:
    """`.clavain/scratch/up -> ..` would turn a write into the agent's folder into one beside the
    checkpoint (or the record of what the person typed): making the link is refused, and a
    path through one already there is judged where it really leads."""
    project = _project(tmp_path)
    for command in ("ln -s .. .clavain/scratch/up", "cd .clavain/scratch && ln -s ../typed t",
                    "ln -s .. .clav*/scratch/up", "ln -s .. '.clav'ain/scratch/up"):
        denied = _pre(run_hook, project, "Bash", {"command": command})
        assert denied is not None and denied["permissionDecision"] == "deny", command
    (project / ".clavain" / "scratch").mkdir()
    (project / ".clavain" / "scratch" / "up").symlink_to("..")
    target = str(project / ".clavain" / "scratch" / "up" / "typed" / "sprint-request-s1.txt")
    for tool, tool_input in (("Write", {"file_path": target, "content": "--waive ship x"}),
                             ("Bash", {"command": f"echo '--waive ship x' > {target}"})):
        denied = _pre(run_hook, project, tool, tool_input)
        assert denied is not None and denied["permissionDecision"] == "deny", tool
    handoff = str(project / ".clavain" / "scratch" / "handoff.md")
    assert _pre(run_hook, project, "Write", {"file_path": handoff, "content": "notes"}) is None


@pytest.mark.parametrize("command", [
    '"$CLAVAIN_BIN" kv put --key out.notes --value "$(cat notes.md)"',
    "clavain graph show $NODE", "clavain sprint done execute", "clavain status",
    "$EDITOR notes.md", "grep -rn -- --waive docs",
])
def test_everyday_clavain_commands_are_not_taken_for_a_persons(run_hook, tmp_path: Path,
                                                               command: str) -> None:
    project = _project(tmp_path)
    decided = _pre(run_hook, project, "Bash", {"command": command})
    assert decided is None or decided["permissionDecision"] != "deny", (command, decided)


@pytest.mark.parametrize(("tool", "tool_input"), [
    ("Write", {"file_path": "/p/.clavain/checkpoint.json", "content": "{}"}),
    ("Write", {"file_path": "/p/.clavain/verdicts/clavain-reviewer-plan--d1.json",
               "content": "{}"}),
    ("Edit", {"file_path": ".clavain/state.sqlite", "old_string": "a", "new_string": "b"}),
    ("Bash", {"command": "rm .clavain/checkpoint.json"}),
    ("Bash", {"command": "echo '{}' > .clavain/verdicts/x.json"}),
    ("Bash", {"command": "sqlite3 .clavain/state.sqlite \"UPDATE nodes SET status='done'\""}),
])
def test_the_agent_cannot_edit_clavains_state_by_hand(run_hook, tmp_path: Path, tool: str,
                                                     tool_input: dict) -> None:
    project = _project(tmp_path)
    denied = _pre(run_hook, project, tool, tool_input)
    assert denied["permissionDecision"] == "deny"
    assert "changes only through the `clavain` CLI" in denied["permissionDecisionReason"]


@pytest.mark.parametrize(("tool", "tool_input"), [
    ("Write", {"file_path": "/p/.clavain/scratch/handoff.md", "content": "done: x"}),
    ("Bash", {"command": "cat .clavain/verdicts/x.json"}),
    ("Bash", {"command": "clavain verdicts summary"}),
])
def test_reading_state_and_writing_the_handoff_are_allowed(run_hook, tmp_path: Path, tool: str,
                                                           tool_input: dict) -> None:
    project = _project(tmp_path)
    assert _pre(run_hook, project, tool, tool_input) is None


# ---------------------------------------------------------------- what a failure does to a call

def test_a_locked_database_is_a_deny_within_the_bound_never_an_allow(run_hook,
                                                                     tmp_path: Path) -> None:
    project = _project(tmp_path, {"budgets": {"maxCommands": 5}})
    assert _pre(run_hook, project, "Bash", {"command": "ls"}) is None  # creates the database
    holder = db.connect(project / ".clavain" / "state.sqlite")
    holder.execute("BEGIN IMMEDIATE")  # another writer holds the lock past the hook's bound
    try:
        result = run_hook("PreToolUse", _payload(project, "Bash", {"command": "ls -la"}),
                          cwd=project)  # run_hook's own 60 s timeout is the hang guard
    finally:
        holder.rollback()
        holder.close()
    denied = json.loads(result.stdout)["hookSpecificOutput"]
    assert denied["permissionDecision"] == "deny"
    assert "stayed locked" in denied["permissionDecisionReason"]
    with db.connect(project / ".clavain" / "state.sqlite") as conn:
        assert conn.execute("SELECT commands FROM budget_runs").fetchone()[0] == 1  # not counted


def test_a_symlinked_database_is_refused_not_written_through(run_hook, tmp_path: Path) -> None:
    project = _project(tmp_path)
    outside = tmp_path / "elsewhere.sqlite"
    db.connect(outside).close()
    (project / ".clavain" / "state.sqlite").symlink_to(outside)
    before = outside.read_bytes()
    denied = _pre(run_hook, project, "Bash", {"command": "ls"})
    assert denied["permissionDecision"] == "deny"
    assert "is a symlink" in denied["permissionDecisionReason"]
    assert outside.read_bytes() == before


@pytest.mark.parametrize("name", ["checkpoint.json", "config.json"])
def test_a_fifo_state_file_never_blocks_the_hook(run_hook, tmp_path: Path, name: str) -> None:
    project = _project(tmp_path)
    os.mkfifo(project / ".clavain" / name)
    result = run_hook("PreToolUse", _payload(project, "Bash", {"command": "ls"}), cwd=project)
    assert result.returncode == 0  # returned (run_hook's timeout would fail the test)
    with db.connect(project / ".clavain" / "state.sqlite") as conn:
        assert conn.execute("SELECT commands FROM budget_runs").fetchone()[0] == 1


def test_a_denial_that_needs_no_counters_holds_when_counting_fails(tmp_path: Path,
                                                                   monkeypatch) -> None:
    """Whatever fails after a call is described — a bug in the counting, a damaged database,
    budgets turned off — an edit of the state folder is still denied; only a call nothing
    refuses without counters is left to the failure (the dispatcher logs it and it runs)."""
    from clavain.guards import budget, gate

    project = _project(tmp_path)
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(project))

    def broken(*args, **kwargs):
        raise RuntimeError("a bug in the counting")

    monkeypatch.setattr(budget, "check", broken)
    edit = _payload(project, "Bash", {"command": "echo x > .clavain/checkpoint.json"})
    output = gate.pre_tool_use(edit)
    assert output["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert output["hookSpecificOutput"]["permissionDecisionReason"] == budget.STATE
    with pytest.raises(RuntimeError):
        gate.pre_tool_use(_payload(project, "Bash", {"command": "ls"}))


def test_a_call_that_cannot_be_recorded_runs_and_the_person_is_told(tmp_path: Path,
                                                                   monkeypatch) -> None:
    """Read-only state or a full disk: not a silent allow (root writes through modes, so the
    database's refusal is given here in-process)."""
    from clavain.guards import gate
    from clavain.store.db import sqlite3

    project = _project(tmp_path)
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(project))

    def refuse(path):
        raise sqlite3.OperationalError("attempt to write a readonly database")

    monkeypatch.setattr(gate, "_open_database", refuse)
    output = gate.pre_tool_use(_payload(project, "Bash", {"command": "ls"}))
    assert "permissionDecision" not in json.dumps(output)
    assert output["systemMessage"].startswith("Clavain could not record this tool call "
                                              "(attempt to write a readonly database)")
    assert "could not record" in (project / ".clavain" / "logs" / "hooks.log").read_text()


def test_session_start_says_when_calls_cannot_be_recorded(tmp_path: Path, monkeypatch) -> None:
    from clavain.hooks import session_start
    from clavain.paths import StatePaths

    project = _project(tmp_path)
    state = StatePaths.discover(project)
    assert session_start.recording_problem(state) == ""
    real = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: False if str(path).endswith(
        ".clavain") else real(path, mode))
    assert "cannot record tool calls here" in session_start.recording_problem(state)


def test_a_project_without_clavain_costs_no_interpreter(run_hook, tmp_path: Path) -> None:
    project = tmp_path / "plain"
    project.mkdir()
    trace = tmp_path / "trace.jsonl"
    result = run_hook("PreToolUse", _payload(project, "Bash", {"command": "ls"}), cwd=project,
                      env={"CLAVAIN_HOOK_TRACE": str(trace)})
    assert (result.returncode, result.stdout) == (0, "") and not trace.exists()
    # A budget variable set, or a Clavain folder above: the Python hook runs.
    run_hook("PreToolUse", _payload(project, "Bash", {"command": "ls"}), cwd=project,
             env={"CLAVAIN_HOOK_TRACE": str(trace), "CLAVAIN_BUDGET_MAX_COMMANDS": "9"})
    assert trace.exists()
    (tmp_path / ".clavain").mkdir()
    sub = project / "src"
    sub.mkdir()
    before = len(trace.read_text().splitlines())
    run_hook("PreToolUse", _payload(sub, "Bash", {"command": "ls"}), cwd=sub,
             env={"CLAVAIN_HOOK_TRACE": str(trace)})
    assert len(trace.read_text().splitlines()) == before + 1


def test_a_relative_project_dir_never_hangs_the_bash_walk(run_hook, tmp_path: Path) -> None:
    project = _project(tmp_path, {"budgets": {"maxCommands": 0}})
    for relative in ("project", ".", "nowhere/deeper"):
        result = run_hook("PreToolUse", _payload(project, "Bash", {"command": "ls"}),
                          cwd=tmp_path if relative != "." else project,
                          env={"CLAUDE_PROJECT_DIR": relative})
        assert result.returncode == 0  # returned: run_hook's timeout is the hang guard
    # Found from the call's own folder even when CLAUDE_PROJECT_DIR names another one.
    denied = run_hook("PreToolUse", _payload(project, "Bash", {"command": "ls"}), cwd=project,
                      env={"CLAUDE_PROJECT_DIR": str(tmp_path / "elsewhere")})
    assert json.loads(denied.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_a_file_named_clavain_is_no_way_out_of_the_budget(run_hook, tmp_path: Path) -> None:
    project = _project(tmp_path, {"budgets": {"maxCommands": 0}})
    sub = project / "sub"
    sub.mkdir()
    (sub / ".clavain").write_text("")  # `touch sub/.clav""ain`, then `cd sub`
    denied = _pre(run_hook, sub, "Bash", {"command": "ls"})
    assert denied["permissionDecision"] == "deny"


def test_writing_any_clavain_config_is_lifting_the_budget(run_hook, tmp_path: Path) -> None:
    project = _project(tmp_path)
    for path in (str(project / "sub" / ".clavain" / "config.json"), ".clavain/config.json"):
        denied = _pre(run_hook, project, "Write",
                      {"file_path": path, "content": '{"budgets": {"enabled": false}}'})
        assert denied["permissionDecision"] == "deny"
        assert "person's decision" in denied["permissionDecisionReason"]


def test_a_spent_budget_still_denies_when_the_call_cannot_be_recorded(tmp_path: Path,
                                                                    monkeypatch) -> None:
    from clavain.guards import gate
    from clavain.store.db import sqlite3

    project = _project(tmp_path, {"budgets": {"maxCommands": 1}})
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(project))
    first = gate.pre_tool_use(_payload(project, "Bash", {"command": "ls"}))  # 1 of 1: allowed
    assert "permissionDecision" not in json.dumps(first)

    def refuse(path):
        raise sqlite3.OperationalError("attempt to write a readonly database")

    monkeypatch.setattr(gate, "_open_database", refuse)
    denied = gate.pre_tool_use(_payload(project, "Bash", {"command": "ls -la"}))
    assert denied["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_a_call_ends_at_once_with_its_answer_out_and_its_write_checkpointed(
        run_hook, tmp_path: Path) -> None:
    """The hook skips the interpreter's teardown (`hooks.main_and_exit`): the host still gets
    the whole answer, and the database was closed first, so its WAL is checkpointed into the
    file and gone — a reader that later finds `.clavain/` read-only (and reads the file alone)
    still sees every count."""
    project = _project(tmp_path, {"budgets": {"maxCommands": 2}})
    assert _pre(run_hook, project, "Bash", {"command": "ls a"}) is None
    state = project / ".clavain"
    assert not (state / "state.sqlite-wal").exists() and not (state / "state.sqlite-shm").exists()
    warned = _pre(run_hook, project, "Bash", {"command": "ls b"})
    assert warned["additionalContext"].startswith("Clavain budget: Bash commands 2 of 2")
    denied = _pre(run_hook, project, "Bash", {"command": "ls c"})
    assert denied["permissionDecision"] == "deny" and denied["permissionDecisionReason"]
    conn = sqlite3.connect(f"file:{state / 'state.sqlite'}?immutable=1", uri=True)
    assert conn.execute("SELECT commands FROM budget_runs").fetchone()[0] == 2
