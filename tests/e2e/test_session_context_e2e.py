"""The session context in the real Claude Code: an idle project pays only for the plugin's
listings (under the 400-token budget, estimated high); a sprint survives a compaction: the
request after `/compact` carries the recovery note naming the step the sprint is at."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from clavain.session.token_estimate import estimate_tokens
from tests.e2e.conftest import REPO, ClaudeRunner
from tests.e2e.scripted_model import (
    added_parts,
    request_text,
    system_messages,
    text,
    user_texts,
)

pytestmark = pytest.mark.e2e

BUDGET_TOKENS = 400


def _first_request(runner: ClaudeRunner, plugin_dir: Any) -> dict[str, Any]:
    run = runner.run("hi", lambda request: [text("hello")], plugin_dir=plugin_dir,
                     allowed_tools=("Bash", "Read", "Agent", "Skill")).check()
    return run.requests[0]


def _clavain(runner: ClaudeRunner, *args: str) -> str:
    env = {**os.environ, "CLAVAIN_PROJECT_DIR": str(runner.project),
           "CLAVAIN_PYTHON": sys.executable}
    done = subprocess.run([str(REPO / "bin" / "clavain"), *args], env=env, capture_output=True,
                          text=True, check=True)
    return done.stdout


def test_an_idle_project_pays_only_for_the_listings(claude_runner: ClaudeRunner) -> None:
    bare = request_text(_first_request(claude_runner, None))
    with_plugin_request = _first_request(claude_runner, REPO)
    parts = added_parts(bare, request_text(with_plugin_request))
    assert parts["SessionStart context"] == ""
    assert not any("SessionStart hook additional context" in m
                   for m in system_messages(with_plugin_request))
    assert "- clavain:reviewer:" in parts["agent listing"]
    assert "- clavain:using-clavain:" in parts["skill/command listing"]
    added = "\n".join(parts.values())
    # The estimate errs high (ctok counts ~0.75x of it here); benchmarks/context_cost.py
    # prints the exact figure.
    assert estimate_tokens(added) <= BUDGET_TOKENS, (estimate_tokens(added), added)


def test_the_request_after_a_compaction_carries_the_recovery_note(
        claude_runner: ClaudeRunner) -> None:
    started = json.loads(_clavain(claude_runner, "sprint", "start", "--complexity", "2",
                                  "--json", "rename foo to bar"))
    sprint_id = started["sprint_id"]
    first = claude_runner.run("rename foo to bar in src", lambda request: [text("on it")]).check()
    assert f"Clavain sprint {sprint_id}" in "\n".join(system_messages(first.requests[0]))
    session = first.output["session_id"]

    claude_runner.run("/compact", lambda request: [text("Summary: renaming foo.")],
                      extra_args=("--resume", session)).check()
    recorded = json.loads((claude_runner.project / ".clavain" / "scratch" /
                           "recovery.json").read_text())
    assert recorded["session_id"] == session and recorded["trigger"] == "manual"
    assert recorded["last_request"] == "rename foo to bar in src"

    after = claude_runner.run("go on", lambda request: [text("continuing")],
                              extra_args=("--resume", session)).check()
    request = after.requests[0]
    assert "Summary: renaming foo." in "\n".join(user_texts(request))
    notes = [m for m in system_messages(request) if "Clavain recovery note" in m]
    assert notes, system_messages(request)
    assert f"sprint {sprint_id}" in notes[0] and "step plan" in notes[0]
    assert 'Last request before compaction: "rename foo to bar in src"' in notes[0]
