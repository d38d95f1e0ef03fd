"""The real `claude` 2.1.330 as the runner of `clavain run`, against the scripted model sending
`anthropic-ratelimit-unified-*` headers (5-hour window at 95%): the binary turns them into a
`rate_limit_event` — only for a subscriber or a gateway's token, never for a plain API key, and
only in `--verbose` output — which the supervisor records, and past `windowShareMax` 80 the run
waits for the window's reset before the next node, then finishes by itself.

The session here is a gateway's (ANTHROPIC_AUTH_TOKEN is a token whose audience is
`claude-gateway`, ANTHROPIC_BASE_URL the scripted model): the one login besides a claude.ai
subscription whose windows the binary reads offline."""

from __future__ import annotations

import base64
import json
import threading
import time
from pathlib import Path

import pytest

from clavain.claude_bin import find_claude
from clavain.guards import window
from tests.checks import PASSES
from tests.e2e.scripted_model import ScriptedModel, text
from tests.supervisor import kit

pytestmark = pytest.mark.e2e

WINDOW_AHEAD_SECONDS = 15


class LimitedModel(ScriptedModel):
    """The scripted model, every answer carrying the unified rate-limit headers of one 5-hour
    window at 95% (resetting WINDOW_AHEAD_SECONDS after the first request) and a weekly one
    at 41%."""

    def __init__(self) -> None:
        super().__init__(lambda request: [text(
            'Done.\n<result>{"status": "success", "summary": "done"}</result>')])
        self.reset: int | None = None
        self.guard = threading.Lock()

    def _send(self, handler, status, payload, kind):  # type: ignore[override]
        with self.guard:
            if self.reset is None:
                self.reset = int(time.time()) + WINDOW_AHEAD_SECONDS
        handler.send_response(status)
        handler.send_header("Content-Type", kind)
        handler.send_header("Content-Length", str(len(payload)))
        handler.send_header("request-id", "req_e2e_window")
        week = str(int(time.time()) + 3 * 86400)
        for name, value in {
                "status": "allowed_warning", "reset": str(self.reset),
                "representative-claim": "five_hour", "5h-utilization": "0.95",
                "5h-reset": str(self.reset), "5h-status": "allowed_warning",
                "7d-utilization": "0.41", "7d-reset": week, "7d-status": "allowed"}.items():
            handler.send_header(f"anthropic-ratelimit-unified-{name}", value)
        handler.end_headers()
        handler.wfile.write(payload)
        handler.wfile.flush()


def gateway_token() -> str:
    def part(value: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return (f"{part({'alg': 'none', 'typ': 'JWT'})}."
            f"{part({'aud': 'claude-gateway', 'exp': int(time.time()) + 3600})}.e2e")


@pytest.fixture
def claude_bin() -> Path:
    found = find_claude()
    if found is None:
        pytest.skip("the pinned claude binary is not installed (tests/e2e/conftest.py)")
    return Path(found)


def test_the_real_binary_reports_the_window_and_the_run_waits(
        tmp_path: Path, claude_bin: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with LimitedModel() as model:
        home = tmp_path / "home"
        home.mkdir()
        for name in ("ANTHROPIC_API_KEY", "CLAUDE_CONFIG_DIR", "CLAUDECODE"):
            monkeypatch.delenv(name, raising=False)
        for name, value in {"HOME": str(home), "ANTHROPIC_BASE_URL": model.base_url,
                            "ANTHROPIC_AUTH_TOKEN": gateway_token(),
                            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                            "CLAVAIN_CLAUDE_BIN": str(claude_bin)}.items():
            monkeypatch.setenv(name, value)
        state = kit.make_project(tmp_path / "p", {
            "budgets": {"windowShareMax": 80},
            "supervisor": {"claude": {"maxTurns": 3, "allowedTools": ["Read"],
                                      "extraArgs": ["--verbose"]}}})
        kit.add(state, [{"id": name, "type": "task", "title": name, "verify": [PASSES]}
                        for name in ("task-a", "task-b")], scaffold=False)
        events: list[dict] = []
        report = kit.run(state, events, runner="claude")
    assert report["status"] == "complete", (report, model.errors)
    waits = [e for e in events if e["event"] == "waiting"]
    assert waits and {e["why"] for e in waits} == {"window"}, events
    assert "5-hour window is 95% used" in waits[0]["message"]
    # The 5-hour window has reset meanwhile (and left the file); the weekly one is there.
    recorded = window.load(str(state.root))["windows"]
    assert "five_hour" not in recorded
    assert recorded["seven_day"]["used_percent"] == 41 and recorded["seven_day"]["source"] == \
        "runner"
    starts = [i for i, e in enumerate(events) if e["event"] == "started"]
    assert len(starts) == 2 and starts[0] < events.index(waits[0]) < starts[1]


def test_a_plain_api_key_gets_no_window_event(tmp_path: Path, claude_bin: Path) -> None:
    """What 2.1.330 does with the same headers for an API-key session: nothing reaches the
    output (the host reads them only for a subscriber or a gateway)."""
    import os
    import subprocess

    with LimitedModel() as model:
        home = tmp_path / "home"
        home.mkdir()
        env = {"PATH": os.environ["PATH"], "HOME": str(home), "ANTHROPIC_API_KEY": "sk-test",
               "ANTHROPIC_BASE_URL": model.base_url,
               "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
        done = subprocess.run([str(claude_bin), "-p", "hi", "--output-format", "json",
                               "--verbose"], env=env, cwd=home, capture_output=True,
                              text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert "rate_limit_event" not in done.stdout
