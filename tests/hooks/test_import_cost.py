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
