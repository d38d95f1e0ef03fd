"""Verdicts end to end: the real `claude` runs the plugin's reviewer twice, through two lenses;
the scripted answers end with verdict headers; the SubagentStop hook records one verdict per
lens with measured tokens and the sprint-facing summary counts them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import REPO, ClaudeRunner
from tests.e2e.scripted_model import (
    agent,
    all_text,
    assistant_turns,
    bash,
    is_subagent,
    text,
    user_texts,
)

pytestmark = pytest.mark.e2e

REVIEWER_BODY = "You review through exactly one lens."

QUALITY_ANSWER = """Read README.md; nothing to change.

TYPE: verdict
STATUS: CLEAN
FINDINGS_COUNT: 0
SUMMARY: quality-ok naming and tests are fine
"""

SAFETY_ANSWER = (
    "## Findings\n1. `README.md:1` no security notes\n2. `README.md:1` no threat model\n\n"
    "```markdown\n- **Type:** Verdict\n- **Status**: _needs attention_\n"
    "- `TOKENS_SPENT`: ~1,200 (estimated)\n- Files Changed: []\n- findings_count: **2**\n"
    "- **SUMMARY:** safety-flag two missing sections\n```\n"
)


def review_script(summary_calls: list[dict[str, Any]]):
    def script(request: dict[str, Any]):
        if is_subagent(request, REVIEWER_BODY):
            prompt = "\n".join(user_texts(request))
            return [text(QUALITY_ANSWER if "Lens: quality" in prompt else SAFETY_ANSWER)]
        if assistant_turns(request) == 0:
            return [agent("clavain:reviewer", "Lens: quality\nReview README.md."),
                    agent("clavain:reviewer", "Lens: safety\nReview README.md.")]
        seen = all_text(request)
        if "quality-ok" in seen and "safety-flag" in seen and not summary_calls:
            call = bash("clavain verdicts summary", "Read the verdicts")
            summary_calls.append(call)
            return [call]
        return [text("reviews recorded" if summary_calls else "waiting for reviewers")]

    return script


def test_review_agents_verdicts_are_recorded_with_measured_tokens(
        claude_runner: ClaudeRunner) -> None:
    summary_calls: list[dict[str, Any]] = []
    run = claude_runner.run("review README.md", review_script(summary_calls),
                            allowed_tools=("Bash", "Read", "Agent")).check()
    from clavain.verdicts.files import safe_dispatch

    folder = run.project / ".clavain" / "verdicts"
    files = sorted(path.name for path in folder.iterdir())
    # One pair per dispatch: `<agent>--<the host's agent_id>.json` + `.md`.
    assert [name.split("--")[0] + name[name.rindex("."):] for name in files] == [
        "clavain-reviewer-quality.json", "clavain-reviewer-quality.md",
        "clavain-reviewer-safety.json", "clavain-reviewer-safety.md"], f"{files}\n{run}"

    [quality_file] = folder.glob("clavain-reviewer-quality--*.json")
    [safety_file] = folder.glob("clavain-reviewer-safety--*.json")
    quality = json.loads(quality_file.read_text())
    safety = json.loads(safety_file.read_text())
    for path, verdict in ((quality_file, quality), (safety_file, safety)):
        assert verdict["agent_id"], verdict  # SubagentStop carries the dispatch's agent_id
        assert path.stem.split("--")[1] == safe_dispatch(verdict["agent_id"])
        assert verdict["detail_path"] == f".clavain/verdicts/{path.stem}.md"
    assert (quality["status"], safety["status"]) == ("CLEAN", "NEEDS_ATTENTION")
    assert safety["findings_count"] == 2
    assert safety["summary"] == "safety-flag two missing sections"
    for verdict in (quality, safety):
        assert verdict["tokens_source"] == "measured"
        assert verdict["tokens_spent"] > 0
        assert verdict["tokens_spent"] != 1200  # the reported estimate was replaced
        assert verdict["session_id"] == run.output["session_id"]
    assert (run.project / safety["detail_path"]).read_text().strip() == SAFETY_ANSWER.strip()
    # No MODEL line in either header: the model comes from the transcript, and shows that the
    # agent's `model:` tier reached the host.
    assert "sonnet" in quality["model"] and "sonnet" in safety["model"]
    assert (quality["agent"], safety["agent"]) == ("clavain:reviewer/quality",
                                                   "clavain:reviewer/safety")

    # The model, inside the session, read the compact summary through the plugin's bin/.
    assert summary_calls, f"the reviewers' answers never reached the main thread\n{run}"
    in_session = run.tool_result(summary_calls[0]["id"])
    assert "1 CLEAN, 1 NEEDS_ATTENTION" in in_session
    assert safety["detail_path"] in in_session
    assert "clavain-reviewer-quality--" not in in_session  # CLEAN: no detail path

    after = _clavain(run.project, "verdicts", "summary")
    assert after.splitlines()[0].startswith("Verdicts: 1 CLEAN, 1 NEEDS_ATTENTION; ")

    # The measured figure is the subagent's own transcript, deduplicated.
    transcripts = list((run.home / ".claude" / "projects").glob("*/*/subagents/agent-*.jsonl"))
    assert len(transcripts) == 2, transcripts
    measured = sorted(json.loads(_clavain(run.project, "tokens", "--transcript", str(path),
                                          "--json"))["total"] for path in transcripts)
    assert measured == sorted([quality["tokens_spent"], safety["tokens_spent"]])


def _clavain(project: Path, *args: str) -> str:
    result = subprocess.run([str(REPO / "bin" / "clavain"), *args], cwd=project,
                            capture_output=True, text=True, timeout=60,
                            env={"PATH": "/usr/bin:/bin", "CLAVAIN_PYTHON": sys.executable,
                                 "CLAVAIN_PROJECT_DIR": str(project)})
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_verdicts_command_runs_the_cli_before_the_model_answers(
        claude_runner: ClaudeRunner) -> None:
    from clavain.verdicts import files as verdict_files

    verdict_files.write(claude_runner.project / ".clavain" / "verdicts", verdict_files.build(
        {"type": "verdict", "status": "NEEDS_ATTENTION", "summary": "needs-a-look",
         "detail_path": ".clavain/verdicts/clavain-reviewer-safety.md"},
        agent="clavain:reviewer/safety"))
    run = claude_runner.run("/clavain:verdicts attention", lambda request: [text("shown")])
    run.check()
    assert len(run.requests) == 1  # the output was already in the prompt: no tool round trip
    shown = all_text(run.requests[0])
    assert ("NEEDS_ATTENTION  clavain:reviewer/safety  "
            ".clavain/verdicts/clavain-reviewer-safety.md") in shown
