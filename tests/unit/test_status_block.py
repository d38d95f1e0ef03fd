"""The loop's status block: forgiving about presentation, strict about content, last block wins."""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clavain.errors import ClavainError
from clavain.loop.status_block import (
    BEGIN,
    END,
    STATUSES,
    TESTS_STATUSES,
    StatusBlockError,
    parse,
    template,
)


def block(*lines: str) -> str:
    return "\n".join([BEGIN, *lines, END])


DONE = block("TASK_COMPLETED: clv-12", "STATUS: COMPLETE", "FILES_MODIFIED: 3",
             "TESTS_STATUS: PASSING", "EXIT_SIGNAL: true", "NEXT_RECOMMENDATION: ship it")
DONE_FIELDS = {"task_completed": "clv-12", "status": "COMPLETE", "files_modified": 3,
               "tests_status": "PASSING", "exit_signal": True, "next_recommendation": "ship it"}
MINIMAL = block("STATUS: IN_PROGRESS", "EXIT_SIGNAL: false")
MINIMAL_FIELDS = {"task_completed": "", "status": "IN_PROGRESS", "files_modified": 0,
                  "tests_status": "NOT_RUN", "exit_signal": False, "next_recommendation": ""}
FENCED_EXAMPLE = "Format:\n```\n" + block("STATUS: COMPLETE", "EXIT_SIGNAL: true") + "\n```\n"

PARSED: list[tuple[str, str, dict[str, Any]]] = [
    ("one full block", DONE, DONE_FIELDS),
    ("optional keys default", MINIMAL, MINIMAL_FIELDS),
    ("two blocks: the last wins", DONE + "\nthen more work\n" + MINIMAL, MINIMAL_FIELDS),
    ("prose mentioning EXIT_SIGNAL is ignored",
     "I will set EXIT_SIGNAL: true once done.\nSTATUS: COMPLETE\n" + MINIMAL, MINIMAL_FIELDS),
    ("a fenced example before the real block", FENCED_EXAMPLE + MINIMAL, MINIMAL_FIELDS),
    ("a fenced real block as the only block", "Done.\n```text\n" + DONE + "\n```", DONE_FIELDS),
    ("a fence inside the block is skipped",
     block("```", "STATUS: IN_PROGRESS", "EXIT_SIGNAL: false", "```"), MINIMAL_FIELDS),
    ("CRLF", DONE.replace("\n", "\r\n") + "\r\n", DONE_FIELDS),
    ("bare CR", DONE.replace("\n", "\r"), DONE_FIELDS),
    ("bold keys and values",
     block("**TASK_COMPLETED:** clv-12", "**STATUS**: **COMPLETE**", "**FILES_MODIFIED: 3**",
           "__TESTS_STATUS__: PASSING", "*EXIT_SIGNAL:* `true`",
           "**NEXT_RECOMMENDATION:** ship it"), DONE_FIELDS),
    ("bulleted, quoted and numbered keys",
     block("- TASK_COMPLETED: clv-12", "* STATUS: COMPLETE", "> 3. FILES_MODIFIED: 3",
           "+ `TESTS_STATUS`: PASSING", "> - EXIT_SIGNAL: true", "1) NEXT_RECOMMENDATION: ship it"),
     DONE_FIELDS),
    ("key case, spacing and enum spelling",
     block("task completed: clv-12", "Status: complete.", "Files-Modified: 3 files",
           "tests status: passing", "Exit Signal: TRUE", "next_recommendation: ship it"),
     DONE_FIELDS),
    ("quoted values and trailing whitespace",
     block('TASK_COMPLETED: "clv-12"  ', "STATUS: 'COMPLETE'", "FILES_MODIFIED: 3 \t",
           "TESTS_STATUS: PASSING", 'EXIT_SIGNAL: "true"', "NEXT_RECOMMENDATION: “ship it”   "),
     DONE_FIELDS),
    ("unknown keys and prose lines inside a block are ignored",
     block("NOTES: whatever", "STATUS: IN_PROGRESS", "Some prose line.", "EXIT_SIGNAL: false",
           "CONFIDENCE: high"), MINIMAL_FIELDS),
    ("decorated markers", "> **" + BEGIN + "**\nSTATUS: IN_PROGRESS\nEXIT_SIGNAL: false\n  `"
     + END + "`", MINIMAL_FIELDS),
    ("a second BEGIN restarts the block",
     BEGIN + "\nSTATUS: COMPLETE\nEXIT_SIGNAL: true\n" + MINIMAL, MINIMAL_FIELDS),
    ("an END with no BEGIN is ignored", END + "\n" + MINIMAL + "\n" + END, MINIMAL_FIELDS),
    ("no task", block("TASK_COMPLETED: none", "STATUS: BLOCKED", "EXIT_SIGNAL: false"),
     {**MINIMAL_FIELDS, "status": "BLOCKED"}),
    ("n/a task, zero files", block("TASK_COMPLETED: N/A", "STATUS: in progress",
                                   "FILES_MODIFIED: 0", "EXIT_SIGNAL: false"), MINIMAL_FIELDS),
    ("dash task, one file", block("TASK_COMPLETED: -", "STATUS: IN-PROGRESS",
                                  "FILES_MODIFIED: 1 file", "EXIT_SIGNAL: false"),
     {**MINIMAL_FIELDS, "files_modified": 1}),
    ("inner backticks are kept", block("STATUS: IN_PROGRESS", "EXIT_SIGNAL: false",
                                       "NEXT_RECOMMENDATION: run `pytest` then `ruff`"),
     {**MINIMAL_FIELDS, "next_recommendation": "run `pytest` then `ruff`"}),
    ("a colon inside a value", block("STATUS: IN_PROGRESS", "EXIT_SIGNAL: false",
                                     "NEXT_RECOMMENDATION: fix a.py:12: the import"),
     {**MINIMAL_FIELDS, "next_recommendation": "fix a.py:12: the import"}),
]

REFUSED: list[tuple[str, str, str]] = [
    ("empty input", "", f"no {BEGIN} block"),
    ("prose only", "All done. EXIT_SIGNAL: true\nSTATUS: COMPLETE", f"no {BEGIN} block"),
    ("BEGIN named inside a sentence", f"I end with {BEGIN} and {END}.", f"no {BEGIN} block"),
    ("missing STATUS", block("EXIT_SIGNAL: true"), "missing STATUS: (COMPLETE | IN_PROGRESS"),
    ("empty STATUS", block("STATUS:", "EXIT_SIGNAL: true"), "missing STATUS:"),
    ("missing EXIT_SIGNAL", block("STATUS: COMPLETE"), "missing EXIT_SIGNAL: (true | false)"),
    ("TESTS_STATUS is never STATUS", block("TESTS_STATUS: PASSING", "EXIT_SIGNAL: true"),
     "missing STATUS:"),
    ("bad STATUS", block("STATUS: DONE", "EXIT_SIGNAL: true"),
     "STATUS 'DONE' is not one of COMPLETE | IN_PROGRESS | BLOCKED"),
    ("bad TESTS_STATUS", block("STATUS: COMPLETE", "TESTS_STATUS: GREEN", "EXIT_SIGNAL: true"),
     "TESTS_STATUS 'GREEN' is not one of PASSING | FAILING | NOT_RUN"),
    ("EXIT_SIGNAL yes", block("STATUS: COMPLETE", "EXIT_SIGNAL: yes"),
     "EXIT_SIGNAL 'yes' is not one of true | false"),
    ("EXIT_SIGNAL 1", block("STATUS: COMPLETE", "EXIT_SIGNAL: 1"), "EXIT_SIGNAL '1'"),
    ("the unfilled template", template(), "STATUS 'COMPLETE | IN_PROGRESS | BLOCKED' is not"),
    ("negative FILES_MODIFIED", block("STATUS: COMPLETE", "FILES_MODIFIED: -2",
                                      "EXIT_SIGNAL: true"), "FILES_MODIFIED '-2'"),
    ("approximate FILES_MODIFIED", block("STATUS: COMPLETE", "FILES_MODIFIED: ~3",
                                         "EXIT_SIGNAL: true"), "FILES_MODIFIED '~3'"),
    ("FILES_MODIFIED in words", block("STATUS: COMPLETE", "FILES_MODIFIED: three",
                                      "EXIT_SIGNAL: true"), "FILES_MODIFIED 'three'"),
    ("fractional FILES_MODIFIED", block("STATUS: COMPLETE", "FILES_MODIFIED: 2.5",
                                        "EXIT_SIGNAL: true"), "FILES_MODIFIED '2.5'"),
    ("duplicate key", block("STATUS: COMPLETE", "STATUS: BLOCKED", "EXIT_SIGNAL: true"),
     "STATUS is given twice"),
    ("duplicate key in another spelling", block("STATUS: COMPLETE", "EXIT_SIGNAL: true",
                                                "**Exit Signal:** false"),
     "EXIT_SIGNAL is given twice"),
    ("unterminated last block", DONE + "\nmore\n" + BEGIN + "\nSTATUS: COMPLETE\n",
     f"the last {BEGIN} block has no {END} (the reply was cut off)"),
    ("unterminated only block", BEGIN + "\nSTATUS: COMPLETE\nEXIT_SIGNAL: true",
     "cut off"),
    ("a broken last block never falls back on an earlier one",
     DONE + "\n" + block("STATUS: FINISHED", "EXIT_SIGNAL: true"), "STATUS 'FINISHED'"),
    ("a later fenced example still wins: it is the last block",
     MINIMAL + "\n```\n" + template() + "\n```", "is not one of"),
]


@pytest.mark.parametrize(("text", "expected"), [case[1:] for case in PARSED],
                         ids=[case[0] for case in PARSED])
def test_parses(text: str, expected: dict[str, Any]) -> None:
    assert parse(text) == expected


@pytest.mark.parametrize(("text", "message"), [case[1:] for case in REFUSED],
                         ids=[case[0] for case in REFUSED])
def test_refuses(text: str, message: str) -> None:
    with pytest.raises(StatusBlockError) as caught:
        parse(text)
    assert message in str(caught.value)
    assert isinstance(caught.value, ClavainError)


def test_every_problem_is_listed() -> None:
    with pytest.raises(StatusBlockError) as caught:
        parse(block("TESTS_STATUS: maybe", "FILES_MODIFIED: lots"))
    assert len(caught.value.problems) == 4  # STATUS, EXIT_SIGNAL, TESTS_STATUS, FILES_MODIFIED


def test_template_spells_out_the_choices() -> None:
    text = template("clv-7")
    assert text.splitlines()[0] == BEGIN and text.splitlines()[-1] == END
    assert "TASK_COMPLETED: clv-7 | none" in text
    assert " | ".join(STATUSES) in text and " | ".join(TESTS_STATUSES) in text
    assert "EXIT_SIGNAL: true | false" in text
    assert "<item id>" in template()


def test_long_lines_stay_fast() -> None:
    long = "x" * 1_000_000
    text = block("STATUS: COMPLETE", "EXIT_SIGNAL: true", f"NEXT_RECOMMENDATION: {long}", long)
    assert parse(text)["next_recommendation"] == long


def test_pathological_decoration_stays_fast() -> None:
    wrapped = "*_" * 200_000 + "x" + "_*" * 200_000
    text = block("> " * 500_000 + "prose", "STATUS: COMPLETE", "EXIT_SIGNAL: true",
                 f"NEXT_RECOMMENDATION: {wrapped}") + "\n" + "> " * 500_000 + END
    started = time.monotonic()
    assert parse(text)["status"] == "COMPLETE"
    assert time.monotonic() - started < 2


# A free-text value that round-trips: no surrounding whitespace, wrappers or line breaks.
_TEXT = st.text(alphabet=st.sampled_from("abcXYZ019 -./:#()_,!?"), min_size=1, max_size=30)
_FREE = _TEXT.map(lambda value: "a" + value.strip() + "9")
# `{c}` is where the colon goes: `**KEY:**` carries it inside the emphasis.
_KEY_STYLES = ["{k}{c}", "**{k}**{c}", "**{k}{c}**", "`{k}`{c}", "_{k}_ {c}", "{lower}{c}",
               "{spaced}{c}"]
_VALUE_STYLES = ["{v}", "**{v}**", "`{v}`", '"{v}"', "'{v}'"]
_PREFIXES = ["", "- ", "* ", "> ", "> - ", "1. ", "  "]


@st.composite
def decorated_line(draw: st.DrawFn, key: str, value: str) -> str:
    key_style = draw(st.sampled_from(_KEY_STYLES))
    label = key_style.format(k=key, lower=key.lower(), spaced=key.replace("_", " ").title(),
                             c=":")
    shown = draw(st.sampled_from(_VALUE_STYLES)).format(v=value)
    return draw(st.sampled_from(_PREFIXES)) + label + draw(st.sampled_from([" ", "  ", "\t"])) \
        + shown + draw(st.sampled_from(["", " ", "  "]))


@st.composite
def rendered_block(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    expected = {
        "task_completed": draw(st.one_of(st.just(""), _FREE)),
        "status": draw(st.sampled_from(STATUSES)),
        "files_modified": draw(st.integers(min_value=0, max_value=10**9 - 1)),
        "tests_status": draw(st.sampled_from(TESTS_STATUSES)),
        "exit_signal": draw(st.booleans()),
        "next_recommendation": draw(st.one_of(st.just(""), _FREE)),
    }
    files = str(expected["files_modified"]) + draw(st.sampled_from(["", " files", " FILES"]))
    exit_word = "true" if expected["exit_signal"] else "false"
    shown = {
        "TASK_COMPLETED": expected["task_completed"] or draw(st.sampled_from(["none", "N/A", "-"])),
        "STATUS": draw(st.sampled_from([str.upper, str.lower, str.title]))(
            expected["status"].replace("_", draw(st.sampled_from(["_", " ", "-"])))),
        "FILES_MODIFIED": files,
        "TESTS_STATUS": draw(st.sampled_from([str.upper, str.lower]))(expected["tests_status"]),
        "EXIT_SIGNAL": draw(st.sampled_from([str.upper, str.lower, str.title]))(exit_word),
        "NEXT_RECOMMENDATION": expected["next_recommendation"],
    }
    optional = ["TASK_COMPLETED", "FILES_MODIFIED", "TESTS_STATUS", "NEXT_RECOMMENDATION"]
    omitted = draw(st.sets(st.sampled_from(optional)))
    defaults = {"TASK_COMPLETED": "", "FILES_MODIFIED": 0, "TESTS_STATUS": "NOT_RUN",
                "NEXT_RECOMMENDATION": ""}
    for key in omitted:
        expected[key.lower()] = defaults[key]
    keys = draw(st.permutations([key for key in shown if key not in omitted]))
    lines = [draw(decorated_line(key, shown[key])) for key in keys]
    if shown["NEXT_RECOMMENDATION"] == "" and "NEXT_RECOMMENDATION" in keys:
        lines[keys.index("NEXT_RECOMMENDATION")] = "NEXT_RECOMMENDATION:"
    body = "\n".join([BEGIN, *lines, END])
    if draw(st.booleans()):
        body = "```\n" + body + "\n```"
    preamble = draw(st.sampled_from(["", "Done. EXIT_SIGNAL: true\n", template() + "\n\n"]))
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    return (preamble + body).replace("\n", newline), expected


@given(rendered_block())
def test_any_decorated_valid_block_round_trips(case: tuple[str, dict[str, Any]]) -> None:
    text, expected = case
    assert parse(text) == expected
