from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAYLOADS = REPO / "tests" / "fixtures" / "hook_payloads"


def payload_for(event: str, cwd: Path) -> dict:
    """The fixture payload for `event`, pointed at `cwd` (a minimal one for other events)."""
    path = PAYLOADS / f"{event}.json"
    payload = json.loads(path.read_text()) if path.exists() else {
        "session_id": "s", "transcript_path": str(cwd / "t.jsonl"), "hook_event_name": event}
    payload["cwd"] = str(cwd)
    return payload


@pytest.fixture
def run_hook(tmp_path: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run `bin/clavain-hook EVENT` as the host does: JSON on stdin, from the project folder."""

    def run(event: str, stdin: str | dict | None, *, env: dict[str, str] | None = None,
            cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        project = cwd or tmp_path
        # CLAUDE_CONFIG_DIR: the developer's own plugin cache and transcripts stay out of it.
        full_env = dict(os.environ, CLAVAIN_PYTHON=sys.executable, CLAUDE_PROJECT_DIR=str(project),
                        CLAVAIN_BOOTSTRAP="0", CLAUDE_CONFIG_DIR=str(tmp_path / "claude-config"))
        full_env.update(env or {})
        text = json.dumps(stdin) if isinstance(stdin, dict) else (stdin or "")
        return subprocess.run([str(REPO / "bin" / "clavain-hook"), event], input=text,
                              capture_output=True, text=True, cwd=project, env=full_env,
                              timeout=60)

    return run


def start_sprint(project: Path) -> dict:
    """An active sprint in `project`, so SessionStart has something to say."""
    from clavain.paths import StatePaths
    from clavain.sprint import lifecycle

    return lifecycle.start(StatePaths.discover(project), "add OAuth login", complexity=2)


def clavain_project(tmp_path: Path, config: dict | None = None) -> Path:
    """A git project with a `.clavain/` folder (and `config.json` when given)."""
    project = tmp_path / "project"
    (project / ".clavain").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    if config is not None:
        (project / ".clavain" / "config.json").write_text(json.dumps(config))
    return project
