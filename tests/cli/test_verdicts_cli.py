"""`clavain verdicts …` and `clavain tokens`, run as real `bin/clavain` subprocesses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clavain.verdicts import files as verdict_files

MESSY = ("Details above.\r\n\r\n```\r\n- **TYPE:** verdict\r\n- **Status**: Needs Attention\r\n"
         "- FILES_CHANGED: a.py, `b.py`\r\n- TOKENS_SPENT: ~1,200 (estimated)\r\n"
         "- FINDINGS_COUNT: 2\r\n- SUMMARY: *two issues*\r\n```\r\n")


def seed(project: Path, agent: str, status: str, tokens: int | None = None) -> None:
    kind = "implementation" if status in ("COMPLETE", "PARTIAL", "FAILED") else "verdict"
    short = verdict_files.safe_agent_name(agent)
    verdict_files.write(project / ".clavain" / "verdicts", verdict_files.build(
        {"type": kind, "status": status, "summary": f"{agent} is {status.lower()}",
         "tokens_spent": tokens, "detail_path": f".clavain/verdicts/{short}.md"},
        agent=agent, tokens_source="measured" if tokens else "reported"))


@pytest.fixture
def seeded(project: Path) -> Path:
    seed(project, "clavain:fd-quality", "CLEAN", 1200)
    seed(project, "clavain:fd-safety", "NEEDS_ATTENTION", 3400)
    seed(project, "clavain:fd-correctness", "CLEAN", 800)
    seed(project, "clavain:executor", "FAILED")
    return project


def test_summary_is_the_compact_view(run_cli, seeded: Path) -> None:
    result = run_cli("verdicts", "summary")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "Verdicts: 2 CLEAN, 1 NEEDS_ATTENTION, 1 FAILED; 5,400 tokens"
    assert "CLEAN fd-quality: clavain:fd-quality is clean" in lines
    assert ("NEEDS_ATTENTION fd-safety: clavain:fd-safety is needs_attention"
            " → .clavain/verdicts/clavain-fd-safety.md") in lines
    assert run_cli("verdicts").stdout == result.stdout  # no subcommand = summary


def test_summary_json(cli_json, seeded: Path) -> None:
    data = cli_json("verdicts", "summary")
    assert data["counts"] == "2 CLEAN, 1 NEEDS_ATTENTION, 1 FAILED"
    assert data["total_tokens"] == 5400
    assert [a["agent"] for a in data["attention"]] == ["clavain:executor", "clavain:fd-safety"]


def test_ls_table_and_json(run_cli, cli_json, seeded: Path) -> None:
    table = run_cli("verdicts", "ls").stdout.splitlines()
    assert table[0].split() == ["STATUS", "AGENT", "TOKENS", "SUMMARY"]
    assert table[1].split()[:2] == ["FAILED", "clavain:executor"]
    assert len({line.index("clavain:") for line in table[1:]}) == 1  # aligned
    rows = cli_json("verdicts", "ls")
    assert [r["status"] for r in rows] == ["FAILED", "CLEAN", "CLEAN", "NEEDS_ATTENTION"]
    assert set(rows[0]) == set(verdict_files.FIELDS)


def test_attention_lists_detail_paths(run_cli, cli_json, seeded: Path) -> None:
    out = run_cli("verdicts", "attention").stdout
    assert ".clavain/verdicts/clavain-fd-safety.md" in out and "fd-quality" not in out
    assert [r["detail_path"] for r in cli_json("verdicts", "attention")] == [
        ".clavain/verdicts/clavain-executor.md", ".clavain/verdicts/clavain-fd-safety.md"]


def test_show_by_full_or_short_name(run_cli, cli_json, seeded: Path) -> None:
    assert cli_json("verdicts", "show", "clavain:fd-safety")["status"] == "NEEDS_ATTENTION"
    out = run_cli("verdicts", "show", "fd-safety").stdout
    assert "STATUS" in out and "NEEDS_ATTENTION" in out


def test_show_missing_or_invalid(run_cli, project: Path) -> None:
    missing = run_cli("verdicts", "show", "nobody", "--json")
    assert missing.returncode == 2
    assert "no verdict for 'nobody'" in json.loads(missing.stdout)["error"]
    folder = project / ".clavain" / "verdicts"
    folder.mkdir(parents=True)
    (folder / "broken.json").write_text('{"type": "verdict"}')
    broken = run_cli("verdicts", "show", "broken")
    assert broken.returncode == 2
    assert "clavain: error: invalid verdict file broken.json: status: required" in broken.stderr


def test_clean(run_cli, cli_json, seeded: Path) -> None:
    assert cli_json("verdicts", "clean") == {"removed": 4}
    assert run_cli("verdicts", "ls").stdout == "no verdicts yet\n"
    assert run_cli("verdicts", "summary").stdout == "Verdicts: none yet.\n"


def test_parse_file_and_stdin(run_cli, cli_json, project: Path) -> None:
    (project / "answer.md").write_text(MESSY)
    parsed = cli_json("verdicts", "parse", "answer.md")
    assert parsed == {"type": "verdict", "status": "NEEDS_ATTENTION", "model": None,
                      "tokens_spent": 1200, "files_changed": ["a.py", "b.py"],
                      "findings_count": 2, "summary": "two issues", "detail_path": None,
                      "tokens_source": "reported"}
    assert cli_json("verdicts", "parse", "-", input=MESSY) == parsed
    text = run_cli("verdicts", "parse", "answer.md").stdout
    assert "STATUS          NEEDS_ATTENTION" in text


@pytest.mark.parametrize(("stdin", "error"), [
    ("looks good to me", "bad verdict header: no verdict header"),
    ("TYPE: verdict\nSTATUS: GREAT\nSUMMARY: x", "STATUS 'GREAT' is not a verdict STATUS"),
    ("TYPE: verdict\nSTATUS: CLEAN", "missing SUMMARY:"),
])
def test_parse_bad_header_exits_2_with_an_error(run_cli, stdin: str, error: str) -> None:
    result = run_cli("verdicts", "parse", "-", "--json", input=stdin)
    assert result.returncode == 2
    assert error in json.loads(result.stdout)["error"]


def test_parse_missing_file(run_cli) -> None:
    result = run_cli("verdicts", "parse", "nope.md")
    assert result.returncode == 2
    assert "cannot read nope.md" in result.stderr


def _assistant(message_id: str, out: int) -> str:
    return json.dumps({"type": "assistant", "requestId": "r-" + message_id, "message": {
        "id": message_id, "model": "claude-sonnet-4-5",
        "usage": {"input_tokens": 10, "output_tokens": out}}})


def test_tokens_for_a_session_with_subagents(run_cli, cli_json, project: Path) -> None:
    main = project / "s1.jsonl"
    main.write_text("\n".join([_assistant("m1", 5), _assistant("m1", 5)]) + "\n")
    sub = project / "s1" / "subagents" / "agent-x.jsonl"
    sub.parent.mkdir(parents=True)
    sub.write_text(_assistant("m2", 20) + "\n")
    assert cli_json("tokens", "--transcript", str(main))["total"] == 15
    data = cli_json("tokens", "--transcript", str(main), "--with-subagents")
    assert (data["total"], data["messages"]) == (45, 2)
    assert [Path(f["file"]).name for f in data["files"]] == ["s1.jsonl", "agent-x.jsonl"]
    table = run_cli("tokens", "--transcript", str(main), "--with-subagents").stdout
    assert table.splitlines()[0].split() == ["FILE", "MESSAGES", "INPUT", "OUTPUT",
                                             "CACHE_WRITE", "CACHE_READ", "TOTAL"]
    assert "TOTAL (deduplicated)" in table


def test_tokens_missing_transcript(run_cli, project: Path) -> None:
    result = run_cli("tokens", "--transcript", str(project / "none.jsonl"), "--json")
    assert result.returncode == 2
    assert "not found" in json.loads(result.stdout)["error"]


def test_init_creates_and_ignores_the_verdicts_folder(run_cli, project: Path) -> None:
    assert run_cli("init").returncode == 0
    assert (project / ".clavain" / "verdicts").is_dir()
    assert "/.clavain/verdicts/" in (project / ".gitignore").read_text().splitlines()


@pytest.mark.parametrize("args", [("verdicts", "--json", "ls"), ("verdicts", "--json", "summary"),
                                  ("verdicts", "--json", "attention")])
def test_json_before_the_subcommand_is_honoured(run_cli, seeded: Path, args) -> None:
    result = run_cli(*args)
    assert result.returncode == 0, result.stderr
    json.loads(result.stdout)  # exactly one JSON value, not a table


def test_json_before_the_subcommand_also_formats_errors(run_cli, project: Path) -> None:
    result = run_cli("verdicts", "--json", "show", "nobody")
    assert (result.returncode, result.stderr) == (2, "")
    assert "no verdict for 'nobody'" in json.loads(result.stdout)["error"]


@pytest.mark.parametrize("agent", ["", "::", "..", "///"])
def test_show_an_unusable_agent_name(run_cli, project: Path, agent: str) -> None:
    result = run_cli("verdicts", "show", agent)
    assert result.returncode == 2 and result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("clavain: error: agent name") and "invalid verdict file" not in line


def test_clean_refuses_a_symlinked_verdicts_folder(run_cli, project: Path) -> None:
    (project / ".clavain").mkdir()
    (project / ".clavain" / "verdicts").symlink_to("..", target_is_directory=True)
    (project / "README.md").write_text("readme")
    result = run_cli("verdicts", "clean")
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert "symlink" in line
    assert (project / "README.md").exists()


def test_ls_with_a_broken_file_with_a_long_name(run_cli, cli_json, project: Path) -> None:
    folder = project / ".clavain" / "verdicts"
    folder.mkdir(parents=True)
    (folder / ("x" * 240 + ".json")).write_text("junk")
    [row] = cli_json("verdicts", "ls")
    assert row["status"] == "ERROR"
    assert run_cli("verdicts", "summary").returncode == 0
