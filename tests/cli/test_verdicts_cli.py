"""`clavain verdicts …` and `clavain tokens`, run as real `bin/clavain` subprocesses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clavain.verdicts import files as verdict_files

MESSY = ("Details above.\r\n\r\n```\r\n- **TYPE:** verdict\r\n- **Status**: Needs Attention\r\n"
         "- FILES_CHANGED: a.py, `b.py`\r\n- TOKENS_SPENT: ~1,200 (estimated)\r\n"
         "- FINDINGS_COUNT: 2\r\n- SUMMARY: *two issues*\r\n```\r\n")


def seed(project: Path, agent: str, status: str, tokens: int | None = None, *,
         dispatch: str = "d1", at: str = "2026-01-31T12:00:00.000Z") -> None:
    kind = "implementation" if status in ("COMPLETE", "PARTIAL", "FAILED") else "verdict"
    short = verdict_files.safe_agent_name(agent)
    verdict_files.write(project / ".clavain" / "verdicts", verdict_files.build(
        {"type": kind, "status": status, "summary": f"{agent} is {status.lower()}",
         "tokens_spent": tokens, "detail_path": f".clavain/verdicts/{short}--{dispatch}.md"},
        agent=agent, agent_id=dispatch, tokens_source="measured" if tokens else "reported",
        timestamp=at), dispatch)


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
            " → .clavain/verdicts/clavain-fd-safety--d1.md") in lines
    assert run_cli("verdicts").stdout == result.stdout  # no subcommand = summary


def test_summary_json(cli_json, seeded: Path) -> None:
    data = cli_json("verdicts", "summary")
    assert data["counts"] == {"CLEAN": 2, "NEEDS_ATTENTION": 1, "FAILED": 1}
    assert data["total_tokens"] == 5400
    assert [a["agent"] for a in data["attention"]] == ["clavain:executor", "clavain:fd-safety"]
    assert (data["agents"], data["dispatches"], data["older_attention"]) == (4, 4, 0)


def test_ls_table_and_json(run_cli, cli_json, seeded: Path) -> None:
    table = run_cli("verdicts", "ls").stdout.splitlines()
    assert table[0].split() == ["STATUS", "AGENT", "DISPATCH", "TOKENS", "SUMMARY"]
    assert table[1].split()[:3] == ["FAILED", "clavain:executor", "d1"]
    assert len({line.index("clavain:") for line in table[1:]}) == 1  # aligned
    rows = cli_json("verdicts", "ls")
    assert [r["status"] for r in rows] == ["FAILED", "CLEAN", "CLEAN", "NEEDS_ATTENTION"]
    assert set(rows[0]) == {*verdict_files.FIELDS, "dispatch"}


def test_attention_lists_detail_paths(run_cli, cli_json, seeded: Path) -> None:
    out = run_cli("verdicts", "attention").stdout
    assert ".clavain/verdicts/clavain-fd-safety--d1.md" in out and "fd-quality" not in out
    data = cli_json("verdicts", "attention")
    assert [r["detail_path"] for r in data["attention"]] == [
        ".clavain/verdicts/clavain-executor--d1.md", ".clavain/verdicts/clavain-fd-safety--d1.md"]
    assert data["older_attention"] == 0


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
    (folder / "broken--d1.json").write_text('{"type": "verdict"}')
    broken = run_cli("verdicts", "show", "broken")
    assert broken.returncode == 2
    assert ("clavain: error: invalid verdict file broken--d1.json: status: required"
            in broken.stderr)


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
    assert "/.clavain/verdicts/" in \
        (project / ".git" / "info" / "exclude").read_text().splitlines()
    assert not (project / ".gitignore").exists()


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


@pytest.fixture
def redispatched(seeded: Path) -> Path:
    """fd-quality run three times: NEEDS_ATTENTION, ERROR, then the seeded CLEAN is not the
    latest any more: a final CLEAN (d4)."""
    seed(seeded, "clavain:fd-quality", "NEEDS_ATTENTION", 10, dispatch="d2",
         at="2026-01-31T12:00:01.000Z")
    seed(seeded, "clavain:fd-quality", "ERROR", dispatch="d3", at="2026-01-31T12:00:02.000Z")
    seed(seeded, "clavain:fd-quality", "CLEAN", 5, dispatch="d4", at="2026-01-31T12:00:03.000Z")
    return seeded


def test_several_dispatches_of_one_agent(run_cli, cli_json, redispatched: Path) -> None:
    lines = run_cli("verdicts", "summary").stdout.splitlines()
    assert lines[0] == ("Verdicts: 2 CLEAN, 1 NEEDS_ATTENTION, 1 FAILED; 7 dispatches of 4 "
                        "agents; 5,415 tokens")
    assert ("CLEAN fd-quality: clavain:fd-quality is clean (4 dispatches; "
            "1 earlier NEEDS_ATTENTION, 1 earlier ERROR)") in lines
    data = cli_json("verdicts", "summary")
    assert data["counts"] == {"CLEAN": 2, "NEEDS_ATTENTION": 1, "FAILED": 1}
    quality = next(v for v in data["verdicts"] if v["agent"] == "clavain:fd-quality")
    assert (quality["dispatch"], quality["dispatches"], quality["earlier_attention"]) == (
        "d4", 4, {"NEEDS_ATTENTION": 1, "ERROR": 1})

    table = run_cli("verdicts", "ls").stdout.splitlines()
    assert [line.split()[2] for line in table[1:] if "fd-quality" in line] == [
        "d1", "d2", "d3", "d4"]

    assert cli_json("verdicts", "show", "fd-quality")["dispatch"] == "d4"
    shown = cli_json("verdicts", "show", "clavain:fd-quality", "--dispatch", "d2")
    assert (shown["status"], shown["agent_id"], shown["dispatch"]) == ("NEEDS_ATTENTION", "d2",
                                                                       "d2")
    assert "NEEDS_ATTENTION" in run_cli("verdicts", "show", "fd-quality", "--dispatch", "d2").stdout
    missing = run_cli("verdicts", "show", "fd-quality", "--dispatch", "d9")
    assert missing.returncode == 2 and "no verdict for 'fd-quality' dispatch 'd9'" in missing.stderr

    attention = run_cli("verdicts", "attention").stdout
    assert "fd-quality" not in attention.splitlines()[1]
    assert "(+2 earlier attention verdicts of agents dispatched again since" in attention
    assert cli_json("verdicts", "attention")["older_attention"] == 2


def test_attention_with_only_older_findings(run_cli, project: Path) -> None:
    seed(project, "clavain:fd-quality", "NEEDS_ATTENTION", dispatch="d1")
    seed(project, "clavain:fd-quality", "CLEAN", dispatch="d2", at="2026-01-31T12:00:09.000Z")
    assert run_cli("verdicts", "attention").stdout.splitlines() == [
        "nothing needs attention",
        "(+1 earlier attention verdict of agents dispatched again since; `clavain verdicts ls` "
        "lists every dispatch)"]


def test_old_single_pair_files_are_still_read(run_cli, cli_json, project: Path) -> None:
    folder = project / ".clavain" / "verdicts"
    folder.mkdir(parents=True)
    (folder / "clavain-fd-quality.json").write_text(json.dumps(verdict_files.build(
        {"type": "verdict", "status": "NEEDS_ATTENTION", "summary": "old"},
        agent="clavain:fd-quality", timestamp="2026-01-31T12:00:00Z")))
    assert cli_json("verdicts", "show", "fd-quality")["dispatch"] is None
    [row] = cli_json("verdicts", "ls")
    assert (row["status"], row["dispatch"]) == ("NEEDS_ATTENTION", None)
    assert "NEEDS_ATTENTION fd-quality: old" in run_cli("verdicts").stdout


def test_show_an_unusable_dispatch_id(run_cli, seeded: Path) -> None:
    result = run_cli("verdicts", "show", "fd-quality", "--dispatch", "::")
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert line.startswith("clavain: error: dispatch id")
