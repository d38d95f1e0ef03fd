"""The verdict header parser: forgiving about presentation, strict about content."""

from __future__ import annotations

import pytest

from clavain.verdicts.parser import VerdictParseError, parse_header

CLEAN = """I read the diff. Nothing to change.

TYPE: verdict
STATUS: CLEAN
MODEL: sonnet
TOKENS_SPENT: 1200
FILES_CHANGED: []
FINDINGS_COUNT: 0
SUMMARY: all good
DETAIL_PATH: .clavain/verdicts/clavain-fd-quality.md
"""

MESSY = (
    "## Findings\r\n1. `a.py:3` shadows `id`\r\n\r\n"
    "```\r\n"
    "- **Type:** Verdict\r\n"
    "- **status**:   needs attention\r\n"
    "* _model_ : *opus*\r\n"
    "- `TOKENS_SPENT`: ~1,200 (estimated)\r\n"
    "- Files Changed: [`a.py`, \"b.py\"]\r\n"
    "- findings_count:  **2**\r\n"
    "- **SUMMARY:** _two shadowed names in a.py_\r\n"
    "```\r\n"
)


def test_clean_header_gives_typed_fields() -> None:
    assert parse_header(CLEAN) == {
        "type": "verdict", "status": "CLEAN", "model": "sonnet", "tokens_spent": 1200,
        "files_changed": [], "findings_count": 0, "summary": "all good",
        "detail_path": ".clavain/verdicts/clavain-fd-quality.md",
    }


def test_messy_markdown_header() -> None:
    parsed = parse_header(MESSY)
    assert parsed == {
        "type": "verdict", "status": "NEEDS_ATTENTION", "model": "opus", "tokens_spent": 1200,
        "files_changed": ["a.py", "b.py"], "findings_count": 2,
        "summary": "two shadowed names in a.py", "detail_path": None,
    }


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("TOKENS_SPENT: 1200", 1200),
        ("TOKENS_SPENT: ~1,200", 1200),
        ("TOKENS_SPENT: 1200 (estimated)", 1200),
        ("TOKENS_SPENT: ≈ 3.5k", 3500),
        ("TOKENS_SPENT: 1.2M", 1_200_000),
        ("TOKENS_SPENT: (estimated)", None),
        ("TOKENS_SPENT: 1200 measured", 1200),
        ("TOKENS_SPENT: 1.5k", 1500),
        ("TOKENS_SPENT: 0.0015M", 1500),
        ("TOKENS_SPENT: 1.2345k", 1235),  # rounded half up, exactly
        ("TOKENS_SPENT: 12345678901234", 12_345_678_901_234),  # exact, not through a float
        ("TOKENS_SPENT: 999999999999999", 999_999_999_999_999),
        ("TOKENS_SPENT: 1000000000000001", None),  # absurd: > 10**15
        ("TOKENS_SPENT: " + "9" * 400, None),  # float() would overflow and lose the verdict
        ("TOKENS_SPENT: " + "1" * 5000, None),  # past int()'s digit limit
        ("TOKENS_SPENT: -1200", None),  # negative is not made positive
        ("TOKENS_SPENT: ~-5k", None),
        ("TOKENS_SPENT: P1-2", 1),  # a hyphen inside a word is no minus sign
    ],
)
def test_token_numbers(line: str, expected: int | None) -> None:
    text = f"TYPE: verdict\nSTATUS: CLEAN\n{line}\nSUMMARY: ok"
    assert parse_header(text)["tokens_spent"] == expected


@pytest.mark.parametrize(
    ("value", "files"),
    [
        ("[a.py, b.py]", ["a.py", "b.py"]),
        ("a.py, b.py", ["a.py", "b.py"]),
        ("`a.py`; `lib/b c.py`", ["a.py", "lib/b c.py"]),
        ("[]", []),
        ("none", []),
        ("-", []),
        ("[a.py, a.py]", ["a.py"]),
    ],
)
def test_file_lists(value: str, files: list[str]) -> None:
    text = f"TYPE: implementation\nSTATUS: COMPLETE\nFILES_CHANGED: {value}\nSUMMARY: done"
    assert parse_header(text)["files_changed"] == files


def test_files_as_bullets_under_an_empty_key() -> None:
    text = ("TYPE: implementation\nSTATUS: PARTIAL\nFILES_CHANGED:\n- lib/a.py\n- `tests/b.py`\n"
            "FINDINGS_COUNT: 1\nSUMMARY: half done")
    parsed = parse_header(text)
    assert parsed["files_changed"] == ["lib/a.py", "tests/b.py"]
    assert parsed["findings_count"] == 1


def test_two_headers_the_last_wins() -> None:
    text = CLEAN + "\nOn second thought:\n\nTYPE: verdict\nSTATUS: BLOCKED\nSUMMARY: no diff\n"
    parsed = parse_header(text)
    assert (parsed["status"], parsed["summary"]) == ("BLOCKED", "no diff")
    assert parsed["tokens_spent"] is None  # nothing leaks from the earlier header


def test_template_quoted_earlier_does_not_win() -> None:
    text = ("The format is:\n```\nTYPE: verdict\nSTATUS: CLEAN | NEEDS_ATTENTION\n"
            "SUMMARY: <one line>\n```\nNow my answer.\n\nTYPE: verdict\nSTATUS: CLEAN\n"
            "SUMMARY: fine")
    assert parse_header(text)["summary"] == "fine"


def test_prose_summary_line_after_the_header_is_not_a_header() -> None:
    text = CLEAN + "\nThanks!\nSummary: I enjoyed this review.\n"
    assert parse_header(text)["summary"] == "all good"


def test_lookalike_keys_do_not_count() -> None:
    text = "TYPE: verdict\nTESTS_STATUS: CLEAN\nMY_SUMMARY: x\nSUMMARY: ok"
    with pytest.raises(VerdictParseError) as caught:
        parse_header(text)
    assert caught.value.problems == ["missing STATUS:"]


@pytest.mark.parametrize(
    ("text", "problems"),
    [
        ("", ["no verdict header (expected TYPE:, STATUS:, SUMMARY: lines)"]),
        ("All looks fine to me.", ["no verdict header (expected TYPE:, STATUS:, SUMMARY: lines)"]),
        ("TYPE: verdict\nSTATUS: OK\nSUMMARY: fine",
         ["STATUS 'OK' is not a verdict STATUS (CLEAN | NEEDS_ATTENTION | BLOCKED | ERROR)"]),
        ("TYPE: verdict\nSTATUS: CLEAN | NEEDS_ATTENTION\nSUMMARY: x",
         ["STATUS 'CLEAN | NEEDS_ATTENTION' is not a verdict STATUS "
          "(CLEAN | NEEDS_ATTENTION | BLOCKED | ERROR)"]),
        ("TYPE: verdict\nSTATUS: COMPLETE\nSUMMARY: x",
         ["STATUS 'COMPLETE' is not a verdict STATUS (CLEAN | NEEDS_ATTENTION | BLOCKED | ERROR)"]),
        ("TYPE: implementation\nSTATUS: CLEAN\nSUMMARY: x",
         ["STATUS 'CLEAN' is not a implementation STATUS (COMPLETE | PARTIAL | FAILED)"]),
        ("TYPE: review\nSTATUS: CLEAN\nSUMMARY: x",
         ["TYPE 'review' is not verdict or implementation"]),
        ("STATUS: CLEAN", ["missing TYPE:", "missing SUMMARY:"]),
        ("TYPE: verdict\nSTATUS: CLEAN\nFINDINGS_COUNT: several\nSUMMARY: x",
         ["FINDINGS_COUNT 'several' is not a number"]),
        ("TYPE: verdict\nSTATUS:\nSUMMARY:", ["missing STATUS:", "missing SUMMARY:"]),
        ("TYPE: verdict\nSTATUS: CLEAN\nFINDINGS_COUNT: -2\nSUMMARY: x",
         ["FINDINGS_COUNT '-2' is out of range (0 to 1,000,000)"]),
        ("TYPE: verdict\nSTATUS: CLEAN\nFINDINGS_COUNT: 1000001\nSUMMARY: x",
         ["FINDINGS_COUNT '1000001' is out of range (0 to 1,000,000)"]),
        ("TYPE: verdict\nSTATUS: CLEAN\nFINDINGS_COUNT: " + "7" * 300 + "\nSUMMARY: x",
         [f"FINDINGS_COUNT '{'7' * 300}' is out of range (0 to 1,000,000)"]),
    ],
)
def test_bad_headers_list_every_problem(text: str, problems: list[str]) -> None:
    with pytest.raises(VerdictParseError) as caught:
        parse_header(text)
    assert caught.value.problems == problems
    assert str(caught.value) == "; ".join(problems)


@pytest.mark.parametrize("cut", ["SUMMARY: al", "SUMM", "FINDINGS_COUNT: 0\n"])
def test_truncated_header_is_an_error_not_a_guess(cut: str) -> None:
    text = CLEAN[: CLEAN.index("FINDINGS_COUNT")] + cut
    if cut.startswith("SUMMARY"):
        assert parse_header(text)["summary"] == "al"  # a cut summary is still a summary
        return
    with pytest.raises(VerdictParseError) as caught:
        parse_header(text)
    assert caught.value.problems == ["missing SUMMARY:"]


def test_status_spellings_normalise_but_stay_in_the_enum() -> None:
    for spelling in ("needs_attention", "Needs Attention", "NEEDS-ATTENTION", "**NEEDS_ATTENTION**",
                     "NEEDS_ATTENTION."):
        text = f"TYPE: verdict\nSTATUS: {spelling}\nSUMMARY: x"
        assert parse_header(text)["status"] == "NEEDS_ATTENTION", spelling


def test_blockquote_and_numbered_lines() -> None:
    text = "> 1. TYPE: verdict\n> 2. STATUS: ERROR\n> 3. SUMMARY: tool crashed"
    assert parse_header(text)["status"] == "ERROR"


def test_long_summary_is_cut_to_one_line_of_300() -> None:
    text = "TYPE: verdict\nSTATUS: CLEAN\nSUMMARY: " + "word " * 200
    summary = parse_header(text)["summary"]
    assert len(summary) == 300 and summary.endswith("…") and "\n" not in summary


def test_empty_optional_values_become_none() -> None:
    text = "TYPE: verdict\nSTATUS: CLEAN\nMODEL: n/a\nDETAIL_PATH: (none)\nSUMMARY: x"
    parsed = parse_header(text)
    assert parsed["model"] is None and parsed["detail_path"] is None


def test_extra_keys_inside_a_header_are_skipped_not_a_break() -> None:
    text = ("TYPE: implementation\nSTATUS: COMPLETE\nTESTS_STATUS: 12 passed\n"
            "FILES_CHANGED: a.py\nSUMMARY: done")
    parsed = parse_header(text)
    assert (parsed["status"], parsed["files_changed"]) == ("COMPLETE", ["a.py"])


# --- review: the last header, not the last header-looking line -------------------------------

REAL = "TYPE: verdict\nSTATUS: NEEDS_ATTENTION\nFINDINGS_COUNT: 2\nSUMMARY: two findings\n"


@pytest.mark.parametrize("after", [
    "\nThanks! Status: see above.\n",
    "\nStatus: the build is green, I checked.\n",
    "\n\nType: refactoring only\n",
])
def test_a_status_line_in_prose_after_the_header_does_not_replace_it(after: str) -> None:
    parsed = parse_header(REAL + after)
    assert (parsed["status"], parsed["summary"]) == ("NEEDS_ATTENTION", "two findings")


def test_a_template_after_the_header_is_an_error_that_names_the_cause() -> None:
    """The last header wins even when it is an unfilled template: the earlier one could be an
    example, so taking it would be a guess. The error says an earlier header was ignored."""
    template = ("\nFor reference, the contract:\n```\nTYPE: verdict\n"
                "STATUS: <one of CLEAN, NEEDS_ATTENTION, BLOCKED, ERROR>\n"
                "SUMMARY: <one line>\n```\n")
    with pytest.raises(VerdictParseError) as caught:
        parse_header(REAL + template)
    assert caught.value.problems[0].startswith("STATUS '<one of CLEAN")
    assert caught.value.problems[-1] == (
        "only the last header counts (an earlier, complete one is ignored)")


def test_a_lone_valid_status_after_the_header_is_a_truncated_header_not_ignored() -> None:
    with pytest.raises(VerdictParseError) as caught:
        parse_header(REAL + "\nOn reflection:\n\nSTATUS: CLEAN\n")
    assert caught.value.problems[:2] == ["missing TYPE:", "missing SUMMARY:"]


def test_a_fenced_example_does_not_lend_fields_to_the_real_header() -> None:
    example = "The format:\n```\nSTATUS: CLEAN\nSUMMARY: <one line>\n```\n"
    assert parse_header(example + REAL)["summary"] == "two findings"
    with pytest.raises(VerdictParseError) as caught:  # the real one lacks SUMMARY
        parse_header("```\nSUMMARY: an example\n```\nTYPE: verdict\nSTATUS: BLOCKED\n")
    assert caught.value.problems[0] == "missing SUMMARY:"


def test_a_truncated_last_header_is_an_error_that_says_an_earlier_one_was_ignored() -> None:
    with pytest.raises(VerdictParseError) as caught:
        parse_header(REAL + "\nUpdate after rerunning:\n\nTYPE: verdict\nSTATUS: CLEAN\n")
    assert caught.value.problems == [
        "missing SUMMARY:", "only the last header counts (an earlier, complete one is ignored)"]


@pytest.mark.parametrize("extra", ["P1_FINDINGS: 2", "HIGH_SEVERITY_FINDINGS_COUNT: 1",
                                   "**TESTS_RUN_2**: 14"])
def test_extra_keys_with_digits_or_long_names_do_not_break_the_header(extra: str) -> None:
    text = f"TYPE: verdict\nSTATUS: CLEAN\n{extra}\nSUMMARY: ok"
    assert parse_header(text)["summary"] == "ok"


MB = 1_000_000


@pytest.mark.parametrize("body", [
    pytest.param(lambda: " " * MB + "x", id="leading-spaces"),
    pytest.param(lambda: "\t" * MB + "STATUS x", id="leading-tabs"),
    pytest.param(lambda: "SUMMARY: a" + " " * MB + "b", id="spaces-in-a-value"),
    pytest.param(lambda: "- a" + " " * MB + "b", id="spaces-in-a-bullet"),
    pytest.param(lambda: "STATUS" + " " * MB + ": x", id="spaces-before-colon"),
    pytest.param(lambda: "MODEL: " + "*" * (MB // 2) + "x" + "*" * (MB // 2), id="emphasis"),
    pytest.param(lambda: "FILES_CHANGED: " + ",".join(f"f{i}.py" for i in range(MB // 8)),
                 id="many-files"),
    pytest.param(lambda: "FILES_CHANGED:\n" + "".join(f"- f{i}.py\n" for i in range(MB // 9)),
                 id="many-file-bullets"),
])
def test_a_1mb_hostile_message_parses(body) -> None:
    """Shapes that make a backtracking regex quadratic. No timing here (tests never assert on
    it): a regression shows up as this test hanging, and `benchmarks/` measures speed."""
    import contextlib

    text = "TYPE: verdict\nSTATUS: CLEAN\nSUMMARY: ok\n" + body()
    with contextlib.suppress(VerdictParseError):
        parse_header(text)
