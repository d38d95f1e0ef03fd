"""The verdicts library: safe names, atomic files, the sprint-facing summary."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clavain.verdicts import files as verdict_files
from clavain.verdicts.parser import STATUSES_BY_TYPE, SUMMARY_MAX_CHARS


def make(agent: str = "clavain:fd-quality", status: str = "CLEAN", **extra: object) -> dict:
    kind = "implementation" if status in STATUSES_BY_TYPE["implementation"] else "verdict"
    fields = {"type": kind, "status": status, "summary": f"{agent} says {status}", **extra}
    return verdict_files.build(fields, agent=agent, session_id="s1",
                               timestamp="2026-01-31T12:00:00Z")


def estimate_tokens(text: str) -> int:
    """A conservative estimate (3.5 characters per token)."""
    return math.ceil(len(text) / 3.5)


# --- names ----------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("agent", "name"),
    [
        ("clavain:fd-quality", "clavain-fd-quality"),
        ("../../etc/passwd", "etc-passwd"),
        ("/abs/path", "abs-path"),
        ("..", None),
        ("a/../../b", "a-.-.-b"),
        ("C:\\win\\x", "C-win-x"),
        ("naïve agent", "na-ve-agent"),
        ("", None),
        ("::", None),
        ("a\x00b", None),
    ],
)
def test_safe_agent_name(agent: str, name: str | None) -> None:
    if name is None:
        with pytest.raises(ValueError):
            verdict_files.safe_agent_name(agent)
    else:
        assert verdict_files.safe_agent_name(agent) == name


def test_over_long_names_are_cut_and_kept_distinct() -> None:
    first = verdict_files.safe_agent_name("a" * 500)
    second = verdict_files.safe_agent_name("a" * 499 + "b")
    assert len(first) == len(second) == verdict_files.MAX_NAME_CHARS
    assert first != second


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(agent=st.text(min_size=1, max_size=300))
def test_no_name_escapes_the_folder(tmp_path: Path, agent: str) -> None:
    folder = tmp_path / "verdicts"
    try:
        path = verdict_files.verdict_path(folder, agent)
    except ValueError:
        return
    assert path.parent == folder
    assert path.resolve().parent == folder.resolve()
    assert not path.name.startswith(".")
    assert len(path.name) <= verdict_files.MAX_NAME_CHARS + len(".json")


def test_writing_a_traversal_name_stays_inside(tmp_path: Path) -> None:
    folder = tmp_path / "project" / ".clavain" / "verdicts"
    path = verdict_files.write(folder, make(agent="../../../outside"))
    assert path == folder / "outside.json"
    assert sorted(p.name for p in tmp_path.rglob("*.json")) == ["outside.json"]


# --- write / read -----------------------------------------------------------------------------

def _verdict_strategy() -> st.SearchStrategy[dict]:
    text = st.text(min_size=1, max_size=40).filter(lambda s: "\n" not in s and "\r" not in s)
    kind_status = st.sampled_from([(k, s) for k, ss in STATUSES_BY_TYPE.items() for s in ss])
    return st.builds(
        lambda ks, summary, agent, model, tokens, source, files, findings, detail, session: {
            "type": ks[0], "status": ks[1], "model": model, "tokens_spent": tokens,
            "tokens_source": source, "files_changed": files, "findings_count": findings,
            "summary": summary, "detail_path": detail, "agent": agent, "session_id": session,
            "timestamp": "2026-01-31T12:00:00.123+02:00"},
        kind_status, text, text.filter(lambda a: _usable(a)), st.none() | text,
        st.none() | st.integers(0, 10**12), st.sampled_from(verdict_files.TOKENS_SOURCES),
        st.lists(text, max_size=5), st.integers(0, 10**6), st.none() | text, st.none() | text,
    )


def _usable(agent: str) -> bool:
    try:
        verdict_files.safe_agent_name(agent)
    except ValueError:
        return False
    return True


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(verdict=_verdict_strategy())
def test_write_then_read_round_trips(tmp_path: Path, verdict: dict) -> None:
    folder = tmp_path / "verdicts"
    verdict_files.write(folder, verdict)
    assert verdict_files.read(folder, verdict["agent"]) == verdict
    verdict_files.clean(folder)


def test_write_rejects_an_invalid_verdict_and_leaves_nothing(tmp_path: Path) -> None:
    bad = make() | {"status": "COMPLETE"}
    with pytest.raises(ValueError, match="status: must be one of CLEAN"):
        verdict_files.write(tmp_path, bad)
    assert list(tmp_path.iterdir()) == []


def test_build_refuses_fields_that_do_not_validate() -> None:
    with pytest.raises(ValueError, match="findings_count"):
        verdict_files.build({"type": "verdict", "status": "CLEAN", "summary": "x",
                        "findings_count": -1}, agent="a")


def test_read_finds_the_short_name_and_reports_missing(tmp_path: Path) -> None:
    verdict_files.write(tmp_path, make())
    assert verdict_files.read(tmp_path, "fd-quality")["agent"] == "clavain:fd-quality"
    with pytest.raises(LookupError, match="no verdict for 'fd-safety'"):
        verdict_files.read(tmp_path, "fd-safety")


def test_read_reports_an_invalid_file(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text(json.dumps({"type": "verdict", "status": "MEH"}))
    with pytest.raises(ValueError) as caught:
        verdict_files.read(tmp_path, "x")
    assert "status: must be one of" in str(caught.value)
    assert "summary: required" in str(caught.value)


def test_clean_removes_verdicts_and_details_only(tmp_path: Path) -> None:
    verdict_files.write(tmp_path, make())
    verdict_files.write_detail(tmp_path, "clavain:fd-quality", "full answer")
    (tmp_path / "keep.txt").write_text("x")
    assert verdict_files.clean(tmp_path) == 2
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]
    assert verdict_files.clean(tmp_path / "missing") == 0


# --- reading them all ---------------------------------------------------------------------------

@pytest.fixture
def folder(tmp_path: Path) -> Path:
    for agent, status, tokens in [("clavain:fd-quality", "CLEAN", 1000),
                                  ("clavain:fd-safety", "NEEDS_ATTENTION", 2500),
                                  ("clavain:executor", "PARTIAL", None),
                                  ("clavain:fd-correctness", "CLEAN", 500)]:
        verdict_files.write(tmp_path, make(agent, status, tokens_spent=tokens,
                                      detail_path=f".clavain/verdicts/{agent[8:]}.md"))
    return tmp_path


def test_parse_all_counts_and_attention(folder: Path) -> None:
    found = verdict_files.parse_all(folder)
    assert [v["agent"] for v in found] == ["clavain:executor", "clavain:fd-correctness",
                                           "clavain:fd-quality", "clavain:fd-safety"]
    assert verdict_files.count_by_status(found) == "2 CLEAN, 1 NEEDS_ATTENTION, 1 PARTIAL"
    assert verdict_files.total_tokens(found) == 4000
    assert [(a["agent"], a["detail_path"]) for a in verdict_files.get_attention(found)] == [
        ("clavain:executor", ".clavain/verdicts/executor.md"),
        ("clavain:fd-safety", ".clavain/verdicts/fd-safety.md")]
    assert verdict_files.summary_rows(found)[0] == {
        "status": "PARTIAL", "agent": "clavain:executor", "tokens": None,
        "summary": "clavain:executor says PARTIAL"}


def test_a_broken_file_is_an_error_row_not_skipped(folder: Path) -> None:
    (folder / "junk.json").write_text("{not json")
    found = verdict_files.parse_all(folder)
    junk = next(v for v in found if v["agent"] == "junk")
    assert junk["status"] == "ERROR"
    assert junk["summary"].startswith("unreadable verdict file: junk.json")
    assert junk["detail_path"] == str(folder / "junk.json")
    assert verdict_files.count_by_status(found) == "2 CLEAN, 1 NEEDS_ATTENTION, 1 ERROR, 1 PARTIAL"


def test_empty_folder() -> None:
    assert verdict_files.parse_all(Path("/nonexistent/verdicts")) == []
    assert verdict_files.count_by_status([]) == "no verdicts"
    assert verdict_files.render_summary([]) == "Verdicts: none yet."


# --- compact rendering --------------------------------------------------------------------------

def test_summary_lists_detail_paths_only_for_attention(folder: Path) -> None:
    text = verdict_files.render_summary(verdict_files.parse_all(folder))
    assert text.splitlines() == [
        "Verdicts: 2 CLEAN, 1 NEEDS_ATTENTION, 1 PARTIAL; 4,000 tokens",
        "PARTIAL executor: clavain:executor says PARTIAL → .clavain/verdicts/executor.md",
        "NEEDS_ATTENTION fd-safety: clavain:fd-safety says NEEDS_ATTENTION"
        " → .clavain/verdicts/fd-safety.md",
        "CLEAN fd-correctness: clavain:fd-correctness says CLEAN",
        "CLEAN fd-quality: clavain:fd-quality says CLEAN",
    ]


LONGEST_AGENTS = ["fd-user-product", "fd-architecture", "fd-correctness", "fd-performance",
                  "bug-reproduction-validator", "pr-comment-resolver", "plan-reviewer",
                  "fd-quality", "fd-safety", "executor"]


def _ten(statuses: list[str]) -> list[dict]:
    return [make(f"clavain:{agent}", status, tokens_spent=123_456,
                 summary="x" * SUMMARY_MAX_CHARS,  # worst case: every summary at the cap
                 detail_path=f".clavain/verdicts/clavain-{agent}.md")
            for agent, status in zip(LONGEST_AGENTS, statuses, strict=True)]


def test_a_clean_line_stays_under_50_tokens() -> None:
    lines = verdict_files.render_summary(_ten(["CLEAN"] * 10)).splitlines()[1:]
    assert max(estimate_tokens(line) for line in lines) <= 50


@pytest.mark.parametrize("attention", [0, 2])
def test_ten_verdicts_stay_under_300_tokens(attention: int) -> None:
    statuses = ["NEEDS_ATTENTION"] * attention + ["CLEAN"] * (10 - attention)
    assert estimate_tokens(verdict_files.render_summary(_ten(statuses))) <= 300


# --- review: hostile folders and file names ------------------------------------------------------

def test_clean_refuses_a_verdicts_folder_that_is_a_symlink(tmp_path: Path) -> None:
    """A committed `.clavain/verdicts -> ..` would make `clean` delete the project's README.md,
    package.json, …: the folder must be a real folder."""
    project = tmp_path / "project"
    (project / ".clavain").mkdir(parents=True)
    (project / "README.md").write_text("readme")
    (project / "package.json").write_text("{}")
    (project / ".clavain" / "verdicts").symlink_to("..", target_is_directory=True)
    with pytest.raises(ValueError, match="symlink"):
        verdict_files.clean(project / ".clavain" / "verdicts")
    assert sorted(p.name for p in project.iterdir()) == [".clavain", "README.md", "package.json"]


def test_clean_unlinks_symlinked_files_without_touching_their_targets(tmp_path: Path) -> None:
    outside = tmp_path / "outside.md"
    outside.write_text("keep me")
    folder = tmp_path / "verdicts"
    folder.mkdir()
    (folder / "clavain-x.md").symlink_to(outside)
    assert verdict_files.clean(folder) == 1
    assert outside.read_text() == "keep me" and list(folder.iterdir()) == []


def test_write_replaces_a_symlink_instead_of_writing_through_it(tmp_path: Path) -> None:
    outside = tmp_path / "outside.json"
    outside.write_text("keep me")
    folder = tmp_path / "verdicts"
    folder.mkdir()
    (folder / "clavain-fd-quality.json").symlink_to(outside)
    (folder / "clavain-fd-quality.md").symlink_to(outside)
    verdict_files.write(folder, make())
    verdict_files.write_detail(folder, "clavain:fd-quality", "detail")
    assert outside.read_text() == "keep me"
    assert not (folder / "clavain-fd-quality.json").is_symlink()
    assert verdict_files.read(folder, "fd-quality")["status"] == "CLEAN"


def test_a_broken_file_with_a_long_name_is_still_an_error_row(tmp_path: Path) -> None:
    name = "a" * 240 + ".json"  # a legal file name, longer than an agent name may be
    (tmp_path / name).write_text("{not json")
    [row] = verdict_files.parse_all(tmp_path)
    assert row["status"] == "ERROR" and row["agent"].startswith("aaaa")
    assert verdict_files.validate({k: v for k, v in row.items() if k != "detail_path"}) == []
