"""`clavain loop` past `budgets.windowShareMax`: the runner's output carries the host's
`rate_limit_event` (utilization 0.95, a reset a few seconds ahead); the loop waits for the reset
with a countdown (`waiting`, kind "window") and goes on by itself; without waiting it ends (exit
7) saying when it would resume."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from clavain.guards import window
from clavain.loop.driver import Loop, LoopOptions
from tests.supervisor import kit

STATUS = """---CLAVAIN_STATUS---
TASK_COMPLETED: {task}
STATUS: COMPLETE
FILES_MODIFIED: {files}
TESTS_STATUS: NOT_RUN
EXIT_SIGNAL: {exit}
NEXT_RECOMMENDATION: next
---END_CLAVAIN_STATUS---"""

# The first call does the work and reports a 5-hour window at 95% (a rate_limit_event line,
# as 2.1.330 prints with --verbose); the second confirms there is nothing left.
AGENT = """
import json, pathlib, sys, time
prompt = sys.stdin.read()
counter = pathlib.Path({calls!r})
calls = int(counter.read_text()) + 1 if counter.exists() else 1
counter.write_text(str(calls))
STATUS = {status!r}
if calls == 1:
    reset = int(time.time()) + {ahead}
    print(json.dumps({{"type": "rate_limit_event", "session_id": "s", "uuid": "u",
                      "rate_limit_info": {{"status": "allowed_warning", "resetsAt": reset,
                                          "rateLimitType": "five_hour", "utilization": 0.95}}}}))
if "check:done" in prompt:
    pathlib.Path("done.txt").write_text("x")
    print(STATUS.format(task="check:done", files=1, exit="false"))
else:
    print(STATUS.format(task="none", files=0, exit="true"))
"""


def project(tmp_path: Path, *, ahead: int, wait: bool | None = None):
    agent = kit.script(tmp_path / "agent.py", textwrap.dedent(AGENT.format(
        calls=str(tmp_path / "calls"), status=STATUS, ahead=ahead)))
    config: dict = {"runners": {"agent": {"command": [str(agent)]}},
                    "checks": [{"id": "done", "cmd": "test -f done.txt", "priority": "high",
                                "description": "done.txt exists"}],
                    "budgets": {"windowShareMax": 80}}
    if wait is not None:
        config["supervisor"] = {"waitOnLimit": wait}
    return kit.make_project(tmp_path / "p", config)


def run(state, events: list, **options) -> dict:
    return Loop(state, LoopOptions(runner="agent", **options), events.append).run()


def test_the_loop_waits_for_the_reset_then_goes_on(tmp_path: Path) -> None:
    state = project(tmp_path, ahead=3)
    events: list[dict] = []
    result = run(state, events)
    assert result["status"] == "done" and result["exit_code"] == 0, result
    assert int((tmp_path / "calls").read_text()) == 2
    waits = [e for e in events if e["event"] == "waiting"]
    assert waits and {e.get("kind") for e in waits} == {"window"}
    assert "5-hour window is 95% used" in waits[0]["why"]
    loop = json.loads((state.runs / result["run_id"] / "loop.json").read_text())
    assert [w["kind"] for w in loop["waits"]] == ["window"]
    assert window.load(str(state.root))["windows"]["five_hour"]["source"] == "runner"


def test_without_waiting_the_loop_ends_saying_when(tmp_path: Path) -> None:
    state = project(tmp_path, ahead=3600, wait=False)
    events: list[dict] = []
    result = run(state, events)
    assert result["status"] == "window_limit" and result["exit_code"] == 7
    assert "would resume" in result["message"] and "`clavain loop` again" in result["message"]
    assert isinstance(result["resume_at"], float)
    assert int((tmp_path / "calls").read_text()) == 1
    assert not [e for e in events if e["event"] == "waiting"]


def test_the_cli_flag(tmp_path: Path) -> None:
    import subprocess

    state = project(tmp_path, ahead=3600)
    done = subprocess.run([str(kit.REPO / "bin" / "clavain"), "loop", "--runner", "agent",
                           "--no-wait-on-limit", "--json"], cwd=state.project,
                          env=kit.cli_env(state), capture_output=True, text=True, timeout=120)
    assert done.returncode == 7, done.stderr
    assert json.loads(done.stdout)["status"] == "window_limit"
