"""The committed schema is what the pydantic model generates, and the stdlib validator (used by
the hook) accepts exactly what the model and the schema accept."""

from __future__ import annotations

import json

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from clavain.models.verdict import SCHEMA_PATH, Verdict, render_schema
from clavain.verdicts import files as verdict_files

VALID = {
    "type": "verdict", "status": "NEEDS_ATTENTION", "model": "sonnet", "tokens_spent": 1200,
    "tokens_source": "measured", "files_changed": ["a.py"], "findings_count": 2,
    "summary": "two issues", "detail_path": ".clavain/verdicts/clavain-fd-quality.md",
    "agent": "clavain:fd-quality", "agent_id": "a1f3", "session_id": "s1",
    "timestamp": "2026-01-31T12:00:00.123Z",
}


def test_committed_schema_matches_the_model() -> None:
    assert SCHEMA_PATH.read_text() == render_schema(), (
        "schemas/verdict.schema.json is stale: run `python -m clavain.models.verdict`")


def _verdicts_of_all_three(value: object) -> tuple[bool, bool, bool]:
    schema = json.loads(SCHEMA_PATH.read_text())
    by_schema = jsonschema.Draft202012Validator(schema).is_valid(value)
    try:
        Verdict.model_validate(value)
        by_model = True
    except ValidationError:
        by_model = False
    return not verdict_files.validate(value), by_model, by_schema


BAD_CASES = [
    {"status": "COMPLETE"},
    {"type": "implementation"},
    {"type": "review"},
    {"status": "clean"},
    {"summary": ""},
    {"summary": "two\nlines"},
    {"summary": "trailing newline\n"},
    {"summary": "x" * 301},
    {"tokens_spent": -1},
    {"tokens_spent": "1200"},
    {"tokens_spent": True},
    {"findings_count": None},
    {"findings_count": 1.5},
    {"tokens_source": "guessed"},
    {"files_changed": "a.py"},
    {"files_changed": [""]},
    {"files_changed": [1]},
    {"model": ""},
    {"detail_path": ""},
    {"agent": ""},
    {"agent": None},
    {"session_id": 5},
    {"agent_id": ""},
    {"agent_id": 5},
    {"agent_id": "a" * 201},
    {"timestamp": "yesterday"},
    {"timestamp": "2026-01-31T12:00:00Z\n"},
    {"extra": 1},
]


@pytest.mark.parametrize("change", BAD_CASES, ids=[json.dumps(c)[:40] for c in BAD_CASES])
def test_all_three_reject_the_same_bad_verdicts(change: dict) -> None:
    assert _verdicts_of_all_three(VALID | change) == (False, False, False)


@pytest.mark.parametrize("missing", verdict_files.REQUIRED_FIELDS)
def test_all_three_require_the_same_fields(missing: str) -> None:
    value = {k: v for k, v in VALID.items() if k != missing}
    assert _verdicts_of_all_three(value) == (False, False, False)


@pytest.mark.parametrize("optional", [k for k in verdict_files.FIELDS
                                      if k not in verdict_files.REQUIRED_FIELDS])
def test_all_three_default_the_same_fields(optional: str) -> None:
    value = {k: v for k, v in VALID.items() if k != optional}
    assert _verdicts_of_all_three(value) == (True, True, True)
    assert Verdict.model_validate(value).model_dump()[optional] == verdict_files.DEFAULTS[optional]


@settings(max_examples=200)
@given(st.fixed_dictionaries({}, optional={
    "type": st.sampled_from(["verdict", "implementation", "x"]),
    "status": st.sampled_from([*verdict_files.ALL_STATUSES, "OK"]),
    "summary": st.text(max_size=5), "agent": st.text(max_size=3),
    "tokens_spent": st.none() | st.integers(-2, 2),
    "agent_id": st.none() | st.text(max_size=2) | st.integers(0, 1),
    "files_changed": st.lists(st.text(max_size=2), max_size=2),
    "timestamp": st.sampled_from(["2026-01-31T12:00:00Z", "2026-01-31"]),
}))
def test_all_three_agree_on_random_verdicts(value: dict) -> None:
    results = _verdicts_of_all_three(value)
    assert len(set(results)) == 1, (value, results)


def test_what_the_library_builds_loads_into_the_model() -> None:
    built = verdict_files.build({"type": "implementation", "status": "PARTIAL", "summary": "half"},
                           agent="clavain:executor")
    assert Verdict.model_validate(built).model_dump() == built
