"""The main flow in the real Claude Code: `/clavain:sprint --complexity 2 rename foo to bar`
plans, executes (an executor agent whose result SubagentStop records, the verify node passed by
the shell verifier) and dispatches two reviewers, all under one sprint; a second session, after
a commit moved HEAD, resumes with `/clavain:sprint --resume` at the right step."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import ClaudeRunner
from tests.e2e.scripted_model import (
    agent,
    all_text,
    assistant_turns,
    bash,
    is_subagent,
    last_user_text,
    text,
    tool_results,
    user_texts,
)

pytestmark = pytest.mark.e2e

EXECUTOR_BODY = "You change code for one job and prove it."
REVIEWER_BODY = "You review through exactly one lens."
RUN = "s1"

PLAN = """mkdir -p docs && cat > docs/plan.md <<'PLAN'
# Plan: rename foo to bar

Acceptance: no `foo` left in src/.

```json
{"nodes": [{"id": "task-rename", "type": "task", "title": "rename foo to bar",
  "ownership": ["src/**"], "verify": ["! grep -rqw foo src", "grep -qw bar src/app.py"]}]}
```
PLAN
clavain sprint done plan --plan docs/plan.md --decision "one task: sed over src"
"""

EXECUTOR_ANSWER = """Renamed foo to bar in src/app.py; both verify commands pass.

<result>{"status": "success", "summary": "renamed foo to bar in src/app.py", "errors": []}</result>

TYPE: implementation
STATUS: COMPLETE
FILES_CHANGED: [src/app.py]
SUMMARY: executor-done renamed foo to bar
"""


def _review(name: str) -> str:
    return (f"Read src/app.py.\n\nTYPE: verdict\nSTATUS: CLEAN\nFINDINGS_COUNT: 0\n"
            f"SUMMARY: {name}-ok the rename is complete\n")


def _latest(request: dict[str, Any]) -> str:
    """What the model got last: a task notification's text, else its last tool result."""
    notice = last_user_text(request).strip()
    if notice:
        return notice
    results = tool_results(request)
    return results[-1].content if results else ""


def sprint_script(calls: list[str]):
    """The main conversation and its three subagents, step by step."""
    def say(block: dict[str, Any]) -> list[dict[str, Any]]:
        calls.append(block.get("input", {}).get("command", block.get("name", "")))
        return [block]

    def script(request: dict[str, Any]):
        if is_subagent(request, EXECUTOR_BODY):
            if assistant_turns(request) == 0:
                return [bash("sed -i 's/\\bfoo\\b/bar/g' src/app.py", "Rename")]
            return [text(EXECUTOR_ANSWER)]
        if is_subagent(request, REVIEWER_BODY):
            lens = "quality" if "Lens: quality" in "\n".join(user_texts(request)) \
                else "correctness"
            return [text(_review(lens))]
        if assistant_turns(request) == 0:
            return say(bash(PLAN, "Write the plan and record the plan step"))
        last, seen = _latest(request), all_text(request)
        claim = f"clavain graph next --claim --run-id {RUN} --json"
        if "plan done; plan recorded:" in last and "1 task(s) added" in last:
            return say(bash(claim, "Claim the next node"))
        if '"claimed": true' in last:
            node = json.loads(last[last.index("{"):last.rindex("}") + 1])["node"]
            if node["type"] == "task":
                return say(bash(f"clavain graph packet {node['id']} --thin", "Task packet"))
            if node["type"] in ("verify", "final_verify"):
                return say(bash(f"clavain verify {node['id']} --run-id {RUN}", "Shell verify"))
            return say(bash(f"echo '{{\"status\":\"success\",\"summary\":\"one tree\"}}' | "
                            f"clavain graph apply {node['id']} --run-id {RUN} --result -",
                            "Integrate"))
        if "# Clavain executor — node task-rename" in last:
            return say(agent("clavain:executor", last, "Execute task-rename"))
        executing = "clavain sprint done execute" not in calls
        if executing and '"all_done"' in last:
            return say(bash("clavain sprint done execute", "Record the execute step"))
        if executing and ("executor-done" in last or "<result>" in last or "-> done" in last):
            # The notification can come before SubagentStop recorded the result: wait for it.
            wait = ('for i in $(seq 150); do clavain graph ls --status done --json | grep -q '
                    '\'"id": "task-rename"\' && break; sleep 0.2; done; ')
            return say(bash(wait + claim, "Claim the next node"))
        if "execute done" in last and "reviewers" not in calls:
            calls.append("reviewers")
            return [agent("clavain:reviewer", "Lens: quality\nReview the rename in src/app.py."),
                    agent("clavain:reviewer", "Lens: correctness\nReview the rename.")]
        if "quality-ok" in seen and "correctness-ok" in seen and \
                "clavain sprint summary" not in calls:
            return say(bash("clavain sprint summary", "Sprint summary"))
        return [text("waiting")]

    return script


def _git(project: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "e2e", "GIT_AUTHOR_EMAIL": "e@x", "GIT_COMMITTER_NAME": "e2e",
           "GIT_COMMITTER_EMAIL": "e@x", "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", *args], cwd=project, env=env, check=True, text=True,
                          capture_output=True).stdout.strip()


def test_a_sprint_runs_then_resumes_in_a_new_session(claude_runner: ClaudeRunner) -> None:
    project = claude_runner.project
    (project / "src").mkdir()
    (project / "src" / "app.py").write_text("def foo():\n    return 'foo'\n")
    _git(project, "add", "-A")
    _git(project, "commit", "-qm", "app")

    calls: list[str] = []
    run = claude_runner.run("/clavain:sprint --complexity 2 rename foo to bar",
                            sprint_script(calls),
                            allowed_tools=("Bash", "Read", "Edit", "Write", "Agent"),
                            timeout=300).check()
    first = "\n".join(user_texts(run.requests[0]))
    assert "Complexity 2/5 (simple) — skipping brainstorm, strategy, plan-review" in first, run

    checkpoint = json.loads((project / ".clavain" / "checkpoint.json").read_text())
    assert checkpoint["completed_steps"] == ["plan", "execute"], f"{checkpoint}\n{calls}\n{run}"
    assert checkpoint["current_step"] == "test"
    assert (project / "src" / "app.py").read_text() == "def bar():\n    return 'bar'\n"
    with sqlite3.connect(project / ".clavain" / "state.sqlite") as conn:
        statuses = dict(conn.execute("SELECT id, status FROM nodes WHERE graph_id = ?",
                                     (checkpoint["sprint_id"],)))
    assert statuses == {"task-rename": "done", "verify-task-rename": "done",
                        "integrate": "done", "final-verify": "done"}
    # The executor's result was recorded by SubagentStop: nobody ran `graph apply task-rename`.
    assert not any("graph apply task-rename" in call for call in calls), calls
    # The verify node ran in the shell verifier (no LLM): its command logs are on disk.
    assert (project / ".clavain" / "runs" / RUN / "verify-task-rename" / "cmd-1.log").exists()

    verdicts = [json.loads(p.read_text())
                for p in (project / ".clavain" / "verdicts").glob("*.json")]
    by_agent = {v["agent"]: v for v in verdicts}
    lenses = {"clavain:reviewer/quality", "clavain:reviewer/correctness"}
    assert lenses <= set(by_agent), verdicts
    for name in (*lenses, "clavain:executor"):
        assert by_agent[name]["sprint_id"] == checkpoint["sprint_id"]
        assert by_agent[name]["tokens_source"] == "measured"

    # A new day: a commit moved HEAD, a new session resumes.
    (project / "NOTES.md").write_text("later\n")
    _git(project, "add", "-A")
    _git(project, "commit", "-qm", "later")
    resumed = claude_runner.run("/clavain:sprint --resume", lambda request: [text("resuming")],
                                allowed_tools=("Bash", "Read")).check()
    prompt = "\n".join(user_texts(resumed.requests[0]))
    assert "Resuming from step 3 (test). Completed: [plan, execute]" in prompt, prompt
    assert "Warning: 1 commit(s) since the checkpoint on " in prompt
    assert "Verdicts: 1 COMPLETE, 2 CLEAN" in prompt or "Verdicts: 2 CLEAN, 1 COMPLETE" in prompt


@pytest.mark.parametrize("typed", [
    "--complexity 2 rename foo\nCLAVAIN_REQUEST\ntouch PWNED-1\nCLAVAIN_REQUEST",
    "--complexity 2 fix $(touch PWNED-2) and `touch PWNED-3` in the user's \"app\"",
])
def test_the_request_is_never_parsed_by_a_shell(claude_runner: ClaudeRunner, typed: str) -> None:
    """What the user types reaches the checkpoint verbatim, whatever shell syntax it holds:
    the UserPromptSubmit hook records it, `clavain sprint start --from-prompt` takes it."""
    project = claude_runner.project
    run = claude_runner.run(f"/clavain:sprint {typed}", lambda request: [text("noted")],
                            allowed_tools=("Bash", "Read")).check()
    first = "\n".join(user_texts(run.requests[0]))
    assert "Complexity 2/5 (simple)" in first, first
    checkpoint = json.loads((project / ".clavain" / "checkpoint.json").read_text())
    assert checkpoint["description"] == " ".join(typed.split()[2:])
    assert not list(project.rglob("PWNED*")) and not list(claude_runner.home.rglob("PWNED*"))
    assert not list((project / ".clavain" / "typed").glob("sprint-request-*"))
