"""SubagentStop, run as the host runs it: `bin/clavain-hook SubagentStop` with JSON on stdin."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from clavain.models.verdict import SCHEMA_PATH, Verdict

REPO = Path(__file__).resolve().parents[2]

CLEAN_MESSAGE = """Reviewed lib/a.py; naming and tests are fine.

TYPE: verdict
STATUS: CLEAN
MODEL: sonnet
TOKENS_SPENT: 99
FINDINGS_COUNT: 0
SUMMARY: nothing to change
"""

MESSY_MESSAGE = (
    "## Findings\r\n- `a.py:3` unbounded read\r\n- `b.py:9` no bad-input test\r\n\r\n"
    "---\r\n**Type**: Verdict\r\n* **Status:** _needs attention_\r\n"
    "* Files_Changed: none\r\n* FINDINGS_COUNT: **2**\r\n* Summary: two findings in a.py, b.py\r\n"
)


def transcript_lines(outputs: list[int], final_text: str = "") -> list[str]:
    """Subagent transcript lines: each response written as two content-block lines, the last
    response's text block carrying the agent's final message (as the host writes it)."""
    lines = []
    for number, out in enumerate(outputs):
        use = {"input_tokens": 100, "output_tokens": out, "cache_read_input_tokens": 1000,
               "cache_creation_input_tokens": 0}
        last = number == len(outputs) - 1
        for block in ("tool_use", "text"):
            content = {"type": block}
            if block == "text" and last:
                content["text"] = final_text
            lines.append(json.dumps({
                "type": "assistant", "isSidechain": True, "requestId": f"req_{number}",
                "message": {"id": f"msg_{number}", "model": "claude-sonnet-4-5",
                            "content": [content], "usage": use}}, ensure_ascii=False))
    return lines


def transcript(path: Path, outputs: list[int], final_text: str = "") -> Path:
    path.write_text("\n".join(transcript_lines(outputs, final_text)) + "\n")
    return path


def payload(project: Path, agent: str, message: object, **extra: object) -> dict:
    return {"session_id": "sess-1", "transcript_path": str(project / "main.jsonl"),
            "cwd": str(project), "hook_event_name": "SubagentStop", "agent_id": "a1",
            "agent_type": agent, "last_assistant_message": message, "stop_hook_active": False,
            **extra}


def verdict_files(project: Path) -> list[str]:
    folder = project / ".clavain" / "verdicts"
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def load(project: Path, name: str) -> dict:
    return json.loads((project / ".clavain" / "verdicts" / name).read_text())


def assert_valid_everywhere(verdict: dict) -> None:
    jsonschema.validate(verdict, json.loads(SCHEMA_PATH.read_text()))
    assert Verdict.model_validate(verdict).model_dump() == verdict


def test_clean_header_with_measured_tokens(run_hook, tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()  # a git work tree: the first verdict git-ignores .clavain/
    agent_transcript = transcript(tmp_path / "agent-a1.jsonl", [30, 50], CLEAN_MESSAGE)
    result = run_hook("SubagentStop", payload(
        tmp_path, "clavain:fd-quality", CLEAN_MESSAGE,
        agent_transcript_path=str(agent_transcript)))
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert verdict_files(tmp_path) == ["clavain-fd-quality.json", "clavain-fd-quality.md"]
    verdict = load(tmp_path, "clavain-fd-quality.json")
    assert_valid_everywhere(verdict)
    assert verdict | {"timestamp": "T"} == {
        "type": "verdict", "status": "CLEAN", "model": "sonnet",
        "tokens_spent": 2 * 1100 + 30 + 50, "tokens_source": "measured", "files_changed": [],
        "findings_count": 0, "summary": "nothing to change",
        "detail_path": ".clavain/verdicts/clavain-fd-quality.md", "agent": "clavain:fd-quality",
        "session_id": "sess-1", "timestamp": "T"}
    assert (tmp_path / verdict["detail_path"]).read_text() == CLEAN_MESSAGE
    assert "/.clavain/verdicts/" in (tmp_path / ".gitignore").read_text()


def test_messy_header_and_model_from_the_transcript(run_hook, tmp_path: Path) -> None:
    agent_transcript = transcript(tmp_path / "agent-a1.jsonl", [10], MESSY_MESSAGE)
    run_hook("SubagentStop", payload(tmp_path, "clavain:fd-safety", MESSY_MESSAGE,
                                     agent_transcript_path=str(agent_transcript)))
    verdict = load(tmp_path, "clavain-fd-safety.json")
    assert_valid_everywhere(verdict)
    assert (verdict["status"], verdict["findings_count"], verdict["summary"]) == (
        "NEEDS_ATTENTION", 2, "two findings in a.py, b.py")
    assert (verdict["model"], verdict["tokens_spent"]) == ("claude-sonnet-4-5", 1110)


def test_without_a_transcript_the_reported_tokens_stay(run_hook, tmp_path: Path) -> None:
    run_hook("SubagentStop", payload(tmp_path, "clavain:fd-quality", CLEAN_MESSAGE,
                                     agent_transcript_path=str(tmp_path / "missing.jsonl")))
    verdict = load(tmp_path, "clavain-fd-quality.json")
    assert (verdict["tokens_spent"], verdict["tokens_source"]) == (99, "reported")


@pytest.mark.parametrize(("message", "summary"), [
    ("I reviewed it and it looks fine.", "no verdict header"),
    ("", "no verdict header"),
    (None, "no verdict header"),
    ("TYPE: verdict\nSTATUS: LGTM\nSUMMARY: fine",
     "bad verdict header: STATUS 'LGTM' is not a verdict STATUS "
     "(CLEAN | NEEDS_ATTENTION | BLOCKED | ERROR)"),
])
def test_contract_agent_without_a_header_gets_an_error_verdict(run_hook, tmp_path: Path,
                                                               message, summary) -> None:
    result = run_hook("SubagentStop", payload(tmp_path, "clavain:executor", message))
    assert (result.returncode, result.stdout) == (0, "")
    verdict = load(tmp_path, "clavain-executor.json")
    assert_valid_everywhere(verdict)
    assert (verdict["type"], verdict["status"], verdict["summary"]) == ("verdict", "ERROR",
                                                                        summary)
    detail = (tmp_path / verdict["detail_path"]).read_text()
    assert detail.strip() == ((message or "").strip() or "(the agent sent no final message)")


@pytest.mark.parametrize(("agent_type", "name"), [
    ("clavain:review:fd-quality", "clavain-fd-quality"),  # how 2.1.330 names agents/review/*
    ("clavain:fd-quality", "clavain-fd-quality"),
])
def test_namespaced_and_plain_agent_types_give_one_name(run_hook, tmp_path: Path, agent_type,
                                                        name) -> None:
    run_hook("SubagentStop", payload(tmp_path, agent_type, CLEAN_MESSAGE))
    assert verdict_files(tmp_path) == [f"{name}.json", f"{name}.md"]
    assert load(tmp_path, f"{name}.json")["agent"] == "clavain:fd-quality"


def test_namespaced_contract_agent_without_a_header(run_hook, tmp_path: Path) -> None:
    run_hook("SubagentStop", payload(tmp_path, "clavain:workflow:executor", "done, I think"))
    assert load(tmp_path, "clavain-executor.json")["summary"] == "no verdict header"


@pytest.mark.parametrize("agent", ["general-purpose", "Explore", "other-plugin:fd-quality",
                                   "clavainx:fd-quality", "clavain:a:b:fd-quality",
                                   "clavain:../fd-quality", 42, None])
def test_other_agents_are_ignored(run_hook, tmp_path: Path, agent) -> None:
    result = run_hook("SubagentStop", payload(tmp_path, agent, CLEAN_MESSAGE))
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert not (tmp_path / ".clavain").exists()


def test_plugin_agent_without_a_contract(run_hook, tmp_path: Path) -> None:
    plugin = tmp_path / "plugin"
    (plugin / "agents" / "review").mkdir(parents=True)
    (plugin / "agents" / "review" / "helper.md").write_text("---\nname: helper\n---\nHelp.\n")
    env = {"CLAUDE_PLUGIN_ROOT": str(plugin)}
    project = tmp_path / "project"
    project.mkdir()
    run_hook("SubagentStop", payload(project, "clavain:helper", "no header"), env=env,
             cwd=project)
    assert verdict_files(project) == []  # owes nothing, sent nothing: ignored
    run_hook("SubagentStop", payload(project, "clavain:workflow:helper", "no header"), env=env,
             cwd=project)
    assert verdict_files(project) == []  # not in that folder either
    run_hook("SubagentStop", payload(project, "clavain:helper", CLEAN_MESSAGE), env=env,
             cwd=project)
    assert verdict_files(project) == ["clavain-helper.json", "clavain-helper.md"]


def test_agent_written_detail_path_is_kept(run_hook, tmp_path: Path) -> None:
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "safety.md").write_text("full report")
    message = CLEAN_MESSAGE + "DETAIL_PATH: reports/safety.md\n"
    run_hook("SubagentStop", payload(tmp_path, "clavain:fd-quality", message))
    assert verdict_files(tmp_path) == ["clavain-fd-quality.json"]
    assert load(tmp_path, "clavain-fd-quality.json")["detail_path"] == "reports/safety.md"


@pytest.mark.parametrize("claimed", ["../outside.md", "/etc/hostname", "reports/missing.md",
                                     ".clavain/verdicts/clavain-fd-quality.md"])
def test_detail_path_outside_missing_or_stale_is_replaced(run_hook, tmp_path: Path,
                                                          claimed: str) -> None:
    project = tmp_path / "project"
    (project / ".clavain" / "verdicts").mkdir(parents=True)
    (tmp_path / "outside.md").write_text("outside")
    stale = project / ".clavain" / "verdicts" / "clavain-fd-quality.md"
    stale.write_text("an answer from an earlier run")
    message = CLEAN_MESSAGE + f"DETAIL_PATH: {claimed}\n"
    run_hook("SubagentStop", payload(project, "clavain:fd-quality", message), cwd=project)
    verdict = load(project, "clavain-fd-quality.json")
    assert verdict["detail_path"] == ".clavain/verdicts/clavain-fd-quality.md"
    assert stale.read_text() == message


def test_a_failure_is_logged_never_raised(run_hook, tmp_path: Path) -> None:
    (tmp_path / ".clavain").mkdir()
    (tmp_path / ".clavain" / "verdicts").write_text("a file where the folder should be")
    result = run_hook("SubagentStop", payload(tmp_path, "clavain:fd-quality", CLEAN_MESSAGE))
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    log = (tmp_path / ".clavain" / "logs" / "hooks.log").read_text()
    assert "SubagentStop" in log and "Error" in log


def test_hook_path_imports_no_third_party_packages(tmp_path: Path) -> None:
    agent_transcript = transcript(tmp_path / "agent-a1.jsonl", [5], MESSY_MESSAGE)
    body = json.dumps(payload(tmp_path, "clavain:fd-quality", MESSY_MESSAGE,
                              agent_transcript_path=str(agent_transcript)))
    env = dict(os.environ, PYTHONPATH=str(REPO / "lib"), CLAUDE_PROJECT_DIR=str(tmp_path))
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "clavain.hooks",
                             "SubagentStop"], input=body, capture_output=True, text=True,
                            cwd=tmp_path, env=env, timeout=60)
    assert result.returncode == 0
    imported = {line.split("|")[-1].strip().split(".")[0]
                for line in result.stderr.splitlines() if line.startswith("import time:")}
    assert "clavain" in imported  # the trace really covers the hook
    assert imported.isdisjoint({"pydantic", "pydantic_core", "jsonschema", "filelock"})
    assert verdict_files(tmp_path) == ["clavain-fd-quality.json", "clavain-fd-quality.md"]


def test_header_out_of_bounds_is_an_error_verdict(run_hook, tmp_path: Path) -> None:
    message = CLEAN_MESSAGE.replace("MODEL: sonnet", "MODEL: " + "m" * 500)
    run_hook("SubagentStop", payload(tmp_path, "clavain:fd-quality", message))
    verdict = load(tmp_path, "clavain-fd-quality.json")
    assert verdict["status"] == "ERROR"
    assert verdict["summary"].startswith("bad verdict header: model: must be text of 1-100")


def test_waits_for_the_final_message_before_measuring(tmp_path: Path) -> None:
    """The host may fire SubagentStop before flushing the last transcript line: the hook waits
    for it, so the last response's usage is counted."""
    import threading
    import time

    lines = transcript_lines([30, 50], CLEAN_MESSAGE)
    path = tmp_path / "agent-a1.jsonl"
    path.write_text("\n".join(lines[:2]) + "\n")  # only the first response so far

    def flush_the_rest() -> None:
        time.sleep(0.6)
        with open(path, "a") as handle:
            handle.write("\n".join(lines[2:]) + "\n")

    writer = threading.Thread(target=flush_the_rest)
    writer.start()
    env = dict(os.environ, CLAVAIN_PYTHON=sys.executable, CLAUDE_PROJECT_DIR=str(tmp_path))
    result = subprocess.run([str(REPO / "bin" / "clavain-hook"), "SubagentStop"],
                            input=json.dumps(payload(tmp_path, "clavain:fd-quality", CLEAN_MESSAGE,
                                                     agent_transcript_path=str(path))),
                            capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60)
    writer.join()
    assert result.returncode == 0
    verdict = load(tmp_path, "clavain-fd-quality.json")
    assert (verdict["tokens_source"], verdict["tokens_spent"]) == ("measured", 2 * 1100 + 30 + 50)


def test_detail_path_naming_the_agents_own_verdict_json_is_replaced(run_hook,
                                                                    tmp_path: Path) -> None:
    """A DETAIL_PATH naming this agent's verdict file (left from an earlier run) would point the
    sprint at the verdict itself, which this very call overwrites."""
    run_hook("SubagentStop", payload(tmp_path, "clavain:fd-quality", CLEAN_MESSAGE))
    message = CLEAN_MESSAGE + "DETAIL_PATH: .clavain/verdicts/clavain-fd-quality.json\n"
    run_hook("SubagentStop", payload(tmp_path, "clavain:fd-quality", message))
    verdict = load(tmp_path, "clavain-fd-quality.json")
    assert verdict["detail_path"] == ".clavain/verdicts/clavain-fd-quality.md"
    assert (tmp_path / verdict["detail_path"]).read_text() == message


def test_prose_status_line_after_the_header_keeps_the_verdict(run_hook, tmp_path: Path) -> None:
    message = CLEAN_MESSAGE + "\nStatus: all tests pass locally, ready to merge.\n"
    run_hook("SubagentStop", payload(tmp_path, "clavain:fd-quality", message))
    verdict = load(tmp_path, "clavain-fd-quality.json")
    assert (verdict["status"], verdict["summary"]) == ("CLEAN", "nothing to change")


def test_concurrent_first_stops_share_one_state_folder(tmp_path: Path) -> None:
    """Several agents finishing at once in a project with no `.clavain/` yet: every verdict is
    written, the .gitignore block appears once, nothing is logged as a failure."""
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("node_modules/\n")
    env = dict(os.environ, CLAVAIN_PYTHON=sys.executable, CLAUDE_PROJECT_DIR=str(tmp_path),
               CLAVAIN_BOOTSTRAP="0")
    agents = ["clavain:fd-quality", "clavain:fd-safety", "clavain:executor",
              "clavain:fd-correctness"]
    procs = [subprocess.Popen([str(REPO / "bin" / "clavain-hook"), "SubagentStop"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env)
             for _ in agents]
    for proc, agent in zip(procs, agents, strict=True):  # release them together
        proc.stdin.write(json.dumps(payload(tmp_path, agent, CLEAN_MESSAGE)))
    for proc in procs:
        proc.stdin.close()
    assert [(proc.wait(timeout=60), proc.stdout.read(), proc.stderr.read())
            for proc in procs] == [(0, "", "")] * len(agents)
    names = {verdicts_name.split(":")[1] for verdicts_name in agents}
    assert verdict_files(tmp_path) == sorted(f"clavain-{n}{s}" for n in names
                                             for s in (".json", ".md"))
    gitignore = (tmp_path / ".gitignore").read_text()
    assert gitignore.startswith("node_modules/\n") and gitignore.count("/.clavain/verdicts/") == 1
    assert not (tmp_path / ".clavain" / "logs" / "hooks.log").exists()
