"""The hook hot path imports the standard library only (pydantic alone costs ~200 ms)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clavain.hooks import EVENTS

from .conftest import REPO, payload_for

FORBIDDEN = ("pydantic", "pydantic_core", "jsonschema", "filelock", "click", "clavain.models")


def imported_modules(event: str, cwd: Path) -> set[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO / "lib"), CLAUDE_PROJECT_DIR=str(cwd),
               CLAVAIN_BOOTSTRAP="0")
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "clavain.hooks", event],
        input=json.dumps(payload_for(event, cwd)), capture_output=True, text=True, env=env,
        cwd=cwd, timeout=60,
    )
    assert result.returncode == 0
    names = set()
    for line in result.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip())
    assert "clavain.hooks" in names, result.stderr[-2000:]
    return names


@pytest.mark.parametrize("event", EVENTS)
def test_hook_path_is_stdlib_only(event: str, tmp_path: Path) -> None:
    names = imported_modules(event, tmp_path)
    offenders = sorted(n for n in names if n.split(".")[0] in FORBIDDEN or
                       any(n == f or n.startswith(f + ".") for f in FORBIDDEN))
    assert not offenders, f"{event} imports {offenders}"


def test_detector_sees_a_forbidden_import(tmp_path: Path) -> None:
    """The check above can fail: importing pydantic shows up in the same parse."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "lib"))
    result = subprocess.run([sys.executable, "-X", "importtime", "-c", "import pydantic"],
                            capture_output=True, text=True, env=env, timeout=60)
    assert any(line.rsplit("|", 1)[1].strip() == "pydantic"
               for line in result.stderr.splitlines() if line.startswith("import time:"))


# Where a write lands (issue 32) is judged only for a call that may write: the common call
# (reads, tests) imports none of it and looks at no path on disk.
LANDING_MODULES = {"clavain.guards.landing", "clavain.guards.command_landing",
                   "clavain.guards.writes", "clavain.guards.archives", "clavain.guards.find_rule"}


def _pre_tool_use_imports(project: Path, command: str) -> set[str]:
    payload = {**payload_for("PreToolUse", project), "session_id": "s1", "tool_name": "Bash",
               "hook_event_name": "PreToolUse", "tool_input": {"command": command}}
    env = dict(os.environ, PYTHONPATH=str(REPO / "lib"), CLAUDE_PROJECT_DIR=str(project),
               CLAVAIN_BOOTSTRAP="0")
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "clavain.hooks",
                             "PreToolUse"], input=json.dumps(payload), capture_output=True,
                            text=True, env=env, cwd=project, timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
    return {line.rsplit("|", 1)[1].strip() for line in result.stderr.splitlines()
            if line.startswith("import time:") and "|" in line}


def test_the_common_call_imports_nothing_to_judge_landing(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / ".clavain").mkdir(parents=True)
    common = _pre_tool_use_imports(project, "git status --short && pytest -q tests/unit")
    assert "clavain.guards.budget" in common and not common & LANDING_MODULES
    # The detector sees them when a call writes.
    assert "clavain.guards.command_landing" in _pre_tool_use_imports(project, "echo x > out.txt")


# The hot path: every module a budgeted PreToolUse imports beyond a bare `python -I -S -c pass`
# for the everyday calls (a command, a test run, an edit, a read), run as bin/clavain-hook runs
# it. One list: a module added here costs every tool call, so add one only with the ratio
# `benchmarks/hook_latency.py` prints for it. `functools` and `collections` are not here:
# `lean_import` keeps the SQLite driver from importing them (about 2 ms a call).
HOT_PATH_CLAVAIN = frozenset({
    "clavain", "clavain.clock", "clavain.errors", "clavain.fastjson", "clavain.fsutil",
    "clavain.guards", "clavain.guards.budget", "clavain.guards.commands", "clavain.guards.gate",
    "clavain.guards.landing", "clavain.guards.policy", "clavain.guards.counting",
    "clavain.guards.shell_words",
    "clavain.guards.state_paths", "clavain.guards.wrappers", "clavain.hooks",
    "clavain.hooks.pre_tool_use", "clavain.lean_import", "clavain.locate", "clavain.sprint",
    "clavain.sprint.checkpoint", "clavain.store", "clavain.store.db", "clavain.textio"})
HOT_PATH_STDLIB = frozenset({
    "__future__", "_blake2", "_collections_abc", "_functools", "_json", "_sqlite3", "_stat",
    "errno", "genericpath", "os", "os.path", "posixpath", "select", "stat"})
HOT_PATH_CALLS = (("Bash", {"command": "ls"}), ("Bash", {"command": "pytest -q"}),
                  ("Edit", {"file_path": "src/a.py", "old_string": "x = 1",
                            "new_string": "x = 2"}),
                  ("Read", {"file_path": "src/a.py"}))
_MODULES_AFTER = ('import sys; sys.path.insert(0, sys.argv.pop(1))\n'
                  'from clavain.hooks import main; main()\n'
                  'sys.stderr.write("\\nmodules: " + " ".join(sorted(sys.modules)))')


def _modules_after(argv: list[str], stdin: str, project: Path) -> set[str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(project),
           "CLAUDE_PROJECT_DIR": str(project)}
    result = subprocess.run([sys.executable, "-I", "-S", *argv], input=stdin, text=True,
                            capture_output=True, env=env, cwd=project, timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
    return set(result.stderr.rsplit("modules: ", 1)[1].split())


def hot_path_modules(project: Path) -> set[str]:
    """What the everyday PreToolUse calls import beyond a bare start (steady state: the second
    call of each, the database already made)."""
    bare = _modules_after(["-c", 'import sys; sys.stderr.write("modules: " + '
                                 '" ".join(sys.modules))'], "", project)
    seen: set[str] = set()
    for tool, tool_input in HOT_PATH_CALLS:
        if "file_path" in tool_input:
            tool_input = {**tool_input, "file_path": str(project / tool_input["file_path"])}
        payload = json.dumps({"session_id": "s1", "cwd": str(project), "tool_name": tool,
                              "hook_event_name": "PreToolUse", "tool_input": tool_input,
                              "tool_use_id": "toolu_1"})
        for _ in range(2):
            modules = _modules_after(["-c", _MODULES_AFTER, str(REPO / "lib"), "PreToolUse"],
                                     payload, project)
        seen |= modules - bare
    return seen


def test_the_hot_path_imports_only_its_list(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / ".clavain").mkdir(parents=True)
    (project / "src").mkdir()
    (project / "src" / "a.py").write_text("x = 1\n")
    (project / ".clavain" / "config.json").write_text('{"budgets": {"maxCommands": 100}}')
    seen = hot_path_modules(project)
    assert (project / ".clavain" / "state.sqlite").exists()  # the calls were counted
    new = sorted(seen - HOT_PATH_CLAVAIN - HOT_PATH_STDLIB)
    assert not new, f"the hot path now imports {new}: measure it, then list it (above)"
    # Clavain's own list is exact, so a module that leaves the path leaves the list too.
    assert {m for m in seen if m.startswith("clavain")} == HOT_PATH_CLAVAIN
    assert "functools" not in seen and "collections" not in seen
