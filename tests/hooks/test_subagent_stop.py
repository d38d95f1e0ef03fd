"""SubagentStop, run as the host runs it: `bin/clavain-hook SubagentStop` with JSON on stdin."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
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
    assert verdict_files(tmp_path) == ["clavain-fd-quality--a1.json", "clavain-fd-quality--a1.md"]
    verdict = load(tmp_path, "clavain-fd-quality--a1.json")
    assert_valid_everywhere(verdict)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", verdict["timestamp"])
    assert verdict | {"timestamp": "T"} == {
        "type": "verdict", "status": "CLEAN", "model": "sonnet",
        "tokens_spent": 2 * 1100 + 30 + 50, "tokens_source": "measured", "files_changed": [],
        "findings_count": 0, "summary": "nothing to change",
        "detail_path": ".clavain/verdicts/clavain-fd-quality--a1.md",
        "agent": "clavain:fd-quality", "agent_id": "a1", "session_id": "sess-1",
        "sprint_id": None, "timestamp": "T"}
    assert (tmp_path / verdict["detail_path"]).read_text() == CLEAN_MESSAGE
    assert "/.clavain/verdicts/" in (tmp_path / ".gitignore").read_text()


def test_messy_header_and_model_from_the_transcript(run_hook, tmp_path: Path) -> None:
    agent_transcript = transcript(tmp_path / "agent-a1.jsonl", [10], MESSY_MESSAGE)
    run_hook("SubagentStop", payload(tmp_path, "clavain:fd-safety", MESSY_MESSAGE,
                                     agent_transcript_path=str(agent_transcript)))
    verdict = load(tmp_path, "clavain-fd-safety--a1.json")
    assert_valid_everywhere(verdict)
    assert (verdict["status"], verdict["findings_count"], verdict["summary"]) == (
        "NEEDS_ATTENTION", 2, "two findings in a.py, b.py")
    assert (verdict["model"], verdict["tokens_spent"]) == ("claude-sonnet-4-5", 1110)


def test_without_a_transcript_the_reported_tokens_stay(run_hook, tmp_path: Path) -> None:
    run_hook("SubagentStop", payload(tmp_path, "clavain:fd-quality", CLEAN_MESSAGE,
                                     agent_transcript_path=str(tmp_path / "missing.jsonl")))
    verdict = load(tmp_path, "clavain-fd-quality--a1.json")
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
    verdict = load(tmp_path, "clavain-executor--a1.json")
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
    assert verdict_files(tmp_path) == [f"{name}--a1.json", f"{name}--a1.md"]
    assert load(tmp_path, f"{name}--a1.json")["agent"] == "clavain:fd-quality"


def test_namespaced_contract_agent_without_a_header(run_hook, tmp_path: Path) -> None:
    run_hook("SubagentStop", payload(tmp_path, "clavain:workflow:executor", "done, I think"))
    assert load(tmp_path, "clavain-executor--a1.json")["summary"] == "no verdict header"


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
    assert verdict_files(project) == ["clavain-helper--a1.json", "clavain-helper--a1.md"]


def test_agent_written_detail_path_is_kept(run_hook, tmp_path: Path) -> None:
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "safety.md").write_text("full report")
    message = CLEAN_MESSAGE + "DETAIL_PATH: reports/safety.md\n"
    run_hook("SubagentStop", payload(tmp_path, "clavain:fd-quality", message))
    assert verdict_files(tmp_path) == ["clavain-fd-quality--a1.json"]
    assert load(tmp_path, "clavain-fd-quality--a1.json")["detail_path"] == "reports/safety.md"


@pytest.mark.parametrize("claimed", ["../outside.md", "/etc/hostname", "reports/missing.md",
                                     ".clavain/verdicts/clavain-fd-quality--a1.md",
                                     ".clavain/verdicts/clavain-fd-quality--other.md",
                                     ".clavain/verdicts/clavain-fd-quality.md"])
def test_detail_path_outside_missing_or_in_the_verdicts_folder_is_replaced(
        run_hook, tmp_path: Path, claimed: str) -> None:
    """The verdicts folder holds other dispatches' (or stale) answers: a DETAIL_PATH there
    would put another run's answer beside this verdict."""
    project = tmp_path / "project"
    folder = project / ".clavain" / "verdicts"
    folder.mkdir(parents=True)
    (tmp_path / "outside.md").write_text("outside")
    for stale in ("clavain-fd-quality--a1.md", "clavain-fd-quality--other.md",
                  "clavain-fd-quality.md"):
        (folder / stale).write_text("an answer from another run")
    message = CLEAN_MESSAGE + f"DETAIL_PATH: {claimed}\n"
    run_hook("SubagentStop", payload(project, "clavain:fd-quality", message), cwd=project)
    verdict = load(project, "clavain-fd-quality--a1.json")
    assert verdict["detail_path"] == ".clavain/verdicts/clavain-fd-quality--a1.md"
    assert (folder / "clavain-fd-quality--a1.md").read_text() == message
    assert (folder / "clavain-fd-quality--other.md").read_text() == "an answer from another run"


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
    assert verdict_files(tmp_path) == ["clavain-fd-quality--a1.json", "clavain-fd-quality--a1.md"]


def test_header_out_of_bounds_is_an_error_verdict(run_hook, tmp_path: Path) -> None:
    message = CLEAN_MESSAGE.replace("MODEL: sonnet", "MODEL: " + "m" * 500)
    run_hook("SubagentStop", payload(tmp_path, "clavain:fd-quality", message))
    verdict = load(tmp_path, "clavain-fd-quality--a1.json")
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
    verdict = load(tmp_path, "clavain-fd-quality--a1.json")
    assert (verdict["tokens_source"], verdict["tokens_spent"]) == ("measured", 2 * 1100 + 30 + 50)


def test_detail_path_naming_the_agents_own_verdict_json_is_replaced(run_hook,
                                                                    tmp_path: Path) -> None:
    """A DETAIL_PATH naming this dispatch's verdict file (left from an earlier SubagentStop of
    the same agent_id) would point the sprint at the verdict itself, which this call replaces."""
    run_hook("SubagentStop", payload(tmp_path, "clavain:fd-quality", CLEAN_MESSAGE))
    message = CLEAN_MESSAGE + "DETAIL_PATH: .clavain/verdicts/clavain-fd-quality--a1.json\n"
    run_hook("SubagentStop", payload(tmp_path, "clavain:fd-quality", message))
    assert verdict_files(tmp_path) == ["clavain-fd-quality--a1.json", "clavain-fd-quality--a1.md"]
    verdict = load(tmp_path, "clavain-fd-quality--a1.json")
    assert verdict["detail_path"] == ".clavain/verdicts/clavain-fd-quality--a1.md"
    assert (tmp_path / verdict["detail_path"]).read_text() == message


def test_prose_status_line_after_the_header_keeps_the_verdict(run_hook, tmp_path: Path) -> None:
    message = CLEAN_MESSAGE + "\nStatus: all tests pass locally, ready to merge.\n"
    run_hook("SubagentStop", payload(tmp_path, "clavain:fd-quality", message))
    verdict = load(tmp_path, "clavain-fd-quality--a1.json")
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
    assert verdict_files(tmp_path) == sorted(f"clavain-{n}--a1{s}" for n in names
                                             for s in (".json", ".md"))
    gitignore = (tmp_path / ".gitignore").read_text()
    assert gitignore.startswith("node_modules/\n") and gitignore.count("/.clavain/verdicts/") == 1
    assert not (tmp_path / ".clavain" / "logs" / "hooks.log").exists()


# --- one pair per dispatch ----------------------------------------------------------------------

NEEDS_ATTENTION_MESSAGE = CLEAN_MESSAGE.replace("STATUS: CLEAN", "STATUS: NEEDS_ATTENTION") \
    .replace("FINDINGS_COUNT: 0", "FINDINGS_COUNT: 1").replace("nothing to change", "one bug")


def test_parallel_dispatches_of_one_agent_keep_every_verdict(run_hook, tmp_path: Path) -> None:
    """A NEEDS_ATTENTION must not vanish under a later CLEAN of the same agent."""
    run_hook("SubagentStop", payload(tmp_path, "clavain:fd-quality", NEEDS_ATTENTION_MESSAGE,
                                     agent_id="a1"))
    run_hook("SubagentStop", payload(tmp_path, "clavain:fd-quality", CLEAN_MESSAGE,
                                     agent_id="a2"))
    assert verdict_files(tmp_path) == ["clavain-fd-quality--a1.json", "clavain-fd-quality--a1.md",
                                       "clavain-fd-quality--a2.json", "clavain-fd-quality--a2.md"]
    for dispatch, status, message in (("a1", "NEEDS_ATTENTION", NEEDS_ATTENTION_MESSAGE),
                                      ("a2", "CLEAN", CLEAN_MESSAGE)):
        verdict = load(tmp_path, f"clavain-fd-quality--{dispatch}.json")
        assert (verdict["status"], verdict["agent_id"]) == (status, dispatch)
        assert verdict["detail_path"] == f".clavain/verdicts/clavain-fd-quality--{dispatch}.md"
        assert (tmp_path / verdict["detail_path"]).read_text() == message


def test_without_an_agent_id_each_dispatch_gets_a_generated_id(run_hook, tmp_path: Path) -> None:
    body = payload(tmp_path, "clavain:fd-quality", CLEAN_MESSAGE)
    del body["agent_id"]
    run_hook("SubagentStop", body)
    run_hook("SubagentStop", body)
    names = verdict_files(tmp_path)
    assert len(names) == 4
    for name in names:
        assert re.fullmatch(r"clavain-fd-quality--\d{8}T\d{9}Z-[0-9a-f]{8}\.(json|md)", name)
    for name in names[::2]:
        verdict = load(tmp_path, name)
        assert verdict["agent_id"] is None
        assert verdict["detail_path"] == f".clavain/verdicts/{name[:-5]}.md"


def test_a_failed_json_write_leaves_an_orphan_answer_never_a_mismatched_pair(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The .md goes first and the .json naming it last: a crash between them must not leave a
    verdict beside another dispatch's answer."""
    from clavain.fsutil import write_json_atomic
    from clavain.hooks import subagent_stop
    from clavain.verdicts import files as verdicts_module

    (tmp_path / ".git").mkdir()
    subagent_stop.record(payload(tmp_path, "clavain:fd-quality", NEEDS_ATTENTION_MESSAGE,
                                 agent_id="a1"))

    def crash(path: Path, value: object, *, inside: Path | None = None) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(verdicts_module, "write_json_atomic", crash)
    with pytest.raises(OSError, match="disk full"):
        subagent_stop.record(payload(tmp_path, "clavain:fd-quality", CLEAN_MESSAGE,
                                     agent_id="a2"))
    monkeypatch.setattr(verdicts_module, "write_json_atomic", write_json_atomic)
    subagent_stop.record(payload(tmp_path, "clavain:fd-quality", CLEAN_MESSAGE + "\nagain",
                                 agent_id="a3"))

    assert verdict_files(tmp_path) == [
        "clavain-fd-quality--a1.json", "clavain-fd-quality--a1.md",
        "clavain-fd-quality--a2.md",  # the orphan: its verdict was never written
        "clavain-fd-quality--a3.json", "clavain-fd-quality--a3.md"]
    for dispatch, message in (("a1", NEEDS_ATTENTION_MESSAGE), ("a3", CLEAN_MESSAGE + "\nagain")):
        verdict = load(tmp_path, f"clavain-fd-quality--{dispatch}.json")
        assert verdict["detail_path"].endswith(f"--{dispatch}.md")
        assert (tmp_path / verdict["detail_path"]).read_text().rstrip("\n") == message.rstrip("\n")


def test_a_planted_verdicts_symlink_is_not_written_through(run_hook, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    project = tmp_path / "project"
    (project / ".clavain").mkdir(parents=True)
    (project / ".clavain" / "verdicts").symlink_to(outside, target_is_directory=True)
    result = run_hook("SubagentStop", payload(project, "clavain:fd-quality", CLEAN_MESSAGE),
                      cwd=project)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert list(outside.iterdir()) == []
    [line] = (project / ".clavain" / "logs" / "hooks.log").read_text().splitlines()
    assert "UnsafePathError" in line and "symlink" in line


def test_a_failure_while_building_the_verdict_still_records_an_error_verdict(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from clavain.hooks import subagent_stop

    def broken(text: str) -> dict:
        raise RuntimeError("parser bug")

    monkeypatch.setattr(subagent_stop, "parse_header", broken)
    (tmp_path / ".git").mkdir()
    assert subagent_stop.handle(payload(tmp_path, "clavain:fd-quality", CLEAN_MESSAGE)) is None
    verdict = load(tmp_path, "clavain-fd-quality--a1.json")
    assert_valid_everywhere(verdict)
    assert (verdict["status"], verdict["summary"]) == (
        "ERROR", "verdict not built: RuntimeError: parser bug")
    [line] = (tmp_path / ".clavain" / "logs" / "hooks.log").read_text().splitlines()
    assert "building the verdict failed" in line


# --- hostile payloads ---------------------------------------------------------------------------

HUGE = "9" * 300


def _with_header(**lines: str) -> str:
    text = CLEAN_MESSAGE
    for key, value in lines.items():
        text = re.sub(rf"^{key}: .*$", f"{key}: {value}", text, flags=re.MULTILINE)
    return text


HOSTILE = [
    # (id, changes to the payload, logged?, check on the verdict)
    ("cwd-number", {"cwd": 5}, True, None),
    ("cwd-list", {"cwd": ["a"]}, True, None),
    ("cwd-5000-chars", {"cwd": "/" + "c" * 5000}, True, None),
    ("cwd-missing", {"cwd": "{tmp}/missing"}, True, None),
    ("cwd-a-file", {"cwd": "{tmp}/a-file"}, True, None),
    ("tokens-300-digits", {"last_assistant_message": _with_header(TOKENS_SPENT=HUGE)}, False,
     lambda v: v["status"] == "CLEAN" and v["tokens_spent"] is None),
    ("tokens-400-digits", {"last_assistant_message": _with_header(TOKENS_SPENT="9" * 400)},
     False, lambda v: v["status"] == "CLEAN" and v["tokens_spent"] is None),
    ("tokens-negative", {"last_assistant_message": _with_header(TOKENS_SPENT="-99")}, False,
     lambda v: v["tokens_spent"] is None),
    ("findings-300-digits", {"last_assistant_message": _with_header(FINDINGS_COUNT=HUGE)},
     False, lambda v: v["status"] == "ERROR" and "FINDINGS_COUNT" in v["summary"]),
    ("session-id-300-digit-number", {"session_id": int(HUGE)}, True,
     lambda v: v["session_id"] is None),
    ("session-id-201-chars", {"session_id": "s" * 201}, True, lambda v: v["session_id"] is None),
    ("lone-surrogate", {"last_assistant_message": CLEAN_MESSAGE + "\ud800 tail"}, False,
     lambda v: v["status"] == "CLEAN"),
    ("transcript-name-too-long", {"agent_transcript_path": "{tmp}/" + "t" * 300 + ".jsonl"},
     True, lambda v: v["tokens_source"] == "reported"),
    ("transcript-not-text", {"agent_transcript_path": ["x"]}, True, None),
    ("agent-id-number", {"agent_id": 42}, True, lambda v: v["agent_id"] is None),
    ("agent-id-object", {"agent_id": {"a": 1}}, True, lambda v: v["agent_id"] is None),
    ("agent-id-no-usable-characters", {"agent_id": "::"}, False,
     lambda v: v["agent_id"] == "::"),
    ("message-not-text", {"last_assistant_message": 42}, False,
     lambda v: v["summary"] == "no verdict header"),
]


@pytest.mark.parametrize(("changes", "logged", "check"), [case[1:] for case in HOSTILE],
                         ids=[case[0] for case in HOSTILE])
def test_hostile_payloads_never_lose_an_owed_verdict(run_hook, tmp_path: Path, changes: dict,
                                                     logged: bool, check) -> None:
    """Whatever the payload holds: exit 0, nothing printed, the owed verdict is on disk, and a
    problem is exactly one line in hooks.log (no problem, no line)."""
    project = tmp_path / "project"
    project.mkdir()
    (tmp_path / "a-file").write_text("not a folder")
    body = payload(project, "clavain:executor", CLEAN_MESSAGE)
    body.update({key: value.replace("{tmp}", str(tmp_path)) if isinstance(value, str) else value
                 for key, value in changes.items()})
    result = run_hook("SubagentStop", body, cwd=project)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    [verdict_json] = (project / ".clavain" / "verdicts").glob("clavain-executor--*.json")
    verdict = json.loads(verdict_json.read_text())
    assert_valid_everywhere(verdict)
    assert (project / verdict["detail_path"]).is_file()
    (project / verdict["detail_path"]).read_text(encoding="utf-8")  # scrubbed: valid UTF-8
    log = project / ".clavain" / "logs" / "hooks.log"
    lines = log.read_text().splitlines() if log.exists() else []
    assert len(lines) == (1 if logged else 0), lines
    assert check is None or check(verdict), verdict
    assert not (tmp_path / "missing").exists()


def test_a_detail_path_through_a_symlink_loop_is_replaced(run_hook, tmp_path: Path) -> None:
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    message = CLEAN_MESSAGE + "DETAIL_PATH: loop/report.md\n"
    result = run_hook("SubagentStop", payload(tmp_path, "clavain:fd-quality", message))
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    verdict = load(tmp_path, "clavain-fd-quality--a1.json")
    assert verdict["detail_path"] == ".clavain/verdicts/clavain-fd-quality--a1.md"


def test_the_reviewers_verdicts_are_kept_apart_per_lens(run_hook, tmp_path: Path) -> None:
    for agent_id, lens in (("a1", "safety"), ("a2", "quality")):
        path = tmp_path / f"agent-{agent_id}.jsonl"
        first = json.dumps({"type": "user", "isSidechain": True, "message": {
            "role": "user", "content": f"Lens: {lens}\nReview the change in src/."}})
        path.write_text("\n".join([first, *transcript_lines([10], CLEAN_MESSAGE)]) + "\n")
        run_hook("SubagentStop", payload(tmp_path, "clavain:reviewer", CLEAN_MESSAGE,
                                         agent_id=agent_id, agent_transcript_path=str(path)))
    assert load(tmp_path, "clavain-reviewer-safety--a1.json")["agent"] == \
        "clavain:reviewer/safety"
    assert load(tmp_path, "clavain-reviewer-quality--a2.json")["agent"] == \
        "clavain:reviewer/quality"
    # Without a lens line the reviewer is filed under its own name.
    run_hook("SubagentStop", payload(tmp_path, "clavain:reviewer", CLEAN_MESSAGE, agent_id="a3"))
    assert load(tmp_path, "clavain-reviewer--a3.json")["agent"] == "clavain:reviewer"


@pytest.mark.parametrize("prompt", [
    "Review the change in src/.\nLens: safety",  # a lens named below the first line
    "Lens: sarcasm\nReview the change.",  # not a lens the reviewer knows
    "Review skills/verification/SKILL.md",  # the reviewer read a file that names a lens
])
def test_only_a_known_lens_on_the_prompts_first_line_counts(run_hook, tmp_path: Path,
                                                            prompt: str) -> None:
    path = tmp_path / "agent-a9.jsonl"
    first = json.dumps({"type": "user", "isSidechain": True, "message": {
        "role": "user", "content": prompt}})
    tool_read = json.dumps({"type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t", "content": "Lens: quality is the default"}]}})
    path.write_text("\n".join([first, tool_read, *transcript_lines([10], CLEAN_MESSAGE)]) + "\n")
    run_hook("SubagentStop", payload(tmp_path, "clavain:reviewer", CLEAN_MESSAGE,
                                     agent_id="a9", agent_transcript_path=str(path)))
    assert load(tmp_path, "clavain-reviewer--a9.json")["agent"] == "clavain:reviewer"


def test_a_lens_in_a_text_block_after_a_reminder_counts(run_hook, tmp_path: Path) -> None:
    path = tmp_path / "agent-b1.jsonl"
    first = json.dumps({"type": "user", "message": {"role": "user", "content": [
        {"type": "text", "text": "<system-reminder>context</system-reminder>"},
        {"type": "text", "text": "**Lens: performance**\nReview src/db.py."}]}})
    path.write_text("\n".join([first, *transcript_lines([10], CLEAN_MESSAGE)]) + "\n")
    run_hook("SubagentStop", payload(tmp_path, "clavain:reviewer", CLEAN_MESSAGE,
                                     agent_id="b1", agent_transcript_path=str(path)))
    assert load(tmp_path, "clavain-reviewer-performance--b1.json")["agent"] == \
        "clavain:reviewer/performance"


def test_a_transcript_written_late_still_gives_the_lens(tmp_path: Path) -> None:
    """The host may fire SubagentStop before the subagent's transcript is on disk: the hook
    waits (bounded) for the prompt rather than filing the verdict without its lens."""
    import subprocess
    import sys
    import threading
    import time

    path = tmp_path / "agent-late.jsonl"
    first = json.dumps({"type": "user", "message": {"role": "user", "content":
                                                   "Lens: correctness\nReview src/."}})

    def write_later() -> None:
        time.sleep(0.6)
        path.write_text("\n".join([first, *transcript_lines([10], CLEAN_MESSAGE)]) + "\n")

    writer = threading.Thread(target=write_later)
    writer.start()
    env = dict(os.environ, CLAVAIN_PYTHON=sys.executable, CLAUDE_PROJECT_DIR=str(tmp_path),
               CLAVAIN_BOOTSTRAP="0")
    subprocess.run([str(REPO / "bin" / "clavain-hook"), "SubagentStop"], input=json.dumps(
        payload(tmp_path, "clavain:reviewer", CLEAN_MESSAGE, agent_id="late",
                agent_transcript_path=str(path))), text=True, cwd=tmp_path, env=env,
        check=True, timeout=60)
    writer.join()
    verdict = load(tmp_path, "clavain-reviewer-correctness--late.json")
    assert verdict["agent"] == "clavain:reviewer/correctness"
    assert verdict["tokens_source"] == "measured"


def test_without_a_transcript_the_answers_lens_line_files_it(run_hook, tmp_path: Path) -> None:
    answer = "Lens: safety\n" + CLEAN_MESSAGE
    run_hook("SubagentStop", payload(tmp_path, "clavain:reviewer", answer, agent_id="gone",
                                     agent_transcript_path=str(tmp_path / "never.jsonl")))
    assert load(tmp_path, "clavain-reviewer-safety--gone.json")["agent"] == \
        "clavain:reviewer/safety"
    log = (tmp_path / ".clavain" / "logs" / "hooks.log").read_text()
    assert "lens safety read from the reviewer's answer" in log


def test_a_fifo_in_place_of_the_transcript_does_not_hang(run_hook, tmp_path: Path) -> None:
    fifo = tmp_path / "agent-fifo.jsonl"
    os.mkfifo(fifo)
    result = run_hook("SubagentStop", payload(tmp_path, "clavain:reviewer", CLEAN_MESSAGE,
                                              agent_id="ff", agent_transcript_path=str(fifo)))
    assert result.returncode == 0
    assert load(tmp_path, "clavain-reviewer--ff.json")["status"] == "CLEAN"


def test_tokens_are_backfilled_once_the_transcript_is_readable(run_hook, tmp_path: Path) -> None:
    from clavain.verdicts.backfill import backfill

    late = tmp_path / "agent-b9.jsonl"
    answer = "Lens: quality\n" + CLEAN_MESSAGE
    run_hook("SubagentStop", payload(tmp_path, "clavain:reviewer", answer, agent_id="b9",
                                     agent_transcript_path=str(late)))
    name = "clavain-reviewer-quality--b9"
    verdicts = tmp_path / ".clavain" / "verdicts"
    assert load(tmp_path, f"{name}.json")["tokens_source"] == "reported"
    assert (verdicts / f"{name}.pending").exists()
    assert backfill(verdicts, inside=tmp_path / ".clavain") == 0  # still not there
    first = json.dumps({"type": "user", "message": {"role": "user", "content": "Lens: quality"}})
    late.write_text("\n".join([first, *transcript_lines([10, 20], answer)]) + "\n")
    assert backfill(verdicts, inside=tmp_path / ".clavain") == 1
    verdict = load(tmp_path, f"{name}.json")
    assert verdict["tokens_source"] == "measured" and verdict["tokens_spent"] > 0
    assert not (verdicts / f"{name}.pending").exists()
    assert_valid_everywhere(verdict)
    # A transcript that never appears is given up after a day, the verdict kept as it is.
    run_hook("SubagentStop", payload(tmp_path, "clavain:reviewer", answer, agent_id="c1",
                                     agent_transcript_path=str(tmp_path / "never.jsonl")))
    assert backfill(verdicts, inside=tmp_path / ".clavain", now=time.time() + 2 * 86400) == 0
    assert not list(verdicts.glob("*.pending"))
    assert load(tmp_path, "clavain-reviewer-quality--c1.json")["status"] == "CLEAN"


def test_a_late_reviewer_is_filed_under_the_sprint_it_was_asked_for(run_hook,
                                                                     tmp_path: Path) -> None:
    from clavain.paths import StatePaths
    from clavain.sprint import lifecycle
    from clavain.verdicts import dispatches

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    state = StatePaths.discover(tmp_path)
    first = lifecycle.start(state, "first piece of work", complexity="2")
    dispatches.started(state, {"agent_id": "r1", "session_id": "s1"}, first["sprint_id"],
                       "clavain:reviewer")
    lifecycle.abandon(state)
    lifecycle.start(state, "second piece of work", complexity="2")
    run_hook("SubagentStop", payload(tmp_path, "clavain:reviewer", "Lens: quality\n" +
                                     CLEAN_MESSAGE, agent_id="r1"))
    assert load(tmp_path, "clavain-reviewer-quality--r1.json")["sprint_id"] == \
        first["sprint_id"]
    assert dispatches.running(state) == []


def test_the_budget_gets_the_transcript_the_verdict_read(tmp_path: Path, monkeypatch) -> None:
    """One read of the subagent's transcript serves its verdict and its budget; a transcript
    still missing the final message is not handed on (the budget waits and reads for itself)."""
    from clavain.guards import agents
    from clavain.hooks import subagent_stop

    handed: list[object] = []
    monkeypatch.setattr(agents, "subagent_stopped", lambda p, usage=None: handed.append(usage))
    monkeypatch.setattr(subagent_stop, "TRANSCRIPT_WAIT_SECONDS", 0.2)
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(tmp_path))
    whole = transcript(tmp_path / "agent-a1.jsonl", [30, 50], CLEAN_MESSAGE)
    subagent_stop.handle(payload(tmp_path, "clavain:fd-quality", CLEAN_MESSAGE,
                                 agent_transcript_path=str(whole)))
    assert handed[0].total == 2 * 1100 + 30 + 50
    cut = tmp_path / "agent-b2.jsonl"
    cut.write_text(transcript_lines([30, 50], CLEAN_MESSAGE)[0] + "\n")
    subagent_stop.handle(payload(tmp_path, "clavain:fd-quality", CLEAN_MESSAGE, agent_id="b2",
                                 agent_transcript_path=str(cut)))
    assert handed[1] is None
