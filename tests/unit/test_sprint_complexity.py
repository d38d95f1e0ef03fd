"""The complexity classifier: the seed's rules, and agreement with people on labelled data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clavain.sprint.complexity import LABELS, classify
from clavain.sprint.invocation import parse
from clavain.sprint.route import check_complexity

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.mark.parametrize(("text", "files", "score"), [
    ("", 0, 3),                                            # nothing to go on: moderate
    ("   ", 0, 3),
    ("improve things", 0, 3),                              # under 5 words: moderate
    ("fix typo in the README", 0, 1),                      # trivial word
    ("Fix the TYPO in docs/index.md", 1, 1),               # case-insensitive
    ("research and compare three caching libraries", 0, 5),  # two research words
    ("investigate why the nightly build is slow", 0, 5),
    ("make it multi-tenant", 0, 4),                        # blast radius, short
    ("add OAuth login", 0, 4),
    ("rename the auth module to identity across all 40 services", 40, 4),  # not trivial
    ("research shows we should just bump lodash to 4.17.21", 1, 1),  # research as context
    ("bump django 3.2 -> 5.0", 0, 4),                      # major version: not a bump
])
def test_seed_rules(text: str, files: int, score: int) -> None:
    result = classify(text, files)
    assert result["score"] == score, result
    assert result["label"] == LABELS[score] and result["reasons"]


def test_words_match_whole_not_inside_other_words() -> None:
    # `bumper`, `typography` and `researcher` are not trivial or research words.
    assert classify("add a bumper sticker page with new typography for the researcher "
                    "bio section")["score"] == 2


def test_file_count_moves_the_score_by_one_or_two() -> None:
    base = classify("add a retry option to the upload client and document it")["score"]
    assert classify("add a retry option to the upload client and document it", 5)["score"] \
        == base + 1
    assert classify("add a retry option to the upload client and document it", 25)["score"] \
        == min(4, base + 2)


def test_an_override_wins_and_bad_values_are_one_line() -> None:
    assert check_complexity("2") == 2
    for bad in ("0", "6", "two", "2.5", "", "-1"):
        with pytest.raises(Exception, match="complexity must be 1, 2, 3, 4 or 5"):
            check_complexity(bad)


def _rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / name).read_text().splitlines() if line]


def test_agrees_with_people_on_the_labelled_requests() -> None:
    rows = _rows("complexity.jsonl")
    assert len(rows) >= 100 and {r["label"] for r in rows} == set(LABELS)
    long_or_messy = [r for r in rows if len(r["text"].split()) > 25 or "`" in r["text"]]
    assert len(long_or_messy) >= len(rows) / 3
    got = [classify(r["text"], r["files"])["score"] for r in rows]
    exact = sum(g == r["label"] for g, r in zip(got, rows, strict=True)) / len(rows)
    near = sum(abs(g - r["label"]) <= 1 for g, r in zip(got, rows, strict=True)) / len(rows)
    assert exact >= 0.75, f"{exact:.1%} exact"
    assert near >= 0.95, f"{near:.1%} within ±1"


@pytest.mark.parametrize(("raw", "expected"), [
    ("add OAuth login", {"text": "add OAuth login"}),
    ("--complexity 2 rename foo to bar", {"complexity": "2", "text": "rename foo to bar"}),
    ("--complexity=4 --skip-to plan fix the user's login; echo $HOME",
     {"complexity": "4", "skip_to": "plan", "text": "fix the user's login; echo $HOME"}),
    ("--resume", {"resume": True, "text": ""}),
    ("--resume --from-step execute", {"resume": True, "from_step": "execute", "text": ""}),
    ("--files 12 split the monolith", {"files": 12, "text": "split the monolith"}),
    ("-- --verbose flag for the CLI", {"text": "--verbose flag for the CLI"}),
    ("  add a --verbose flag  \n", {"text": "add a --verbose flag"}),
])
def test_the_typed_line_is_read_verbatim(raw: str, expected: dict) -> None:
    defaults = {"complexity": None, "skip_to": None, "files": 0, "from_step": None,
                "resume": False}
    assert parse(raw) == {**defaults, **expected}


@pytest.mark.parametrize(("raw", "message"), [
    ("--bogus add x", "unknown option --bogus"),
    ("--complexity", "--complexity needs a value"),
    ("--files many add x", "--files must be a whole number"),
])
def test_bad_typed_options_are_one_line(raw: str, message: str) -> None:
    with pytest.raises(Exception, match=message):
        parse(raw)
