"""Shortcuts a review found past the PreToolUse hook, each one Bash call: paths spelled with
quotes, globs, braces, case or a variable; a `cd` into the state folder first; read commands
that write (`sort -o`, `uniq IN OUT`); a command too long to read whole; Claude Code's own
settings (which hold the hooks and the sandbox); and the denials that need no counters holding
when the database is broken or budgets are off. Everyday commands that merely name Clavain
stay allowed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import clavain_project, payload_for

DENIED = [
    "cd .cla* && printf '{\"budgets\":{\"maxCommands\":999}}' > config.json",
    "cd .cla* && sqlite3 state.sqlite 'DELETE FROM budget_calls'",
    "sed -i s/x/y/ .clav\"\"ain/checkpoint.json",
    "cd .cla*/loops && rm -rf limits",
    "ln -s .clav\"\"ain st",
    "echo '{}' | sort -o .clavain/config.json",
    "printf '{}' | uniq - .clavain/config.json",
    "echo x > .CLAVAIN/checkpoint.json",
    "mkdir -p w/.clav\"\"ain",
    "d=.clav; cd ${d}ain; rm -rf loops",
    "python3 make.py > .cla{v,}ain/checkpoint.json",
    "echo " + "A" * 70_000 + "; sqlite3 .clavain/state.sqlite 'DELETE FROM budget_calls'",
    "echo '{\"disableAllHooks\": true}' > .claude/settings.local.json",
    "cd .claude && sed -i s/true/false/ settings.json",
    "echo clavain budget reset | xargs -I{} sh -c {}",
    "node -e \"require('fs').writeFileSync('.clavain/checkpoint.json', '{}')\"",
]
ALLOWED = [
    "cat lib/clavain/sprint/lifecycle.py",
    "grep -n person_decisions .clavain/checkpoint.json",
    "git ls-files | grep -v clavain | xargs wc -l",
    "pytest -k lifecycle  # clavain",
    "cat .clavain/checkpoint.json > /tmp/checkpoint-copy.json",
    "echo note > .clavain/scratch/handoff.md",
    "rm -rf build/*",
]


def _project(tmp_path: Path, config: dict | None = None) -> Path:
    return clavain_project(tmp_path, config)


def _decide(run_hook, project: Path, tool: str, tool_input: dict) -> dict | None:
    payload = {**payload_for("PreToolUse", project), "session_id": "s1",
               "hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": tool_input}
    result = run_hook("PreToolUse", payload, cwd=project)
    assert result.returncode == 0 and result.stderr == ""
    return json.loads(result.stdout) if result.stdout else None


def _denied(output: dict | None) -> bool:
    return bool(output) and output.get("hookSpecificOutput", {}).get(
        "permissionDecision") == "deny"


@pytest.mark.parametrize("command", DENIED, ids=lambda c: c[:60])
def test_each_shortcut_is_denied(run_hook, tmp_path: Path, command: str) -> None:
    project = _project(tmp_path)
    assert _denied(_decide(run_hook, project, "Bash", {"command": command}))


@pytest.mark.parametrize("command", ALLOWED)
def test_everyday_commands_that_name_clavain_still_run(run_hook, tmp_path: Path,
                                                       command: str) -> None:
    project = _project(tmp_path)
    assert not _denied(_decide(run_hook, project, "Bash", {"command": command}))


def test_the_edit_tools_may_not_change_claude_codes_settings(run_hook, tmp_path: Path) -> None:
    project = _project(tmp_path)
    for name in ("settings.json", "settings.local.json"):
        path = str(project / ".claude" / name)
        output = _decide(run_hook, project, "Write", {"file_path": path, "content": "{}"})
        assert _denied(output), name
        assert "Claude Code's settings" in output["hookSpecificOutput"][
            "permissionDecisionReason"]
    agent = str(project / ".claude" / "agents" / "x.md")
    assert not _denied(_decide(run_hook, project, "Write", {"file_path": agent, "content": "x"}))


def test_denials_that_need_no_counters_hold_on_a_broken_database(run_hook,
                                                                 tmp_path: Path) -> None:
    project = _project(tmp_path)
    _decide(run_hook, project, "Bash", {"command": "ls"})  # the database now exists
    database = project / ".clavain" / "state.sqlite"
    with open(database, "r+b") as handle:
        handle.write(b"not a database at all, sorry")
    for command in ("echo x > .clavain/checkpoint.json", "clavain budget reset",
                    "clavain sprint done execute --waive x"):
        assert _denied(_decide(run_hook, project, "Bash", {"command": command})), command
    # What needs the counters still runs, with the person told (on stderr too).
    payload = {**payload_for("PreToolUse", project), "session_id": "s1", "tool_name": "Bash",
               "hook_event_name": "PreToolUse", "tool_input": {"command": "ls"}}
    result = run_hook("PreToolUse", payload, cwd=project)
    assert result.returncode == 0 and "systemMessage" in json.loads(result.stdout)


def test_the_state_folder_stays_guarded_with_budgets_off(run_hook, tmp_path: Path) -> None:
    project = _project(tmp_path, {"budgets": {"enabled": False}})
    for command in ("echo x > .clavain/checkpoint.json", "clavain budget reset"):
        assert _denied(_decide(run_hook, project, "Bash", {"command": command})), command
    assert _decide(run_hook, project, "Bash", {"command": "ls"}) is None
    assert not (project / ".clavain" / "state.sqlite").exists()  # nothing counted
