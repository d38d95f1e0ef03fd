"""A full disk under `.clavain/` still denies a spent budget: the call cannot be recorded, the
counters are read without writing (immutable, as for a read-only folder), and the run's spent
budget is denied — never "budgets are not being counted" and the call run. A real full file
system: a 3 MiB tmpfs, filled to the last byte."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import clavain_project, payload_for


@contextlib.contextmanager
def small_disk(folder: Path) -> Iterator[Path]:
    folder.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small file system needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(folder)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def _fill(disk: Path) -> None:
    with open(disk / "filler", "wb") as handle, contextlib.suppress(OSError):
        while True:
            handle.write(b"\0" * 65536)
            handle.flush()
    with contextlib.suppress(OSError), open(disk / "filler-tail", "wb") as handle:
        while True:
            handle.write(b"\0")
            handle.flush()


def _call(project: Path, command: str) -> dict:
    return {**payload_for("PreToolUse", project), "session_id": "s1",
            "hook_event_name": "PreToolUse", "tool_name": "Bash",
            "tool_input": {"command": command}}


def _decision(result: subprocess.CompletedProcess) -> dict:
    return json.loads(result.stdout) if result.stdout.strip().startswith("{") else {}


def test_a_spent_budget_is_denied_on_a_full_disk(run_hook, tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk") as disk:
        project = clavain_project(disk, {"budgets": {"maxCommands": 2}})
        for n in range(3):
            last = run_hook("PreToolUse", _call(project, f"ls {n}"),
                            cwd=project)
        assert "budget exhausted" in last.stdout  # spent before the disk filled
        _fill(disk)
        assert shutil.disk_usage(disk).free == 0
        result = run_hook("PreToolUse", _call(project, "ls again"),
                          cwd=project)
        decision = _decision(result).get("hookSpecificOutput", {})
        assert decision.get("permissionDecision") == "deny", result.stdout + result.stderr
        assert "budget exhausted" in decision["permissionDecisionReason"]


def test_a_full_disk_with_budget_left_runs_and_the_person_is_told(run_hook,
                                                                  tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk") as disk:
        project = clavain_project(disk, {"budgets": {"maxCommands": 50}})
        run_hook("PreToolUse", _call(project, "ls"), cwd=project)
        _fill(disk)
        result = run_hook("PreToolUse", _call(project, "ls 2"),
                          cwd=project)
        output = _decision(result)
        assert "permissionDecision" not in json.dumps(output)
        assert output["systemMessage"].startswith("Clavain could not record this tool call")


def test_a_fan_out_on_a_full_disk_is_denied_even_with_budget_left(run_hook,
                                                                  tmp_path: Path) -> None:
    """A subagent's projected cost cannot be reserved on a full disk: the Agent call is
    denied (a fan-out never runs uncounted), while a plain command still runs."""
    with small_disk(tmp_path / "disk") as disk:
        project = clavain_project(disk, {"budgets": {"maxCostUsd": 50}})
        run_hook("PreToolUse", _call(project, "ls"), cwd=project)
        _fill(disk)
        agent = {**_call(project, ""), "tool_name": "Agent", "tool_use_id": "toolu_1",
                 "tool_input": {"description": "look", "prompt": "look around"}}
        result = run_hook("PreToolUse", agent, cwd=project)
        decision = _decision(result).get("hookSpecificOutput", {})
        assert decision.get("permissionDecision") == "deny", result.stdout + result.stderr
        assert "could not be reserved" in decision["permissionDecisionReason"]
