"""`clavain run` with the real `claude -p` as its runner, against the scripted model: one plan
node becomes three tasks, three executors run at once (each in its own git worktree, Clavain's
hooks loaded), their work is merged, and every check runs in the shell verifier — so the model
sees exactly four sessions (one planner, three executors) and never a verifier's packet."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.e2e.conftest import REPO, ClaudeRunner
from tests.e2e.three_tasks import TASKS, scenario_script

pytestmark = pytest.mark.e2e

GIT_ENV = {"GIT_AUTHOR_NAME": "e2e", "GIT_AUTHOR_EMAIL": "e2e@example.invalid",
           "GIT_COMMITTER_NAME": "e2e", "GIT_COMMITTER_EMAIL": "e2e@example.invalid"}


def _clavain(env: dict[str, str], cwd: Path, *args: str, stdin: str | None = None,
             timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(REPO / "bin" / "clavain"), *args], cwd=cwd, env=env,
                          input=stdin, capture_output=True, text=True, timeout=timeout)


def _git(project: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=project, env={"PATH": "/usr/bin:/bin", **GIT_ENV},
                          check=True, text=True, capture_output=True).stdout


def test_a_plan_runs_headless_with_three_parallel_claude_executors(
        claude_runner: ClaudeRunner, claude_bin: Path, backend: str | None) -> None:
    """On both workgraph backends: with a shared PostgreSQL store (`backend`), the real
    runners' own `clavain` calls reach the server while their hooks count locally."""
    project = claude_runner.project
    env = claude_runner.env({"CLAVAIN_CLAUDE_BIN": str(claude_bin),
                             "CLAVAIN_PYTHON": sys.executable,
                             "CLAVAIN_PROJECT_DIR": str(project),
                             **({"CLAVAIN_DB": backend} if backend else {})})
    init = _clavain(env, project, "init", "--json")
    assert init.returncode == 0, init.stderr
    config = {"defaults": {"snapshotMaxLagSeconds": 0, "retryBackoffSeconds": 0},
              "supervisor": {"claude": {"maxTurns": 8,
                                        "allowedTools": ["Bash", "Read", "Write", "Edit"],
                                        "extraArgs": ["--plugin-dir", str(REPO)]}}}
    (project / ".clavain" / "config.json").write_text(json.dumps(config))
    # Parallel workers need a clean tree: commit what `init` and the config added.
    _git(project, "add", "-A")
    _git(project, "commit", "-qm", "clavain init")
    graph = json.dumps({"nodes": [{"id": "plan-greeter", "type": "plan",
                                   "title": "Plan a greeter"}]})
    imported = _clavain(env, project, "graph", "import", "-", "--json", stdin=graph)
    assert imported.returncode == 0, imported.stderr

    seen: list[tuple[str, str, int]] = []
    claude_runner.model.script = scenario_script(seen)
    done = _clavain(env, project, "run", "--workers", "3", "--json", timeout=300)
    detail = (f"exit {done.returncode}\nstdout: {done.stdout[-6000:]}\n"
              f"stderr: {done.stderr[-6000:]}\nmodel saw: {seen}\n"
              f"script errors: {claude_runner.model.errors}")
    assert done.returncode == 0, detail
    report = json.loads(done.stdout)
    assert report["status"] == "complete", detail
    assert not claude_runner.model.errors, detail
    run_id = report["run_id"]

    # Every node done: the plan, its three tasks, their verify nodes and the gates.
    listed = _clavain(env, project, "graph", "ls", "--json")
    assert listed.returncode == 0, listed.stderr
    listing = json.loads(listed.stdout)
    nodes = listing["nodes"] if isinstance(listing, dict) else listing
    statuses = {n["id"]: n["status"] for n in nodes}
    expected = {"plan-greeter", "integrate", "final-verify",
                *(f"task-{n}" for n in TASKS), *(f"verify-task-{n}" for n in TASKS)}
    assert statuses == dict.fromkeys(expected, "done"), (statuses, detail)

    # The executors' work was merged from their worktrees into the project's branch.
    for name in TASKS:
        assert (project / f"{name}.txt").read_text() == f"{name}\n"
        assert f"{name}.txt" in _git(project, "ls-files").split()
    log = _git(project, "log", "--format=%s", "HEAD")
    for name in TASKS:
        assert f"task-{name}" in log, log
    merges = _git(project, "log", "--merges", "--oneline", "HEAD").splitlines()
    assert merges, f"no merge commits on HEAD:\n{log}"
    assert _git(project, "status", "--porcelain", "--untracked-files=no") == ""

    # The model: one planner session, three executor sessions, nothing else of Clavain's.
    sessions = Counter(role for role, _node, turn in seen if turn == 0)
    assert sessions == {"planner": 1, "executor": 3}, seen
    per_task = Counter(node for role, node, turn in seen if role == "executor" and turn == 0)
    assert per_task == {f"task-{n}": 1 for n in TASKS}, seen
    checkers = [entry for entry in seen
                if entry[0] in ("verifier", "integrator", "final verifier")]
    assert not checkers, seen

    metrics = report["metrics"]
    assert metrics["llm_invocations"] == 4, metrics
    assert metrics["llm_invocations_by_role"] == {"planner": 1, "executor": 3}, metrics
    assert metrics["verify_without_llm"] == 4, metrics
    assert metrics["nodes"] == {"done": 9}, metrics
    calls = Counter(entry["node"] for entry in metrics["timeline"])
    assert all(calls[f"task-{n}"] == 1 for n in TASKS), calls
    assert metrics["tokens"] > 0 and metrics["cost_usd"] > 0, metrics
    print(f"peak concurrency {metrics['peak_concurrency']}, wall {metrics['wall_seconds']}s")
    assert metrics["peak_concurrency"] >= 2, metrics["timeline"]

    on_disk = json.loads((project / ".clavain" / "runs" / run_id / "metrics.json").read_text())
    for key in ("nodes", "llm_invocations", "llm_invocations_by_role", "verify_without_llm",
                "tokens", "cost_usd", "wall_seconds", "peak_concurrency", "timeline"):
        assert key in on_disk, key

    shown = _clavain(env, project, "report", "--run", run_id)
    assert shown.returncode == 0, shown.stderr
    assert f"Supervised run {run_id}" in shown.stdout, shown.stdout

    # The runners loaded Clavain's hooks: PreToolUse counted their Bash calls under the run.
    budget = _clavain(env, project, "budget", "status", "--run", f"run:{run_id}", "--json")
    assert budget.returncode == 0, budget.stderr
    used = {b["budget"]: b["used"] for b in json.loads(budget.stdout)["budgets"]}
    assert used["Bash commands"] >= 3, budget.stdout
    # Its tokens and dollars are the runners' own reports, which the supervisor added (the
    # planner's too, though it made no tool call); reading the status must not re-measure them.
    assert used["Tokens"] == metrics["tokens"], (budget.stdout, metrics["tokens"])
    assert used["Dollars"] == pytest.approx(metrics["cost_usd"], abs=1e-6), budget.stdout
