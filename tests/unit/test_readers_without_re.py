"""What SubagentStop reads (the verdict header, the lens, file names, times, model versions)
and the loop's status block are read without `re` (issue 37: `re` cost SubagentStop about a
fifth of its time). Each reader is held to the pattern it replaced, on text built from the
characters those patterns care about (Unicode whitespace and digits included): the patterns
are the naive model."""

from __future__ import annotations

import re

from hypothesis import example, given, settings
from hypothesis import strategies as st

from clavain.markdown_keys import key_line, snake_upper
from clavain.verdicts import parser

KEY_PREFIX = re.compile(
    r"^(?:>\s*)*(?:(?:[-*+•]|\d{1,2}[.)])\s+)?(?P<open>[*_`]*)\s*"
    r"(?P<key>[A-Za-z][A-Za-z0-9 _-]{0,40}?)\s*(?P<close>[*_`]*)\s*:$")
EXTRA_KEY = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$")
FENCE = re.compile(r"^\s*(?:```|~~~)")
BULLET_ITEM = re.compile(r"^(?:>\s*)*(?:[-*+•]|\d{1,3}[.)])\s+(?P<item>.+)$")
NUMBER = re.compile(r"(?:(?<!\w)(?P<minus>[-\u2212]))?(?P<whole>\d+)(?:\.(?P<fraction>\d+))?"
                    r"\s*(?P<scale>[kKmM]\b)?")

# What the patterns tell apart: quote marks, bullets, emphasis, key characters, colons, ASCII
# and other digits (Arabic-Indic, full-width), ASCII and other whitespace, word characters.
PIECES = [">", " ", "\t", "\u00a0", "\u2003", "-", "*", "+", "•", "_", "`", ":", ".", ")",
          "1", "2", "0", "\u0663", "\uff17", "A", "s", "Status", "TYPE", "x", "k", "M", "é",
          "\u2212", "~~~", "```", "~", "#"]
texts = st.lists(st.sampled_from(PIECES), max_size=14).map("".join)


def _old_key_line(line: str):
    text = line.strip()
    colon = text.find(":", 0, 64)
    match = KEY_PREFIX.match(text, 0, colon + 1) if colon > 0 else None
    if not match:
        return None
    return (match.groupdict(), re.sub(r"[\s-]+", "_", match["key"].strip()).upper(),
            text[colon + 1:])


@settings(max_examples=1500)
@given(texts)
@example("> - **Tests Status:** x")
@example("1. _STATUS_ : done")
@example("* Status: y")
@example("*\tStatus*: y")
@example("12) `EXIT_SIGNAL`: true")
@example("STATUS_ _: y")
def test_key_lines_read_as_the_pattern_read_them(text: str) -> None:
    assert key_line(text) == _old_key_line(text)


@given(texts)
def test_words_become_snake_upper_as_the_pattern_made_them(text: str) -> None:
    assert snake_upper(text) == re.sub(r"[\s-]+", "_", text).upper()


@settings(max_examples=1500)
@given(texts)
@example("TESTS_STATUS")
@example("123. src/a.py")
@example("1234. src/a.py")
@example("> > 12) x")
@example("-\u00a0x")
@example("A__B")
@example("_A_B")
def test_extra_keys_fences_and_bullets_as_the_patterns_found_them(text: str) -> None:
    assert parser._extra_key(text) is bool(EXTRA_KEY.match(text))
    assert parser._is_fence(text) is bool(FENCE.match(text))
    stripped = text.strip()
    old = BULLET_ITEM.match(stripped)
    assert parser._bullet_item(stripped) == (old["item"] if old else None)


@settings(max_examples=1500)
@given(texts)
@example("P1-2")
@example("-3")
@example("1.5k tokens")
@example("~1200 (estimated)")
@example("2 m")
@example("2 mb")
@example("x\u22127")
def test_numbers_are_found_as_the_pattern_found_them(text: str) -> None:
    match = NUMBER.search(text)
    expected = None if match is None else (
        bool(match["minus"]), match["whole"], match["fraction"] or "", match["scale"] or "")
    assert parser._first_number(text) == expected


# Verdict file names and times (`verdicts.files`), held to the patterns they replaced.
UNSAFE_NAME_CHARS = re.compile(r"[^A-Za-z0-9._-]+")
STAMP_PARTS = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?"
                         r"(?:Z|([+-])(\d{2}):(\d{2}))")
STAMP_PIECES = ["2026", "-", "11", "T", "20", ":", "30", "00", ".", "123", "Z", "+", "02",
                "\u0662\u0660", "\uff11", " ", "\n", "x"]
stamps = st.lists(st.sampled_from(STAMP_PIECES), max_size=16).map("".join)


def _old_safe_name(text: str) -> str:
    name = UNSAFE_NAME_CHARS.sub("-", text.strip())
    name = re.sub(r"\.{2,}", ".", name)
    return re.sub(r"-{2,}", "-", name).strip(".-")


@settings(max_examples=1500)
@given(stamps)
@example("2026-11-21T20:30:00Z")
@example("2026-11-21T20:30:00.123456+02:00")
@example("2026-11-21T20:30:00.Z")
@example("2026-11-21T20:30:00Z\n")
@example("\u0662\u0660\u0662\u0666-11-21T20:30:00-05:30")
def test_times_are_read_as_the_patterns_read_them(text: str) -> None:
    from clavain.clock import stamp_parts
    from clavain.verdicts.files import TIMESTAMP_PATTERN

    match = STAMP_PARTS.fullmatch(text)
    assert stamp_parts(text) == (match.groups() if match else None)
    assert (stamp_parts(text) is not None) is bool(re.fullmatch(TIMESTAMP_PATTERN, text))


@settings(max_examples=1000)
@given(st.lists(st.sampled_from(["a", "Z", "9", ".", "..", "-", "_", " ", ":", "/", "é",
                                 "\u00a0", "clavain:reviewer", "\t"]), max_size=12).map("".join))
def test_names_are_made_safe_as_the_patterns_made_them(text: str) -> None:
    from clavain.verdicts.files import MAX_NAME_CHARS, safe_agent_name

    expected = _old_safe_name(text)
    if len(expected) > MAX_NAME_CHARS:  # cut and hashed, the same way before and after
        cut = safe_agent_name(text).rsplit("-", 1)[0]
        assert cut == expected[:MAX_NAME_CHARS - 11].rstrip(".-")
        return
    if not expected:
        try:
            safe_agent_name(text)
        except ValueError:
            return
        raise AssertionError(f"{text!r} should have no usable characters")
    assert safe_agent_name(text) == expected


LENS = re.compile(r"\**Lens:?\**:?\s*`?([a-z][a-z-]{0,31})\b")
VERSION = re.compile(r"-\d{1,2}(?!\d)")


@settings(max_examples=1500)
@given(st.lists(st.sampled_from(["*", "Lens", ":", " ", "\u2003", "`", "quality", "a", "-",
                                 "x" * 30, "Z", "9", "_", "é"]), max_size=10).map("".join))
@example("Lens: quality")
@example("**Lens:** `safety-`")
@example("Lens: " + "a" * 40)
@example("Lens: " + "a" * 31 + "-b")
def test_a_lens_is_named_as_the_pattern_named_it(line: str) -> None:
    from clavain.verdicts.lens import lens_named

    match = LENS.match(line)
    assert lens_named(line) == (match[1] if match else None)


@given(st.text(alphabet="-0123456789a\u0663", max_size=6), st.integers(0, 3))
def test_a_model_version_is_told_from_a_date_as_the_pattern_told_it(name: str, at: int) -> None:
    from clavain.guards.pricing import _version_at

    assert _version_at(name, at) is bool(VERSION.match(name, at))


@settings(max_examples=200)
@given(st.lists(st.sampled_from(["agent-a.jsonl", "agent-.jsonl", "agent-b.json", "x.jsonl",
                                 ".agent-c.jsonl", "agent-d.jsonl.bak", "AGENT-e.jsonl",
                                 "v.json", ".json", "agent-dir.jsonl"]), unique=True),
       st.sampled_from([("agent-", ".jsonl"), ("", ".json"), ("", "")]))
def test_names_are_listed_as_the_glob_listed_them(tmp_path_factory, names: list[str],
                                                   pattern: tuple[str, str]) -> None:
    """`fsutil.names_ending` stands in for `folder.glob(prefix + "*" + suffix)` on the hook
    path (a glob compiles its pattern with `re`)."""
    from pathlib import Path

    from clavain.fsutil import names_ending

    folder: Path = tmp_path_factory.mktemp("listing")
    for name in names:
        (folder / name).mkdir() if name == "agent-dir.jsonl" else (folder / name).write_text("")
    prefix, suffix = pattern
    assert names_ending(folder, suffix, prefix) == \
        sorted(path.name for path in folder.glob(f"{prefix}*{suffix}"))
    assert names_ending(folder / "missing", suffix, prefix) == []
