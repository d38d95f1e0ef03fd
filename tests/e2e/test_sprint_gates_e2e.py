"""Sprint gates in the real Claude Code: `clavain sprint done STEP` records a step only through its
gate, whatever the model claims.

1. A complexity-3 sprint whose model first tries shortcuts (ship at brainstorm, waive a gate,
   plan without a plan, plan-review / execute / quality-gates / resolve / ship before their work)
   and is refused each time, then does every step honestly and ships: the sprint is archived
   with outcome "shipped", every step completed, no waiver.
2. A reviewer dispatch still running in the background when the model records quality-gates:
   the command waits for it (SubagentStart recorded the dispatch, SubagentStop files the verdict
   and clears it) and then passes, without a waiver.
"""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import REPO, ClaudeRun, ClaudeRunner
from tests.e2e.scripted_model import (
    agent,
    all_text,
    assistant_turns,
    bash,
    is_subagent,
    text,
    tool_results,
    user_texts,
)

pytestmark = pytest.mark.e2e

EXECUTOR_BODY = "You change code for one job and prove it."
REVIEWER_BODY = "You review through exactly one lens."
RUN = "s1"
CLAIM = f"clavain graph next --claim --run-id {RUN} --json"
FULL_LENSES = ("quality", "correctness", "architecture", "safety", "goal")

PLAN_FILE = """mkdir -p docs && cat > docs/plan.md <<'PLAN'
# Plan: rename foo to bar

Acceptance: no `foo` left in src/.

```json
{"nodes": [{"id": "task-rename", "type": "task", "title": "rename foo to bar",
  "ownership": ["src/**"], "verify": ["! grep -rqw foo src", "grep -qw bar src/app.py"]}]}
```
PLAN
"""

EXECUTOR_ANSWER = """Renamed foo to bar in src/app.py; both verify commands pass.

<result>{"status": "success", "summary": "renamed foo to bar in src/app.py", "errors": []}</result>

TYPE: implementation
STATUS: COMPLETE
FILES_CHANGED: [src/app.py]
SUMMARY: executor-done renamed foo to bar
"""


def _verdict(lens: str, status: str = "CLEAN", findings: int = 0) -> str:
    found = "src/app.py:1 — bar() has no docstring — add one\n\n" if findings else ""
    return (f"Read the change.\n\n{found}TYPE: verdict\nSTATUS: {status}\n"
            f"FINDINGS_COUNT: {findings}\nSUMMARY: {lens}-ok review of the rename\n")


def _lens_of(request: dict[str, Any]) -> str:
    """The lens the reviewer's prompt names (its first message also carries host reminders)."""
    found = re.search(r"^Lens: ([\w-]+)", "\n".join(user_texts(request)), re.M)
    return found[1] if found else "?"


# ------------------------------------------------------------------ a step-by-step main script

Ctx = dict[str, Any]  # {"results": label -> tool result text, "seen": all the request's text}
Step = tuple[str, Callable[[Ctx], "list[dict[str, Any]] | None"]]


@dataclass
class Driver:
    """Runs `steps` in order in the main conversation: one step's tool calls per turn; the next
    step only once every tool result of the last one came back and its maker returns blocks
    (None: not yet, e.g. a subagent has not reported; the turn answers "waiting")."""

    steps: list[Step]
    results: dict[str, str] = field(default_factory=dict)
    errors: dict[str, bool] = field(default_factory=dict)
    ids: dict[str, list[str]] = field(default_factory=dict)
    issued_at: dict[str, float] = field(default_factory=dict)
    index: int = 0
    pending: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def turn(self, request: dict[str, Any]) -> list[dict[str, Any]]:
        with self.lock:
            if self.pending is not None:
                got = {r.tool_use_id: r for r in tool_results(request)}
                wanted = self.ids[self.pending]
                if not all(i in got for i in wanted):
                    return [text("waiting")]
                self.results[self.pending] = "\n".join(got[i].content for i in wanted)
                self.errors[self.pending] = any(got[i].is_error for i in wanted)
                self.pending = None
            if self.index >= len(self.steps):
                return [text("All steps are done.")]
            label, make = self.steps[self.index]
            blocks = make({"results": self.results, "seen": all_text(request)})
            if not blocks:
                return [text("waiting")]
            self.index += 1
            self.pending = label
            self.ids[label] = [b["id"] for b in blocks if b["type"] == "tool_use"]
            self.issued_at[label] = time.time()
            return blocks

    def done_labels(self) -> list[str]:
        return [label for label, _ in self.steps if label in self.results]


def run_(command: str, description: str = "Run a command") -> Callable[[Ctx], list]:
    return lambda ctx: [bash(command, description)]


def after(marker: str | tuple[str, ...], make: Callable[[Ctx], list]) -> Callable[[Ctx], Any]:
    """`make`, once every marker reached the conversation (a subagent's notification)."""
    markers = (marker,) if isinstance(marker, str) else marker
    return lambda ctx: make(ctx) if all(m in ctx["seen"] for m in markers) else None


def _resolve_answer(ctx: Ctx) -> list[dict[str, Any]]:
    refused = ctx["results"]["resolve-early"]
    found = re.search(r"clavain verdicts resolve (\S+) --note", refused)
    assert found, refused
    return [bash(f"clavain verdicts resolve {found[1]} --note 'added the docstring the safety "
                 "lens asked for'", "Answer the safety finding")]


def full_sprint_steps() -> list[Step]:
    def done(step: str, extra: str = "") -> Callable[[Ctx], list]:
        return run_(f"clavain sprint done {step}{extra}", f"Record step {step}")

    return [
        # Shortcuts first: each is refused.
        ("ship-early", done("ship")),
        ("waive-early", done("brainstorm", ' --waive "the model thinks it is obvious"')),
        ("brainstorm", done("brainstorm", ' --decision "a mechanical rename"')),
        ("strategy", done("strategy", ' --decision "sed over src, one task"')),
        ("write-plan", run_(PLAN_FILE, "Write the plan")),
        ("plan-no-path", done("plan")),
        ("plan", done("plan", " --plan docs/plan.md")),
        ("plan-review-early", done("plan-review")),
        ("plan-review-agent", lambda ctx: [agent(
            "clavain:reviewer", "Lens: plan\nReview the plan in docs/plan.md.", "Plan review")]),
        ("plan-review", after("plan-ok", done("plan-review"))),
        ("execute-early", done("execute")),
        ("claim-task", run_(CLAIM, "Claim the next node")),
        ("packet", run_("clavain graph packet task-rename --thin", "Task packet")),
        ("executor", lambda ctx: [agent("clavain:executor", ctx["results"]["packet"],
                                        "Execute task-rename")]),
        # The notification can reach the conversation before SubagentStop has recorded the
        # executor's result: wait (bounded) for the task to be done, then claim.
        ("claim-verify", after("executor-done", run_(
            'for i in $(seq 150); do clavain graph ls --status done --json | grep -q '
            f'\'"id": "task-rename"\' && break; sleep 0.2; done; {CLAIM}',
            "Wait for the recorded result, claim the next node"))),
        ("verify", run_(f"clavain verify verify-task-rename --run-id {RUN}", "Shell verify")),
        ("execute", done("execute")),
        ("test", run_("grep -qw bar src/app.py && ! grep -rqw foo src && "
                      "clavain sprint done test", "Run the checks, record test")),
        ("quality-gates-early", done("quality-gates")),
        ("reviews", lambda ctx: [agent("clavain:reviewer", f"Lens: {lens}\nReview the rename "
                                       "of foo to bar in src/app.py against docs/plan.md.",
                                       f"Review: {lens}") for lens in FULL_LENSES]),
        ("quality-gates", after(tuple(f"{lens}-ok" for lens in FULL_LENSES),
                                done("quality-gates"))),
        ("resolve-early", done("resolve")),
        ("answer", _resolve_answer),
        ("resolve", done("resolve")),
        ("ship-unintegrated", done("ship")),
        ("claim-integrate", run_(CLAIM, "Claim the next node")),
        ("integrate", run_("echo '{\"status\":\"success\",\"summary\":\"one tree\"}' | "
                           f"clavain graph apply integrate --run-id {RUN} --result -",
                           "Integrate")),
        ("claim-final", run_(CLAIM, "Claim the next node")),
        ("final-verify", run_(f"clavain verify final-verify --run-id {RUN}", "Final verify")),
        ("claim-done", run_(CLAIM, "Claim the next node")),
        ("ship", done("ship")),
    ]


def _git(project: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "e2e", "GIT_AUTHOR_EMAIL": "e@x", "GIT_COMMITTER_NAME": "e2e",
           "GIT_COMMITTER_EMAIL": "e@x", "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", *args], cwd=project, env=env, check=True, text=True,
                          capture_output=True).stdout.strip()


def _app(project: Path) -> None:
    (project / "src").mkdir()
    (project / "src" / "app.py").write_text("def foo():\n    return 'foo'\n")
    _git(project, "add", "-A")
    _git(project, "commit", "-qm", "app")


def _claimed(result: str) -> dict[str, Any]:
    return json.loads(result[result.index("{"):result.rindex("}") + 1])


def _explain(driver: Driver, run: ClaudeRun) -> str:
    shown = "\n".join(f"--- {label} (error={driver.errors.get(label)}):\n{out[-600:]}"
                      for label, out in driver.results.items())
    return f"steps done: {driver.done_labels()}\n{shown}\n{run}"


def test_a_complexity_3_sprint_reaches_ship_only_through_its_gates(
        claude_runner: ClaudeRunner) -> None:
    project = claude_runner.project
    _app(project)
    driver = Driver(full_sprint_steps())

    def script(request: dict[str, Any]):
        if is_subagent(request, EXECUTOR_BODY):
            if assistant_turns(request) == 0:
                return [bash("sed -i 's/\\bfoo\\b/bar/g' src/app.py", "Rename")]
            return [text(EXECUTOR_ANSWER)]
        if is_subagent(request, REVIEWER_BODY):
            lens = _lens_of(request)
            if lens == "safety":  # one finding, answered at the resolve step
                return [text(_verdict(lens, "NEEDS_ATTENTION", 1))]
            return [text(_verdict(lens))]
        return driver.turn(request)

    run = claude_runner.run("/clavain:sprint --complexity 3 rename foo to bar", script,
                            allowed_tools=("Bash", "Read", "Edit", "Write", "Agent"),
                            timeout=280).check()
    why = _explain(driver, run)
    first = "\n".join(user_texts(run.requests[0]))
    assert "Complexity 3/5 (moderate) — running every step" in first, why
    assert driver.index == len(driver.steps) and driver.pending is None, why
    r = driver.results

    # The shortcuts, refused.
    assert "the sprint is at step brainstorm, not ship" in r["ship-early"], why
    assert "`clavain … --waive` is a person's decision" in r["waive-early"], why
    assert "brainstorm done" in r["brainstorm"] and "strategy done" in r["strategy"], why
    assert "step plan records its plan: `clavain sprint done plan --plan PATH`" in \
        r["plan-no-path"], why
    assert "plan done; plan recorded:" in r["plan"], why
    assert "1 task(s) added (task-rename)" in r["plan"], why
    assert "step plan-review is not done: no verdict yet from lens plan" in \
        r["plan-review-early"], why
    assert "plan-review done" in r["plan-review"] and "WAIVED" not in r["plan-review"], why
    assert "step execute is not done: 1 task(s) not done: task-rename (open)" in \
        r["execute-early"], why
    assert _claimed(r["claim-task"])["node"]["id"] == "task-rename", why
    assert _claimed(r["claim-verify"])["node"]["id"] == "verify-task-rename", why
    assert '{"status":"success","summary":"all 2 verify commands passed"' in r["verify"], why
    assert "execute done" in r["execute"] and "test done" in r["test"], why
    assert ("no verdict yet from lens quality, correctness, architecture, safety, goal since "
            "step quality-gates began") in r["quality-gates-early"], why
    assert "quality-gates done" in r["quality-gates"], why
    assert "step resolve is not done: 1 verdict(s) need an answer: NEEDS_ATTENTION " \
        "clavain:reviewer/safety" in r["resolve-early"], why
    assert "resolved NEEDS_ATTENTION clavain:reviewer/safety" in r["answer"], why
    assert "resolve done" in r["resolve"], why
    assert "step ship is not done: 2 node(s) of the sprint's graph not done: integrate (open), " \
        "final-verify (open)" in r["ship-unintegrated"], why
    assert _claimed(r["claim-integrate"])["node"]["id"] == "integrate", why
    assert _claimed(r["claim-final"])["node"]["id"] == "final-verify", why
    assert _claimed(r["claim-done"])["reason"] == "all_done", why
    assert "ship done" in r["ship"] and "Sprint shipped; archived in .clavain/runs/" in \
        r["ship"], why
    for label in ("ship-early", "waive-early", "plan-no-path", "plan-review-early",
                  "execute-early", "quality-gates-early", "resolve-early", "ship-unintegrated"):
        assert driver.errors[label], f"{label} was not refused\n{why}"
    for label in ("brainstorm", "strategy", "plan", "plan-review", "execute", "test",
                  "quality-gates", "resolve", "ship"):
        assert not driver.errors[label], f"{label} failed\n{why}"
        assert "WAIVED" not in r[label], why

    # The archive: shipped, every step completed, nothing waived.
    assert not (project / ".clavain" / "checkpoint.json").exists(), why
    archives = [p.parent for p in (project / ".clavain" / "runs").glob("sprint-*/checkpoint.json")]
    assert len(archives) == 1, why
    checkpoint = json.loads((archives[0] / "checkpoint.json").read_text())
    assert checkpoint["sprint_id"] == archives[0].name
    assert checkpoint["outcome"] == "shipped", checkpoint
    assert checkpoint["waivers"] == [], checkpoint
    assert checkpoint["current_step"] is None, checkpoint
    assert checkpoint["completed_steps"] == checkpoint["route"] == [
        "brainstorm", "strategy", "plan", "plan-review", "execute", "test", "quality-gates",
        "resolve", "ship"], checkpoint
    assert (project / "src" / "app.py").read_text() == "def bar():\n    return 'bar'\n"
    with sqlite3.connect(project / ".clavain" / "state.sqlite") as conn:
        statuses = dict(conn.execute("SELECT id, status FROM nodes WHERE graph_id = ?",
                                     (checkpoint["sprint_id"],)))
    assert statuses == {"task-rename": "done", "verify-task-rename": "done",
                        "integrate": "done", "final-verify": "done"}, statuses
    # Every reviewer verdict was filed per lens under the sprint and archived with it.
    verdicts = [json.loads(p.read_text()) for p in (archives[0] / "verdicts").glob("*.json")]
    agents = {v["agent"] for v in verdicts if v.get("sprint_id") == checkpoint["sprint_id"]}
    assert {f"clavain:reviewer/{lens}" for lens in (*FULL_LENSES, "plan")} <= agents, verdicts
    summary = json.loads((archives[0] / "summary.json").read_text())
    assert summary["waived"] == [], summary


# ------------------------------------------------------------------ a reviewer still running

def _clavain(runner: ClaudeRunner, *args: str) -> subprocess.CompletedProcess[str]:
    """The plugin's CLI run by a person at a terminal in the project (not through the model)."""
    from tests.person import run_as_person

    env = runner.env({"CLAVAIN_PYTHON": sys.executable})
    return run_as_person([str(REPO / "bin" / "clavain"), *args], cwd=runner.project, env=env,
                         timeout=60)


def _stamp(value: str) -> float:
    return datetime.strptime(value.replace("Z", "+0000"),
                             "%Y-%m-%dT%H:%M:%S.%f%z").astimezone(timezone.utc).timestamp()


def test_quality_gates_waits_for_a_reviewer_still_running(claude_runner: ClaudeRunner) -> None:
    project = claude_runner.project
    _app(project)
    # A person brings a complexity-2 sprint to quality-gates (waiving execute and test on
    # purpose: the model may not waive, its PreToolUse hook denies `--waive`).
    (project / "docs").mkdir()
    (project / "docs" / "plan.md").write_text(
        PLAN_FILE.split("<<'PLAN'\n", 1)[1].rsplit("PLAN\n", 1)[0])
    _git(project, "add", "-A")
    _git(project, "commit", "-qm", "plan")
    for args in (("sprint", "start", "--complexity", "2", "rename", "foo", "to", "bar"),
                 ("sprint", "done", "plan", "--plan", "docs/plan.md"),
                 ("sprint", "done", "execute", "--waive", "e2e: only the review gate is tested"),
                 ("sprint", "done", "test", "--waive", "e2e: only the review gate is tested")):
        done = _clavain(claude_runner, *args)
        assert done.returncode == 0, f"{args}: {done.stdout}{done.stderr}"
    checkpoint = json.loads((project / ".clavain" / "checkpoint.json").read_text())
    assert checkpoint["current_step"] == "quality-gates", checkpoint
    lenses = (*checkpoint["reviewers"], checkpoint["goal_check"])
    assert lenses == ("quality", "correctness", "goal"), checkpoint

    reviewers_asked: set[str] = set()
    all_asked = threading.Event()
    gate_issued = threading.Event()
    answered_at: dict[str, float] = {}
    guard = threading.Lock()

    def gate_step(ctx: Ctx) -> list[dict[str, Any]]:
        # Every reviewer subagent has made its first request, so SubagentStart has recorded
        # its dispatch; none has answered yet (each waits for this command to be issued).
        assert all_asked.wait(60), f"reviewers asked: {reviewers_asked}"
        block = bash("clavain sprint done quality-gates", "Record quality-gates")
        gate_issued.set()
        return [block]

    driver = Driver([
        ("reviews", lambda ctx: [agent("clavain:reviewer", f"Lens: {lens}\nReview the rename "
                                       "planned in docs/plan.md.", f"Review: {lens}")
                                 for lens in lenses]),
        ("quality-gates", gate_step),
        ("summary", after(tuple(f"{lens}-ok" for lens in lenses),
                          run_("clavain verdicts summary", "Verdicts"))),
    ])

    def script(request: dict[str, Any]):
        if is_subagent(request, REVIEWER_BODY):
            lens = _lens_of(request)
            with guard:
                reviewers_asked.add(lens)
                if reviewers_asked >= set(lenses):
                    all_asked.set()
            # The reviewer is slow: it answers only after the gate command began to wait.
            if gate_issued.wait(90):
                time.sleep(4)
            with guard:
                answered_at[lens] = time.time()
            return [text(_verdict(lens))]
        return driver.turn(request)

    run = claude_runner.run("Review the planned rename, then record the quality-gates step.",
                            script, allowed_tools=("Bash", "Read", "Agent"),
                            env={"CLAVAIN_REVIEW_WAIT_SECONDS": "60"}, timeout=240).check()
    why = _explain(driver, run)
    gate = driver.results.get("quality-gates", "")
    assert "quality-gates done" in gate, why
    assert "WAIVED" not in gate and not driver.errors["quality-gates"], why
    # It waited: the gate's stderr says so, and every verdict it accepted was filed after the
    # command was issued.
    assert "waiting for" in gate and "reviewer dispatch(es) still running" in gate, why
    issued = driver.issued_at["quality-gates"]
    assert set(answered_at) == set(lenses), answered_at
    assert all(at > issued for at in answered_at.values()), (answered_at, issued)

    after_gate = json.loads((project / ".clavain" / "checkpoint.json").read_text())
    assert after_gate["completed_steps"] == ["plan", "execute", "test", "quality-gates"]
    assert after_gate["current_step"] == "resolve"
    assert [w["step"] for w in after_gate["waivers"]] == ["execute", "test"], after_gate
    verdicts = [json.loads(p.read_text()) for p in (project / ".clavain" / "verdicts").glob(
        "*.json")]
    by_lens = {v["agent"].removeprefix("clavain:reviewer/"): v for v in verdicts
               if v["agent"].startswith("clavain:reviewer/")}
    assert set(by_lens) == set(lenses), verdicts
    for lens, verdict in by_lens.items():
        assert verdict["sprint_id"] == checkpoint["sprint_id"], verdict
        assert verdict["status"] == "CLEAN", verdict
        assert _stamp(verdict["timestamp"]) >= issued - 1, (lens, verdict, issued)
    # No dispatch is left recorded as running.
    assert not list((project / ".clavain" / "dispatches").glob("*.json")), why
