from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
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


def wait_for(condition: Callable[[], object], what: str, timeout: float = 20.0) -> object:
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, f"timed out waiting: {what}"
        time.sleep(0.02)
    return value


def server_for(data: Path | str, root: Path | str) -> dict | None:
    """The address of a live hook server in `data` serving plugin folder `root`, or None."""
    from clavain.hooks import resident

    address = resident.read_address(str(data))
    if address and address["root"] == str(root) and resident.alive(address["pid"]):
        return address
    return None


def start_resident_server(data: Path) -> dict:
    """A resident hook server for plugin data folder `data` serving this checkout, once it has
    published its address."""
    from clavain.hooks import resident

    resident.spawn(str(data), str(REPO))
    return wait_for(lambda: server_for(data, REPO), "the server's address")


def exited(pid: int) -> bool:
    """Whether `pid` has ended (reaped first when it is a child of this process, as a server a
    test spawned in-process is)."""
    from clavain.hooks import resident

    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    return not resident.alive(pid)


def stop_resident_server(data: Path) -> None:
    from clavain.hooks import resident

    pid = resident.stop(str(data))
    if pid is not None:
        wait_for(lambda: exited(pid), f"server {pid} to exit")


@pytest.fixture
def resident_data(tmp_path: Path):
    """A plugin data folder with a resident hook server up; stopped after the test."""
    data = tmp_path / "plugin-data"
    data.mkdir()
    start_resident_server(data)
    yield data
    stop_resident_server(data)
