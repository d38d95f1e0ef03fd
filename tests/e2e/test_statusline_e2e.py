"""The status line in the real Claude Code, interactive: `clavain init --statusline` set it, the
host (in a pseudo-terminal, its full-screen interface, against the scripted model) draws the
sprint's step, and after the step changes and the conversation moves on it draws the next one.
`-p` draws no status line, so this is the only way to see it drawn."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import BIN, subprocess_env
from tests.e2e.conftest import ClaudeRunner
from tests.e2e.scripted_model import text

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
PLAN = """# Plan

```json
{"nodes": [{"id": "task-a", "type": "task", "title": "write a.txt", "verify": ["test -f a.txt"],
            "ownership": ["a.txt"]}]}
```
"""
_ESCAPES = re.compile(rb"\x1b\[[0-9;?>]*[a-zA-Z]|\x1b\][^\x07]*\x07|\x1b[78=>]")


class Screen:
    """The host's output in a pty, with terminal escapes taken out, read as it comes."""

    def __init__(self, fd: int) -> None:
        self.fd, self.raw = fd, b""

    def text(self) -> str:
        return " ".join(_ESCAPES.sub(b" ", self.raw).decode("utf-8", "replace").split())

    def wait_for(self, wanted: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if wanted in self.text():
                return True
            ready, _, _ = select.select([self.fd], [], [], 0.25)
            if ready:
                try:
                    self.raw += os.read(self.fd, 65536)
                except OSError:  # the host went away
                    return wanted in self.text()
        return False


def _clavain(project: Path, *args: str) -> None:
    done = subprocess.run([str(BIN / "clavain"), *args], cwd=project, capture_output=True,
                          text=True, timeout=120,
                          env=subprocess_env(CLAVAIN_PROJECT_DIR=str(project)))
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_real_host_draws_the_sprints_step(claude_runner: ClaudeRunner) -> None:
    project, home = claude_runner.project, claude_runner.home
    _clavain(project, "init")
    _clavain(project, "init", "--statusline")
    _clavain(project, "sprint", "start", "--complexity", "2",
             "add a --verbose flag to the export command")
    # What a person has answered once: onboarding done, this folder trusted, the key approved.
    (home / ".claude.json").write_text(json.dumps({
        "hasCompletedOnboarding": True, "theme": "dark",
        "customApiKeyResponses": {"approved": ["sk-test"], "rejected": []},
        "projects": {str(project): {"hasTrustDialogAccepted": True,
                                    "hasCompletedProjectOnboarding": True}}}))
    claude_runner.model.script = lambda request: [text("noted")]
    env = {**claude_runner.env(), "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"}
    pid, fd = pty.fork()
    if pid == 0:  # the child: the host, interactive, in the project
        try:
            os.chdir(project)
            os.execve(str(claude_runner.binary), [str(claude_runner.binary), "--plugin-dir",
                                                  str(REPO)], env)
        finally:
            os._exit(127)
    screen = Screen(fd)
    try:
        assert screen.wait_for("clavain: plan 1/6", 90), screen.text()[-2000:]
        (project / "plan.md").write_text(PLAN)
        _clavain(project, "sprint", "done", "plan", "--plan", "plan.md")
        os.write(fd, b"what next?")
        time.sleep(0.5)
        os.write(fd, b"\r")
        # The host redraws only the characters that changed: the line's new part.
        assert screen.wait_for("execute 2/6", 90), screen.text()[-2000:]
        assert claude_runner.model.requests, "the host never asked the scripted model"
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(fd)
