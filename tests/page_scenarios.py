"""The projects the HTML page is tested on, made the way a person makes them — through the real
`bin/clavain` in a real git repository: a finished headless run of the greeter example on two
workers, a sprint with verdicts and a gate a person waived, and a loop run of the loop example."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from clavain.verdicts import files as verdict_files
from tests.checks import PASSES

REPO = Path(__file__).resolve().parents[1]
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@localhost"]
RunCli = Callable[..., subprocess.CompletedProcess[str]]

PLAN = """# Plan

```json
{"nodes": [{"id": "task-flag", "type": "task", "title": "add --verbose to <export> & co",
            "verify": ["test -f flag.txt"], "ownership": ["flag.txt"]}]}
```
"""


def _ok(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def _commit_all(project: Path, message: str) -> None:
    subprocess.run([*GIT, "add", "-A"], cwd=project, check=True)
    subprocess.run([*GIT, "commit", "-qm", message], cwd=project, check=True)


def finished_run(project: Path, run_cli: RunCli, *, run_id: str = "demo",
                 extra: tuple[str, ...] = ()) -> str:
    """examples/greeter planned and run to the end by `clavain run --workers 2` (shell runner,
    no API key), as scripts/demo.sh does."""
    shutil.copytree(REPO / "examples" / "greeter", project, dirs_exist_ok=True)
    _commit_all(project, "greeter")
    _ok(run_cli("init"))  # nothing to commit after it: its ignores are in .git/info/exclude
    (project / ".clavain" / "config.json").write_text(
        '{"defaults": {"snapshotMaxLagSeconds": 0}}\n')
    _ok(run_cli("graph", "import", "plan.json"))
    _ok(run_cli("graph", "scaffold"))
    _ok(run_cli("run", "--runner", "shell", "--workers", "2", "--run-id", run_id, *extra))
    return run_id


def _verdict(project: Path, sprint_id: str, agent: str, status: str, tokens: int,
             summary: str, dispatch: str) -> None:
    folder = project / ".clavain" / "verdicts"
    short = verdict_files.safe_agent_name(agent)
    verdict_files.write_detail(folder, agent, dispatch, f"# {agent}\n\n{summary}\n")
    verdict_files.write(folder, verdict_files.build(
        {"type": "verdict", "status": status, "summary": summary, "tokens_spent": tokens,
         "sprint_id": sprint_id, "detail_path": f".clavain/verdicts/{short}--{dispatch}.md"},
        agent=agent, agent_id=dispatch, tokens_source="measured"), dispatch)


def sprint_with_verdicts_and_waiver(project: Path, run_cli: RunCli) -> str:
    """A complexity-2 sprint: plan recorded, two reviewers' verdicts filed (one wants
    attention, its summary hostile HTML), and the execute gate waived by a person at a
    terminal. Returns the sprint's id."""
    _ok(run_cli("init"))
    started = _ok(run_cli("sprint", "start", "--complexity", "2",
                          "add a --verbose flag to the export command"))
    sprint_id = started.stdout.split()[1].rstrip(".")
    (project / "plan.md").write_text(PLAN)
    _ok(run_cli("sprint", "done", "plan", "--plan", "plan.md"))
    _verdict(project, sprint_id, "clavain:fd-quality", "CLEAN", 1200, "reads well", "d1")
    _verdict(project, sprint_id, "clavain:fd-safety", "NEEDS_ATTENTION", 3400,
             'escapes <img src=x onerror="alert(1)"> & friends', "d2")
    _ok(run_cli("sprint", "done", "execute", "--waive", "ran it on staging by hand",
                person=True))
    return sprint_id


def loop_run(project: Path, run_cli: RunCli, *, run_id: str = "loop-t", runner: str = "agent",
             ends: str = "done") -> str:
    """examples/loop-demo driven by its scripted agent until every check passes (`runner`
    "pretender": an agent that claims work it never did, until the breaker opens)."""
    shutil.copytree(REPO / "examples" / "loop-demo", project, dirs_exist_ok=True)
    _commit_all(project, "loop demo: checks fail")
    _ok(run_cli("init"))
    shutil.copyfile(project / "clavain-config.json", project / ".clavain" / "config.json")
    done = run_cli("loop", "--runner", runner, "--run-id", run_id, "--json")
    assert json.loads(done.stdout)["status"] == ends, done.stdout + done.stderr
    return run_id


# A stand-in for `claude` as a configured runner: claude's JSON report with real-looking tokens
# and dollars (fixed per node), and the node's result. STANDIN_FAIL's node fails every time,
# STANDIN_FLAKY's fails its first attempt (a retry), STANDIN_ASK's asks a person a question.
STANDIN = """
import json, os, sys, zlib
sys.stdin.read()
node = os.environ.get("CLAVAIN_NODE_ID", "?")
crc = zlib.crc32(node.encode())
cost = round(0.08 + (crc % 90) / 100, 4)
result = {"status": "success", "summary": "ok"}
if node == os.environ.get("STANDIN_FAIL"):
    why = "AssertionError: expected 3 sessions, got 2 (tests/test_sessions.py:41)"
    result = {"status": "fail", "summary": why, "errors": [why]}
elif node == os.environ.get("STANDIN_ASK"):
    result = {"status": "checkpoint", "summary": "needs a decision",
              "question": "Drop the legacy sessions table now, or keep it for one release?"}
elif node == os.environ.get("STANDIN_FLAKY"):
    marker = os.path.join(os.environ["STANDIN_DIR"], node + ".tried")
    if not os.path.exists(marker):
        open(marker, "w").close()
        why = "ConnectionResetError: the test server reset the connection"
        result = {"status": "fail", "summary": why, "errors": [why]}
print(json.dumps({"type": "result", "subtype": "success", "is_error": False, "num_turns": 4,
                  "session_id": "stand-in", "total_cost_usd": cost,
                  "usage": {"input_tokens": int(cost * 60000), "output_tokens": int(cost * 9000),
                            "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
                  "result": "Done.\\n<result>" + json.dumps(result) + "</result>"}))
"""
FAILING, ASKING, FLAKY = "task-3-2", "task-2-1", "task-2-3"
QUESTION = "Drop the legacy sessions table now, or keep it for one release?"


def _standin_project(project: Path, *, cap: float, tasks: list[dict[str, object]]) -> None:
    from tests.supervisor import kit

    runner = kit.script(project.parent / "standin.py", STANDIN)
    env = (f"STANDIN_FAIL={FAILING} STANDIN_ASK={ASKING} STANDIN_FLAKY={FLAKY} "
           f"STANDIN_DIR={project.parent}")
    state = kit.make_project(project, {
        "runners": {"standin": {"command": f"{env} {runner}"}},
        "budgets": {"maxCostUsd": cap},
        "supervisor": {"projection": {"shareMaxMultiple": 1000}}})
    kit.add(state, tasks)


def blocked_run(project: Path, run_cli: RunCli, *, run_id: str = "night") -> str:
    """A 200-node graph (99 tasks in three columns of 33 layers, each with its verify node,
    and the scaffold's integrate and final-verify) run by four workers with the stand-in:
    task-2-1 asks a person a question, task-3-2 fails every attempt (every later layer waits
    on it), task-2-3 fails once and passes on its retry. The run ends blocked (deadlock)."""
    tasks: list[dict[str, object]] = []
    for layer in range(1, 34):
        for column in range(1, 4):
            deps = [f"task-{layer - 1}-{column}"] if layer > 1 else []
            if layer > 3:
                deps.append(FAILING)
            tasks.append({"id": f"task-{layer}-{column}", "type": "task",
                          "title": f"step {layer} of part {column}", "verify": [PASSES],
                          "dependsOn": sorted(set(deps))})
    _standin_project(project, cap=60.0, tasks=tasks)
    done = run_cli("run", "--runner", "standin", "--workers", "4", "--run-id", run_id)
    assert done.returncode != 0, done.stdout + done.stderr
    return run_id


def budget_run(project: Path, run_cli: RunCli, *, run_id: str = "capped") -> str:
    """Twenty independent tasks run by the stand-in against a $3 cap: it stops at the cap."""
    tasks: list[dict[str, object]] = [
        {"id": f"task-{n}", "type": "task", "title": f"task {n}", "verify": [PASSES]}
        for n in range(1, 21)]
    _standin_project(project, cap=3.0, tasks=tasks)
    done = run_cli("run", "--runner", "standin", "--workers", "2", "--run-id", run_id)
    assert done.returncode != 0, done.stdout + done.stderr
    return run_id
