"""`fastjson` reads and writes exactly what `json` does (it is `json`'s own C parser without the
`re` import), errors included."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clavain import fastjson

LIB = Path(__file__).resolve().parents[2] / "lib"
values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20)


@given(values)
def test_dumps_and_loads_agree_with_json(value: object) -> None:
    text = fastjson.dumps(value)
    assert text == json.dumps(value)
    assert repr(fastjson.loads(text)) == repr(json.loads(text))
    padded = f" \n\t{json.dumps(value, indent=2)}\r\n "
    assert repr(fastjson.loads(padded)) == repr(json.loads(padded))


@given(values, st.sampled_from([None, 0, 2, 4]), st.booleans())
def test_indented_and_unicode_output_agrees_with_json(value: object, indent: int | None,
                                                       ensure_ascii: bool) -> None:
    """The verdict and state files are written indented and validated without ASCII escapes
    (issue 37: SubagentStop no longer imports `json`, and with it `re`)."""
    assert fastjson.dumps(value, indent=indent, ensure_ascii=ensure_ascii) == \
        json.dumps(value, indent=indent, ensure_ascii=ensure_ascii)


def test_a_lone_surrogate_is_written_unescaped_as_by_json() -> None:
    assert fastjson.dumps({"a": "\ud800é"}, ensure_ascii=False) == '{"a": "\ud800é"}'
    with pytest.raises(UnicodeEncodeError):
        fastjson.dumps(["\ud800"], ensure_ascii=False).encode("utf-8")


@pytest.mark.parametrize("bad", ["", " ", "{", "{not json", "[1,]", '{"a" 1}', "[1] 2", "'x'",
                                 "\"unterminated", "tru", "[" * 10])
def test_bad_json_fails_like_json(bad: str) -> None:
    with pytest.raises(ValueError) as ours:
        fastjson.loads(bad)
    with pytest.raises(ValueError) as theirs:
        json.loads(bad)
    assert str(ours.value) == str(theirs.value)


def test_bad_json_fails_like_json_before_json_is_imported() -> None:
    """The hook process has not imported `json`: `_json` cannot raise its own error then."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from clavain import fastjson\n"
            "assert 'json' not in sys.modules\n"
            "try:\n    fastjson.loads('{not json')\n"
            "except ValueError as exc:\n    print(type(exc).__name__, exc)")
    done = subprocess.run([sys.executable, "-S", "-c", code, str(LIB)], capture_output=True,
                          text=True, check=True)
    assert done.stdout.strip() == ("JSONDecodeError Expecting property name enclosed in double "
                                   "quotes: line 1 column 2 (char 1)")


def test_too_deep_is_a_recursion_error_both_ways() -> None:
    with pytest.raises(RecursionError):
        fastjson.loads("[" * 100_000 + "]" * 100_000)
    deep: list = []
    for _ in range(1000):
        deep = [deep]
    with pytest.raises(RecursionError):
        fastjson.dumps(deep)
    fair: list = []  # deeper than fastjson's own stack, not too deep for `json`
    for _ in range(600):
        fair = [fair]
    for indent in (None, 2):
        assert fastjson.dumps(fair, indent=indent) == json.dumps(fair, indent=indent)


def test_keys_and_what_json_cannot_write() -> None:
    odd_keys = {7: "a", 2.5: "b", False: "c", None: "d"}
    assert fastjson.dumps(odd_keys) == json.dumps(odd_keys)
    for bad in ({"a": object()}, {(1, 2): "x"}):
        with pytest.raises(TypeError):
            json.dumps(bad)
        with pytest.raises(TypeError):
            fastjson.dumps(bad)
