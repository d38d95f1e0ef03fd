"""`clavain run` past `budgets.windowShareMax`: a stand-in runner whose output carries the
host's `rate_limit_event` (utilization 0.95, resetsAt a few seconds ahead) makes the run wait for
the reset with a countdown (`waiting`, why "window") and then finish by itself; with
`--no-wait-on-limit` (or `supervisor.waitOnLimit: false`) it ends, exit 7, saying when it would
resume. A window the status line recorded holds the first dispatch too."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from clavain.guards import window
from tests.checks import PASSES
from tests.supervisor import kit

# The stand-in: it reports a window at 95% (the shape 2.1.330 prints with --verbose) on its
# first call only, then answers with its result block.
WINDOW_RUNNER = """
import json, os, sys, time
sys.stdin.read()
calls = {calls!r}
try:
    n = int(open(calls).read())
except OSError:
    n = 0
open(calls, "w").write(str(n + 1))
if n == 0:
    reset = int(time.time()) + {ahead}
    print(json.dumps({{"type": "rate_limit_event", "uuid": "u1", "session_id": "s1",
                      "rate_limit_info": {{"status": "allowed_warning", "resetsAt": reset,
                                          "rateLimitType": "five_hour", "utilization": 0.95,
                                          "unifiedWindows": {{"five_hour": {{
                                              "utilization": 0.95, "resetsAt": reset,
                                              "status": "allowed_warning"}}}}}}}}))
print('<result>{{"status": "success", "summary": "call ' + str(n) + '"}}</result>')
"""


def tasks(*names: str) -> list[dict]:
    return [{"id": name, "type": "task", "title": name, "verify": [PASSES]} for name in names]


def project(tmp_path: Path, *, share: float | None = 80, ahead: int = 3,
            wait: bool | None = None):
    runner = kit.script(tmp_path / "window_runner.py",
                        WINDOW_RUNNER.format(calls=str(tmp_path / "calls"), ahead=ahead))
    config: dict = {"runners": {"win": {"command": [str(runner)]}},
                    "budgets": {} if share is None else {"windowShareMax": share}}
    if wait is not None:
        config["supervisor"] = {"waitOnLimit": wait}
    state = kit.make_project(tmp_path / "p", config)
    kit.add(state, tasks("task-a", "task-b"), scaffold=False)
    return state


def calls(tmp_path: Path) -> int:
    return int((tmp_path / "calls").read_text())


def test_the_run_waits_for_the_reset_then_finishes_by_itself(tmp_path: Path) -> None:
    state = project(tmp_path)
    events: list[dict] = []
    report = kit.run(state, events, runner="win")
    assert report["status"] == "complete" and report["exit_code"] == 0
    assert {n["status"] for n in kit.nodes(state).values()} == {"done"}
    waits = [e for e in events if e["event"] == "waiting"]
    assert waits and {e["why"] for e in waits} == {"window"}
    assert "5-hour window is 95% used" in waits[0]["message"]
    assert "the share is 80%" in waits[0]["message"]
    # The wait came between the two nodes: after the first finished, before the second began.
    order = [(e["event"], e.get("node")) for e in events
             if e["event"] in ("finished", "started", "waiting")]
    first_wait = order.index(("waiting", None))
    assert ("finished", "task-a") in order[:first_wait] or \
        ("finished", "task-b") in order[:first_wait]
    assert [e for e in order[first_wait:] if e[0] == "started"]
    assert calls(tmp_path) == 2
    recorded = window.load(str(state.root))["windows"]["five_hour"]
    assert recorded["used_percent"] == 95 and recorded["source"] == "runner"


def test_without_waiting_the_run_ends_saying_when_it_would_resume(tmp_path: Path) -> None:
    state = project(tmp_path, ahead=3600)
    events: list[dict] = []
    report = kit.run(state, events, runner="win", wait_on_limit=False)
    assert report["status"] == "window_limit" and report["exit_code"] == 7
    assert report["reason"] == "window_share"
    resets = window.load(str(state.root))["windows"]["five_hour"]["resets_at"]
    shown = time.strftime("%H:%M", time.localtime(resets))
    message = report["message"]
    assert f"it resets at {shown}" in message and "would resume" in message
    assert "(in 1 h)" in message or "(in 59 min)" in message
    assert not [e for e in events if e["event"] == "waiting"]
    assert calls(tmp_path) == 1  # the second node was never dispatched
    assert sorted(n["status"] for n in kit.nodes(state).values()) == ["done", "open"]


def test_the_config_says_not_to_wait(tmp_path: Path) -> None:
    state = project(tmp_path, ahead=3600, wait=False)
    assert kit.run(state, runner="win")["status"] == "window_limit"
    # The next run is held before its first dispatch (the window is still past the share).
    again = kit.run(state, runner="win")
    assert again["status"] == "window_limit" and calls(tmp_path) == 1


def test_the_option_wins_over_the_config(tmp_path: Path) -> None:
    state = project(tmp_path, ahead=3, wait=False)
    events: list[dict] = []
    assert kit.run(state, events, runner="win", wait_on_limit=True)["status"] == "complete"
    assert [e for e in events if e["event"] == "waiting" and e["why"] == "window"]


def test_no_share_no_hold(tmp_path: Path) -> None:
    state = project(tmp_path, share=None, ahead=3600)
    report = kit.run(state, runner="win")
    assert report["status"] == "complete" and calls(tmp_path) == 2


def test_a_window_the_status_line_recorded_holds_the_first_dispatch(tmp_path: Path) -> None:
    state = project(tmp_path, share=50)
    window.record(str(state.root), {"seven_day": {"used_percent": 60,
                                                  "resets_at": time.time() + 3}},
                  window.STATUSLINE, time.time())
    events: list[dict] = []
    report = kit.run(state, events, runner="win", max_iterations=1)
    waits = [e for e in events if e["event"] == "waiting"]
    assert waits and waits[0]["why"] == "window" and "weekly window is 60% used" in \
        waits[0]["message"]
    started = [i for i, e in enumerate(events) if e["event"] == "started"]
    assert started and events.index(waits[0]) < started[0]
    assert report["status"] == "stopped_at_limit"


def test_the_cli_flag(tmp_path: Path) -> None:
    state = project(tmp_path, ahead=3600)
    done = subprocess.run([str(kit.REPO / "bin" / "clavain"), "run", "--runner", "win",
                           "--no-wait-on-limit", "--json"], cwd=state.project,
                          env=kit.cli_env(state), capture_output=True, text=True, timeout=120)
    assert done.returncode == 7, done.stderr
    report = json.loads(done.stdout)
    assert report["status"] == "window_limit" and "would resume" in report["message"]
    helped = subprocess.run([str(kit.REPO / "bin" / "clavain"), "run", "--help"],
                            capture_output=True, text=True, env=kit.cli_env(state))
    assert "--no-wait-on-limit" in helped.stdout
