"""The window share end to end through the real processes: `bin/clavain statusline` fed the
host's payload (2.1.330's `rate_limits` shape) records the windows and shows them, marked past
`budgets.windowShareMax`, with the session's reserved dollars beside the spent ones; the real
PreToolUse hook then denies an Agent call (fan-out) while a window is past the share."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from tests.conftest import BIN, subprocess_env

# NO_COLOR: the marks as text; the colour added beside them is tests/cli/test_statusline.py's.
OUTSIDE = {"CLAVAIN_PROJECT_DIR": "", "CLAUDE_PROJECT_DIR": "", "NO_COLOR": "1"}
SESSION = "s-window"


def make_project(tmp_path: Path, share: float | None) -> Path:
    project = tmp_path / "project"
    (project / ".clavain").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    budgets = {} if share is None else {"windowShareMax": share}
    (project / ".clavain" / "config.json").write_text(json.dumps({"budgets": budgets}))
    return project


def payload(project: Path, five_hour: float, seven_day: float = 41) -> dict:
    """What the host sends a status line command (only the fields that matter here)."""
    now = time.time()
    return {"session_id": SESSION, "hook_event_name": "Status",
            "workspace": {"current_dir": str(project), "project_dir": str(project)},
            "cost": {"total_cost_usd": 0.5},
            "rate_limits": {"five_hour": {"used_percentage": five_hour,
                                          "resets_at": int(now + 2 * 3600)},
                            "seven_day": {"used_percentage": seven_day,
                                          "resets_at": int(now + 3 * 86400)}}}


def statusline(body: dict, cwd: Path) -> str:
    done = subprocess.run([str(BIN / "clavain"), "statusline"], input=json.dumps(body),
                          capture_output=True, text=True, cwd=cwd, timeout=30,
                          env=subprocess_env(**OUTSIDE))
    assert done.returncode == 0 and done.stderr == ""
    return done.stdout


def hook(event: str, body: dict, project: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "clavain-hook"), event], input=json.dumps(body),
                          capture_output=True, text=True, cwd=project, timeout=60,
                          env=subprocess_env(**{**OUTSIDE, "CLAUDE_PROJECT_DIR": str(project),
                                                "CLAVAIN_BOOTSTRAP": "0"}))


def agent_call(project: Path) -> dict:
    return {"session_id": SESSION, "hook_event_name": "PreToolUse", "tool_name": "Agent",
            "tool_input": {"description": "review", "prompt": "review the diff",
                           "subagent_type": "clavain:reviewer"},
            "tool_use_id": "toolu_1", "cwd": str(project)}


def test_the_status_line_records_and_shows_the_windows(tmp_path: Path) -> None:
    project = make_project(tmp_path, 80)
    line = statusline(payload(project, 95), Path("/"))
    assert " · 5h ⚠95% (over 80%) 7d 41% · " in line
    stored = json.loads((project / ".clavain" / "window.json").read_text())["windows"]
    assert stored["five_hour"]["used_percent"] == 95 and stored["five_hour"]["source"] == \
        "statusline"
    assert stored["seven_day"]["used_percent"] == 41
    # An older figure of the same window (an idle session's line) does not lower it.
    assert " 5h ⚠95% (over 80%)" in statusline(payload(project, 79), Path("/"))


def test_under_the_share_and_without_one(tmp_path: Path) -> None:
    project = make_project(tmp_path, 80)
    # 80 % of the share (64 % of the window) and more is marked; under it, plain.
    assert " · 5h ⚠64% (near 80%) 7d 41% · " in statusline(payload(project, 64), Path("/"))
    low = make_project(tmp_path / "low", 80)
    assert " · 5h 63% 7d 41% · " in statusline(payload(low, 63), Path("/"))
    bare = make_project(tmp_path / "bare", None)
    line = statusline(payload(bare, 99), Path("/"))
    assert " · 5h ⚠99% 7d 41% · " in line and "over" not in line
    plain = make_project(tmp_path / "plain", None)  # a window's figure is never lowered
    assert " · 5h 79% 7d 41% · " in statusline(payload(plain, 79), Path("/"))
    # No rate_limits (an API-key session): no window part, no file.
    quiet = make_project(tmp_path / "quiet", 80)
    body = payload(quiet, 0)
    del body["rate_limits"]
    assert "5h" not in statusline(body, Path("/"))
    assert not (quiet / ".clavain" / "window.json").exists()


def test_bad_rate_limits_leave_the_rest_of_the_line(tmp_path: Path) -> None:
    project = make_project(tmp_path, 80)
    for bad in ("x", [1], {"five_hour": "95"}, {"five_hour": {"used_percentage": 950,
                                                              "resets_at": 1}}):
        line = statusline({**payload(project, 0), "rate_limits": bad}, Path("/"))
        assert line.startswith("clavain: no sprint") and "Claude Code $0.50" in line
        assert "5h" not in line


def test_reserved_dollars_beside_the_spent(tmp_path: Path) -> None:
    from clavain.clock import now_iso
    from clavain.guards.reservations import reserve
    from clavain.store.db import connect

    project = make_project(tmp_path, None)
    bash = {**agent_call(project), "tool_name": "Bash", "tool_input": {"command": "ls"}}
    assert hook("PreToolUse", bash, project).returncode == 0  # the session's budget row
    assert " $0.00/$" in statusline(payload(project, 10), Path("/"))
    conn = connect(project / ".clavain" / "state.sqlite")
    with conn:
        reserve(conn, f"session:{SESSION}", "agent-1", kind="subagent", tokens=1000,
                cost_usd=0.8, at=now_iso())
    conn.close()
    assert " $0.00+0.80 res/$" in statusline(payload(project, 10), Path("/"))


def test_past_the_share_the_pre_tool_use_hook_denies_fan_out(tmp_path: Path) -> None:
    """Needs the fan-out gate (`guards.fanout`) to ask `guards.window.share_denial`."""
    project = make_project(tmp_path, 80)
    statusline(payload(project, 95), Path("/"))
    done = hook("PreToolUse", agent_call(project), project)
    assert done.returncode == 0
    decision = json.loads(done.stdout)["hookSpecificOutput"]
    assert decision["permissionDecision"] == "deny"
    reason = decision["permissionDecisionReason"]
    assert "5-hour window is 95% used" in reason and "80%" in reason and " (in 2 h" in reason
    # Under the share (a new window after the reset), the same call is not denied for it.
    under = make_project(tmp_path / "under", 80)
    statusline(payload(under, 79), Path("/"))
    done = hook("PreToolUse", agent_call(under), under)
    assert "window" not in done.stdout


def test_budget_status_has_a_window_row(tmp_path: Path) -> None:
    project = make_project(tmp_path, 80)
    statusline(payload(project, 95), Path("/"))
    env = subprocess_env(**{**OUTSIDE, "CLAVAIN_PROJECT_DIR": str(project)})
    done = subprocess.run([str(BIN / "clavain"), "budget", "status"], cwd=project, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "Subscription windows (budgets.windowShareMax: 80%)" in done.stdout
    row = next(line for line in done.stdout.splitlines() if line.startswith("5-hour"))
    assert "95% (over)" in row and "80%" in row
    assert "(in 2 h)" in row or "(in 1 h 59 min)" in row
    weekly = next(line for line in done.stdout.splitlines() if line.startswith("weekly"))
    assert "41%" in weekly and "over" not in weekly
    shown = subprocess.run([str(BIN / "clavain"), "budget", "status", "--json"], cwd=project,
                           env=env, capture_output=True, text=True, timeout=60)
    windows = json.loads(shown.stdout)["windows"]
    assert windows["share_max"] == 80
    assert [(w["window"], w["used_percent"], w["over"]) for w in windows["windows"]] == [
        ("five_hour", 95, True), ("seven_day", 41, False)]
