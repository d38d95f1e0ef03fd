"""What a sprint reads: the latest verdict per agent, short lines, nothing hidden."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from clavain.verdicts import files as verdict_files
from clavain.verdicts import summary
from clavain.verdicts.parser import STATUSES_BY_TYPE, SUMMARY_MAX_CHARS


def make(agent: str, status: str, *, at: str = "2026-01-31T12:00:00.000Z",
         **extra: object) -> dict:
    kind = "implementation" if status in STATUSES_BY_TYPE["implementation"] else "verdict"
    fields = {"type": kind, "status": status, "summary": f"{agent} says {status}", **extra}
    return verdict_files.build(fields, agent=agent, timestamp=at)


def estimate_tokens(text: str) -> int:
    """A conservative estimate (3.5 characters per token)."""
    return math.ceil(len(text) / 3.5)


def seed(folder: Path, agent: str, status: str, dispatch: str, *, second: int = 0,
         tokens: int | None = None) -> None:
    short = agent.removeprefix("clavain:")
    verdict_files.write(folder, make(agent, status, at=f"2026-01-31T12:00:{second:02d}.000Z",
                                     tokens_spent=tokens,
                                     detail_path=f".clavain/verdicts/{short}--{dispatch}.md"),
                        dispatch)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    for agent, status, tokens in [("clavain:fd-quality", "CLEAN", 1000),
                                  ("clavain:fd-safety", "NEEDS_ATTENTION", 2500),
                                  ("clavain:executor", "PARTIAL", None),
                                  ("clavain:fd-correctness", "CLEAN", 500)]:
        seed(tmp_path, agent, status, "d1", tokens=tokens)
    return tmp_path


def test_one_dispatch_each(folder: Path) -> None:
    found = verdict_files.parse_all(folder)
    assert summary.count_by_status(found) == {"CLEAN": 2, "NEEDS_ATTENTION": 1, "PARTIAL": 1}
    assert summary.total_tokens(found) == 4000
    assert [(a["agent"], a["detail_path"]) for a in summary.get_attention(found)] == [
        ("clavain:executor", ".clavain/verdicts/executor--d1.md"),
        ("clavain:fd-safety", ".clavain/verdicts/fd-safety--d1.md")]
    assert summary.older_attention(found) == 0
    assert summary.render_summary(found).splitlines() == [
        "Verdicts: 2 CLEAN, 1 NEEDS_ATTENTION, 1 PARTIAL; 4,000 tokens",
        "PARTIAL executor: clavain:executor says PARTIAL → .clavain/verdicts/executor--d1.md",
        "NEEDS_ATTENTION fd-safety: clavain:fd-safety says NEEDS_ATTENTION"
        " → .clavain/verdicts/fd-safety--d1.md",
        "CLEAN fd-correctness: clavain:fd-correctness says CLEAN",
        "CLEAN fd-quality: clavain:fd-quality says CLEAN",
    ]


def test_a_later_clean_never_hides_an_earlier_finding(folder: Path) -> None:
    # fd-quality: NEEDS_ATTENTION (an old single-pair file), CLEAN (d1), ERROR, then CLEAN
    (folder / "clavain-fd-quality.json").write_text(json.dumps(
        make("clavain:fd-quality", "NEEDS_ATTENTION", at="2026-01-31T11:00:00Z")))
    seed(folder, "clavain:fd-quality", "ERROR", "d2", second=2)
    seed(folder, "clavain:fd-quality", "CLEAN", "d3", second=3, tokens=7)
    found = verdict_files.parse_all(folder)
    lines = summary.render_summary(found).splitlines()
    assert lines[0] == ("Verdicts: 2 CLEAN, 1 NEEDS_ATTENTION, 1 PARTIAL; 7 dispatches of 4 "
                        "agents; 4,007 tokens")
    assert ("CLEAN fd-quality: clavain:fd-quality says CLEAN (4 dispatches; "
            "1 earlier NEEDS_ATTENTION, 1 earlier ERROR)") in lines
    assert summary.count_by_status(found) == {"CLEAN": 2, "NEEDS_ATTENTION": 1, "PARTIAL": 1}
    assert [a["agent"] for a in summary.get_attention(found)] == ["clavain:executor",
                                                                  "clavain:fd-safety"]
    assert summary.older_attention(found) == 2
    [quality] = [e for e in summary.latest_per_agent(found) if e["agent"] == "clavain:fd-quality"]
    assert (quality["dispatch"], quality["dispatches"], quality["earlier_attention"]) == (
        "d3", 4, {"NEEDS_ATTENTION": 1, "ERROR": 1})


def test_a_latest_finding_keeps_its_path_and_says_it_was_run_before(folder: Path) -> None:
    seed(folder, "clavain:fd-quality", "NEEDS_ATTENTION", "d2", second=5)
    lines = summary.render_summary(verdict_files.parse_all(folder)).splitlines()
    assert ("NEEDS_ATTENTION fd-quality: clavain:fd-quality says NEEDS_ATTENTION (2 dispatches)"
            " → .clavain/verdicts/fd-quality--d2.md") in lines


def test_summary_json_counts_are_numbers(folder: Path) -> None:
    seed(folder, "clavain:fd-safety", "CLEAN", "d2", second=9)
    data = summary.summary_json(verdict_files.parse_all(folder))
    assert data["counts"] == {"CLEAN": 3, "PARTIAL": 1}
    assert (data["agents"], data["dispatches"], data["older_attention"]) == (4, 5, 1)
    assert data["total_tokens"] == 4000
    safety = next(v for v in data["verdicts"] if v["agent"] == "clavain:fd-safety")
    assert (safety["status"], safety["dispatch"], safety["dispatches"],
            safety["earlier_attention"]) == ("CLEAN", "d2", 2, {"NEEDS_ATTENTION": 1})
    assert [a["agent"] for a in data["attention"]] == ["clavain:executor"]
    json.dumps(data)


def test_a_broken_file_stays_visible(folder: Path) -> None:
    (folder / "clavain-fd-quality--d9.json").write_text("{not json")
    text = summary.render_summary(verdict_files.parse_all(folder))
    assert "ERROR clavain-fd-quality: unreadable verdict file" in text


def test_empty() -> None:
    assert summary.render_summary([]) == "Verdicts: none yet."
    assert summary.count_by_status([]) == {}
    assert summary.summary_json([])["counts"] == {}


LONGEST_AGENTS = ["fd-user-product", "fd-architecture", "fd-correctness", "fd-performance",
                  "bug-reproduction-validator", "pr-comment-resolver", "plan-reviewer",
                  "fd-quality", "fd-safety", "executor"]


def _ten(statuses: list[str], *, earlier: tuple[str, ...] = ()) -> list[dict]:
    """Ten agents at the worst case (every summary at the cap), each with `earlier` verdicts
    before its latest one."""
    verdicts = []
    for agent, status in zip(LONGEST_AGENTS, statuses, strict=True):
        for second, state in enumerate((*earlier, status)):
            verdicts.append(make(f"clavain:{agent}", state, tokens_spent=123_456,
                                 summary="x" * SUMMARY_MAX_CHARS,
                                 at=f"2026-01-31T12:00:{second:02d}.000Z",
                                 detail_path=f".clavain/verdicts/clavain-{agent}--d{second}.md")
                            | {"dispatch": f"d{second}"})
    return verdicts


@pytest.mark.parametrize("earlier", [(), ("NEEDS_ATTENTION", "ERROR", "BLOCKED", "CLEAN")])
def test_a_clean_line_stays_under_50_tokens(earlier: tuple[str, ...]) -> None:
    lines = summary.render_summary(_ten(["CLEAN"] * 10, earlier=earlier)).splitlines()[1:]
    assert max(estimate_tokens(line) for line in lines) <= 50


@pytest.mark.parametrize("attention", [0, 2])
def test_ten_verdicts_stay_under_300_tokens(attention: int) -> None:
    statuses = ["NEEDS_ATTENTION"] * attention + ["CLEAN"] * (10 - attention)
    assert estimate_tokens(summary.render_summary(_ten(statuses))) <= 300
