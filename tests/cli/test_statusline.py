"""`clavain statusline` through the real `bin/clavain` (its `-I -S` fast path): sample payloads in
and out, nothing outside a project, a damaged or FIFO checkpoint never failing the host; and
`clavain init --statusline` merging into `.claude/settings.local.json`."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.checks import PASSES
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
    assert done.stdout == f"clavain: {step} 1/{len(route)} · best effort · Claude Code $1.23\n"

    count_a_command(project, "s-1")
    count_a_command(project, "s-1")
    count_a_command(project, "someone-else")
    loops = project / ".clavain" / "loops"
    loops.mkdir()
    (loops / "s-1.json").write_text(json.dumps({"iteration": 3, "max_iterations": 10}))
    line = statusline({**payload, "cost": {}}, cwd=Path("/")).stdout
    # Its own calls only.
    assert line.startswith(f"clavain: {step} 1/{len(route)}{BEST} · budget cmds 2/")
    assert "$0.00/$" in line and line.endswith(" · loop 3/10\n") and "Claude Code" not in line
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


def set_spend(project: Path, session: str, commands: int, cost_usd: float) -> None:
    """The session's budget row (made by a real PreToolUse call) at these figures."""
    from clavain.store.db import connect

    conn = connect(project / ".clavain" / "state.sqlite")
    with conn:
        conn.execute("UPDATE budget_runs SET commands = ?, cost_usd = ? "
                     "WHERE run_key = ?", (commands, cost_usd, f"session:{session}"))
    conn.close()


def test_a_figure_at_80_percent_of_its_limit_is_marked(run_cli, project: Path) -> None:
    """79 % of a limit reads plain, 80 % carries `⚠` (text, colour only beside it); Clavain's
    budget dollars and Claude Code's session dollars are labelled apart."""
    run_cli("init")
    (project / ".clavain" / "config.json").write_text(json.dumps(
        {"budgets": {"maxCommands": 100, "maxCostUsd": 10.0}}))
    count_a_command(project, "s-1")
    payload = {"session_id": "s-1", "cwd": str(project), "cost": {"total_cost_usd": 1.234}}
    set_spend(project, "s-1", 79, 7.9)
    plain = statusline(payload, cwd=project, NO_COLOR="1").stdout
    assert " · budget cmds 79/100 $7.90/$10.00 · Claude Code $1.23" in plain
    assert "⚠" not in plain
    set_spend(project, "s-1", 80, 8.0)
    marked = statusline(payload, cwd=project, NO_COLOR="1").stdout
    assert " · budget ⚠cmds 80/100 ⚠$8.00/$10.00 · Claude Code $1.23" in marked
    set_spend(project, "s-1", 100, 8.5)
    coloured = statusline(payload, cwd=project).stdout  # colour added: red past, yellow near
    assert "\033[31m⚠cmds 100/100\033[0m \033[33m⚠$8.50/$10.00\033[0m" in coloured


def test_a_blocked_run_and_the_questions_waiting(tmp_path: Path) -> None:
    """A real headless run that ends blocked on a question: the line says so and counts it;
    a run at work says how many runners it has."""
    from clavain.store.graph_db import open_graph_db
    from clavain.supervisor.run_record import RunRecord
    from clavain.workgraph.graphs import Graph
    from clavain.workgraph.results import apply_result
    from tests.supervisor import kit

    state = kit.make_project(tmp_path / "p")
    kit.add(state, [{"id": q, "type": "task", "title": q, "verify": [PASSES]}
                    for q in ("q1", "q2")], scaffold=False)
    conn = open_graph_db(state)
    for q in ("q1", "q2"):
        apply_result(Graph(conn, "default", state), q,
                     {"status": "checkpoint", "summary": "which?", "question": "red or blue?"})
    conn.close()
    done = subprocess.run([str(kit.REPO / "bin" / "clavain"), "run", "--runner", "shell"],
                          cwd=state.project, env=kit.cli_env(state), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    line = statusline({"cwd": str(state.project)}, cwd=state.project, NO_COLOR="1").stdout
    assert line.endswith(" · ⚠run blocked: waits for an answer · ⚠2 questions wait\n"), line
    record = RunRecord(state, "run-later", "default")
    record.start()
    record.runner_started("q1", 1, worker=1)
    record.runner_started("q2", 2, worker=2)
    line = statusline({"cwd": str(state.project)}, cwd=state.project, NO_COLOR="1").stdout
    assert " · run 2 at work · " in line
    record.runner_ended("q1")
    record.runner_ended("q2")
    line = statusline({"cwd": str(state.project)}, cwd=state.project, NO_COLOR="1").stdout
    assert " · run waiting · " in line


def test_combine_keeps_a_persons_own_status_line_and_prints_both(run_cli,
                                                                  project: Path) -> None:
    """`init --statusline --combine`: one command runs the person's line (given the payload)
    and then Clavain's; outside a Clavain project theirs still shows."""
    (project / ".claude").mkdir()
    mine = project / "mine.sh"
    mine.write_text("#!/bin/sh\nprintf 'mine: %s' \"$(cat | wc -c | tr -d ' ')\"\n")
    mine.chmod(0o755)
    path = project / ".claude" / "settings.local.json"
    path.write_text(json.dumps({"statusLine": {"type": "command", "command": f"{mine} --x",
                                               "padding": 1}}))
    refused = run_cli("init", "--statusline")
    assert refused.returncode != 0 and "--combine" in refused.stderr
    done = run_cli("init", "--statusline", "--combine", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["statusline"]["combined"] == f"{mine} --x"
    written = settings(project)["statusLine"]
    assert written["padding"] == 1 and written["command"].endswith(f" --with '{mine} --x'")
    again = run_cli("init", "--statusline", "--combine", "--json")
    assert json.loads(again.stdout)["statusline"]["changed"] is False
    payload = json.dumps({"cwd": str(project)})
    shown = subprocess.run(written["command"], shell=True, input=payload, capture_output=True,
                           text=True, env=subprocess_env(**OUTSIDE), timeout=30, cwd=project)
    assert shown.stdout == f"mine: {len(payload)} │ clavain: no sprint{BEST}\n"
    outside = json.dumps({"cwd": "/"})
    alone = subprocess.run(written["command"], shell=True, input=outside, capture_output=True,
                           text=True, env=subprocess_env(**OUTSIDE), timeout=30, cwd="/")
    assert alone.stdout == f"mine: {len(outside)}\n"
