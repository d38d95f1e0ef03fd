"""`clavain statusline` through the real `bin/clavain` (its `-I -S` fast path): sample payloads in
and out, nothing outside a project, a damaged or FIFO checkpoint never failing the host; and
`clavain init --statusline` merging into `.claude/settings.local.json`."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.conftest import BIN, subprocess_env

OUTSIDE = {"CLAVAIN_PROJECT_DIR": "", "CLAUDE_PROJECT_DIR": ""}


def statusline(payload: object, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    text = payload if isinstance(payload, str) else json.dumps(payload)
    return subprocess.run([str(BIN / "clavain"), "statusline"], input=text, capture_output=True,
                          text=True, cwd=cwd, env=subprocess_env(**{**OUTSIDE, **env}),
                          timeout=30)


def start_sprint(run_cli) -> None:
    done = run_cli("sprint", "start", "--complexity", "3", "add a greet() function")
    assert done.returncode == 0, done.stdout + done.stderr


def count_a_command(project: Path, session: str) -> None:
    """One Bash call through the real PreToolUse hook: the session's budget row."""
    hook = {"session_id": session, "hook_event_name": "PreToolUse", "tool_name": "Bash",
            "tool_input": {"command": "ls"}, "cwd": str(project)}
    subprocess.run([str(BIN / "clavain-hook"), "PreToolUse"], input=json.dumps(hook),
                   capture_output=True, text=True, cwd=project, timeout=60,
                   env=subprocess_env(**OUTSIDE), check=True)


BEST = " · best effort"  # the marker without hard mode (plain `init` by a script: no person)
DAMAGED = f"clavain: checkpoint damaged{BEST}\n"


def test_the_sprint_step_budget_host_cost_and_loop(run_cli, project: Path) -> None:
    start_sprint(run_cli)
    checkpoint = json.loads((project / ".clavain" / "checkpoint.json").read_text())
    step, route = checkpoint["current_step"], checkpoint["route"]
    payload = {"session_id": "s-1", "workspace": {"current_dir": str(project / "lib")},
               "cost": {"total_cost_usd": 1.234}, "model": {"display_name": "Opus"}}
    (project / "lib").mkdir()
    done = statusline(payload, cwd=Path("/"))
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout == f"clavain: {step} 1/{len(route)} · best effort · session $1.23\n"

    count_a_command(project, "s-1")
    count_a_command(project, "s-1")
    count_a_command(project, "someone-else")
    loops = project / ".clavain" / "loops"
    loops.mkdir()
    (loops / "s-1.json").write_text(json.dumps({"iteration": 3, "max_iterations": 10}))
    line = statusline({**payload, "cost": {}}, cwd=Path("/")).stdout
    # Its own calls only.
    assert line.startswith(f"clavain: {step} 1/{len(route)}{BEST} · cmds 2/")
    assert "$0.00/$" in line and line.endswith(" · loop 3/10\n") and "session" not in line
    other = statusline({**payload, "session_id": "s-2"}, cwd=Path("/")).stdout
    assert "cmds" not in other and "loop" not in other  # another session: no row, no loop


def test_no_sprint_and_the_last_step(run_cli, project: Path) -> None:
    run_cli("init")
    assert statusline({"cwd": str(project)}, cwd=project).stdout == f"clavain: no sprint{BEST}\n"
    start_sprint(run_cli)
    path = project / ".clavain" / "checkpoint.json"
    checkpoint = json.loads(path.read_text())
    path.write_text(json.dumps({**checkpoint, "current_step": None}))
    n = len(checkpoint["route"])
    assert statusline({"cwd": str(project)}, cwd=project).stdout == \
        f"clavain: done {n}/{n}{BEST}\n"


def test_the_marker_says_hard_mode_when_the_sandbox_enforces_it(run_cli, project: Path) -> None:
    from clavain import sandbox
    from clavain.fsutil import write_json_atomic

    run_cli("init")
    state = project / ".clavain"
    settings, _ = sandbox.merge({}, state)
    write_json_atomic(sandbox.settings_file(project), settings)
    assert statusline({"cwd": str(project)}, cwd=project).stdout == \
        "clavain: no sprint · hard mode\n"


def test_a_step_behind_a_gate_says_the_gate_is_pending(run_cli, project: Path) -> None:
    from clavain.sprint import gates
    from clavain.sprint.route import GATED_STEPS

    assert set(GATED_STEPS) == {step for step in gates._CHECKS}  # one list, checked by one
    start_sprint(run_cli)
    path = project / ".clavain" / "checkpoint.json"
    checkpoint = json.loads(path.read_text())
    route = checkpoint["route"]
    shown = {}
    for step in ("plan", "execute", "quality-gates"):
        path.write_text(json.dumps({**checkpoint, "current_step": step}))
        shown[step] = statusline({"cwd": str(project)}, cwd=project).stdout
    n = len(route)
    mark = " · best effort\n"
    assert shown == {"plan": f"clavain: plan {route.index('plan') + 1}/{n}{mark}",
                     "execute": f"clavain: execute {route.index('execute') + 1}/{n}, "
                                f"gate pending{mark}",
                     "quality-gates": f"clavain: quality-gates {route.index('quality-gates') + 1}"
                                      f"/{n}, gate pending{mark}"}


def test_nothing_outside_a_clavain_project(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    for payload in ({"session_id": "s", "workspace": {"current_dir": str(plain)}},
                    {"cwd": "relative/path"}, {}, [], "not json", ""):
        done = statusline(payload, cwd=plain)
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_a_damaged_checkpoint_and_database_never_fail_the_host(run_cli, project: Path) -> None:
    run_cli("init")
    state = project / ".clavain"
    (state / "checkpoint.json").write_text('{"route": ')
    (state / "state.sqlite").write_bytes(b"not a database at all" * 100)
    (state / "loops").mkdir()
    (state / "loops" / "s.json").write_text("{")
    done = statusline({"session_id": "s", "cwd": str(project)}, cwd=project)
    assert (done.returncode, done.stdout, done.stderr) == (0, DAMAGED, "")
    (state / "checkpoint.json").write_text(json.dumps({"route": ["plan"], "current_step": "x"}))
    assert statusline({"cwd": str(project)}, cwd=project).stdout == DAMAGED


def test_a_fifo_checkpoint_does_not_block(run_cli, project: Path) -> None:
    run_cli("init")
    state = project / ".clavain"
    os.mkfifo(state / "checkpoint.json")
    (state / "loops").mkdir()
    os.mkfifo(state / "loops" / "s.json")
    done = statusline({"session_id": "s", "cwd": str(project)}, cwd=project)  # timeout=30
    assert (done.returncode, done.stdout) == (0, DAMAGED)


def settings(project: Path) -> dict:
    return json.loads((project / ".claude" / "settings.local.json").read_text())


def test_init_statusline_merges_and_is_idempotent(run_cli, project: Path) -> None:
    (project / ".claude").mkdir()
    own = {"permissions": {"allow": ["Bash(ls)"]}, "env": {"A": "1"}}
    (project / ".claude" / "settings.local.json").write_text(json.dumps(own))
    first = run_cli("init", "--statusline")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "status line set" in first.stdout
    merged = settings(project)
    command = f"{(BIN / 'clavain').resolve()} statusline"
    assert merged == {**own, "statusLine": {"type": "command", "command": command}}
    again = run_cli("init", "--statusline", "--json")
    assert json.loads(again.stdout)["statusline"]["changed"] is False
    assert settings(project) == merged
    # The command written is the one that works: run it as the host would, by a shell.
    start_sprint(run_cli)
    shown = subprocess.run(command, shell=True, input=json.dumps({"cwd": str(project)}),
                           capture_output=True, text=True, env=subprocess_env(**OUTSIDE),
                           timeout=30)
    assert shown.stdout.startswith("clavain: ")


def test_init_statusline_keeps_a_persons_own(run_cli, project: Path) -> None:
    (project / ".claude").mkdir()
    path = project / ".claude" / "settings.local.json"
    theirs = {"statusLine": {"type": "command", "command": "~/.claude/mine.sh"}}
    path.write_text(json.dumps(theirs))
    refused = run_cli("init", "--statusline")
    assert refused.returncode != 0
    assert "already has a status line of its own ('~/.claude/mine.sh')" in refused.stderr
    assert "--force" in refused.stderr and settings(project) == theirs
    agent = run_cli("init", "--statusline", "--force")
    assert agent.returncode == 2 and "a person's decision" in agent.stderr
    assert settings(project) == theirs
    person = run_cli("init", "--statusline", "--force", person=True)
    assert person.returncode == 0, person.stdout
    assert settings(project)["statusLine"]["command"].endswith("/clavain statusline")
