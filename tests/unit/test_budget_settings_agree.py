"""The budgets reader (`policy.resolve`, stdlib, on every tool call) and the config schema (the
pydantic model, and the JSON Schema generated from it that `clavain.config` and `doctor`
check) accept and refuse exactly the same `budgets` values; a misspelled key is named with the
setting it is closest to."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from clavain import schema_check
from clavain.guards import policy
from clavain.models.config import Budgets, Config

NUMBERS = [0, 3, 3.0, 2.5, -1, -0.5, "3", "3.0", "", True, False, None, 10 ** 12, 10 ** 12 + 1,
           1e12, 1.5e12, 10 ** 400, 1e308, math.inf, -math.inf, math.nan, [], {}, [3]]
VALUES = {
    **{key: NUMBERS for key in (*policy.LIMIT_KEYS, "maxPatchRepeats", *policy.AGENT_CAPS,
                                *policy.AGENT_PROJECTION, policy.WINDOW_SHARE)},
    policy.WINDOW_SHARE: [*NUMBERS, 100, 100.5, 80, 79.5],
    "enabled": [True, False, None, 0, 1, "true", "false", "no"],
    "profile": [*policy.PROFILES, None, "", "Strict", "reckless", 1, True],
    "scope": [*policy.SCOPES, None, "", "huge", 2, False],
    "testPatterns": [[], ["pytest"], ["a", "b"], "pytest", [1], ["a", None], None, {}],
}


def _reader_accepts(budgets: dict) -> bool:
    return policy.resolve(budgets, {})[1] == []


def _model_accepts(budgets: dict) -> bool:
    try:
        Budgets.model_validate(budgets)
    except ValidationError:
        return False
    return True


def _schema_accepts(budgets: dict) -> bool:
    return schema_check.check({"budgets": budgets}, "config.schema.json", "config.json") is None


def _verdicts(budgets: dict) -> tuple[bool, bool, bool]:
    return _reader_accepts(budgets), _model_accepts(budgets), _schema_accepts(budgets)


@pytest.mark.parametrize(("key", "value"),
                         [(key, value) for key, values in VALUES.items() for value in values],
                         ids=repr)
def test_the_reader_and_the_schema_agree_on_every_value(key: str, value: object) -> None:
    reader, model, schema = _verdicts({key: value})
    assert reader == model == schema, (key, value, reader, model, schema)


@pytest.mark.parametrize(("key", "value", "accepted"), [
    ("maxCommands", 3, True), ("maxCommands", 3.0, True), ("maxCommands", "3", False),
    ("maxCommands", 2.5, False), ("maxCommands", True, False), ("maxCommands", -1, False),
    ("maxCommands", 10 ** 12, True), ("maxCommands", 10 ** 12 + 1, False),
    ("maxCostUsd", 2.5, True), ("maxCostUsd", 2, True), ("maxCostUsd", "2.5", False),
    ("maxCostUsd", math.nan, False), ("maxCostUsd", math.inf, False),
    ("maxPatchRepeats", None, False), ("maxTokens", None, True), ("profile", None, False),
    ("scope", None, True), ("enabled", 1, False), ("testPatterns", [1], False),
])
def test_the_one_rule(key: str, value: object, accepted: bool) -> None:
    """Limits are JSON numbers (whole ones but dollars; 3.0 is whole, as in JSON Schema) from
    0 to a trillion; never text nor true/false; null only where it means "the default"."""
    assert _verdicts({key: value}) == (accepted, accepted, accepted)


@settings(max_examples=300, deadline=None)
@given(key=st.sampled_from([*policy.LIMIT_KEYS, "maxPatchRepeats", *policy.AGENT_CAPS,
                            *policy.AGENT_PROJECTION, policy.WINDOW_SHARE]),
       value=st.one_of(st.integers(min_value=-10 ** 14, max_value=10 ** 14),
                       st.floats(allow_nan=True, allow_infinity=True),
                       st.text(max_size=8), st.booleans(), st.none()))
def test_agreement_holds_for_any_number(key: str, value: object) -> None:
    reader, model, schema = _verdicts({key: value})
    assert reader == model == schema, (key, value, reader, model, schema)


@pytest.mark.parametrize(("key", "suggestion"), [
    ("maxComands", "maxCommands"), ("maxcommands", "maxCommands"),
    ("maxTestRun", "maxTestRuns"), ("maxCostUSD", "maxCostUsd"), ("enable", "enabled"),
    ("testPattern", "testPatterns"), ("profil", "profile"),
])
def test_a_misspelled_key_is_refused_by_both_and_named_with_its_closest(key: str,
                                                                        suggestion: str) -> None:
    limits, problems = policy.resolve({key: 3}, {})
    assert problems == [f"budgets key \"{key}\" is not a budget setting (did you mean "
                        f"{suggestion}?); ignored"]
    assert limits["maxCommands"] == 45  # the default, as if the key were not there
    assert not _model_accepts({key: 3}) and not _schema_accepts({key: 3})


def test_an_unknown_key_nothing_resembles_lists_the_known_ones() -> None:
    problems = policy.resolve({"colour": "blue"}, {})[1]
    assert problems == ['budgets key "colour" is not a budget setting (known: '
                        + ", ".join(policy.SETTINGS) + "); ignored"]


def test_the_reader_knows_every_key_of_the_model_and_no_other() -> None:
    assert set(policy.SETTINGS) == set(Budgets.model_fields)
    bounds = Config.model_json_schema()["$defs"]["Budgets"]["properties"]["maxPatchRepeats"]
    assert bounds["maximum"] == policy.LIMIT_MAX


def test_a_bad_value_is_named_even_where_something_else_overrides_it() -> None:
    """A variable or the sprint's complexity winning does not hide a broken setting."""
    limits, problems = policy.resolve({"maxCommands": "7", "scope": "huge"},
                                      {"CLAVAIN_BUDGET_MAX_COMMANDS": "9"}, 4)
    assert (limits["maxCommands"], limits["scope"]) == (9, "large")
    assert any('maxCommands "7"' in p for p in problems)
    assert any('scope "huge"' in p for p in problems)


@pytest.mark.parametrize(("variable", "text", "value"), [
    ("CLAVAIN_BUDGET_MAX_COMMANDS", "12", 12), ("CLAVAIN_BUDGET_MAX_COMMANDS", " 12 ", 12),
    ("CLAVAIN_BUDGET_MAX_COMMANDS", "12.0", None), ("CLAVAIN_BUDGET_MAX_COMMANDS", "-1", None),
    ("CLAVAIN_BUDGET_MAX_COMMANDS", "1_000", None), ("CLAVAIN_BUDGET_MAX_COMMANDS", "٣", None),
    ("CLAVAIN_BUDGET_MAX_COMMANDS", "9" * 5000, None),
    ("CLAVAIN_BUDGET_MAX_COST_USD", "0.5", 0.5), ("CLAVAIN_BUDGET_MAX_COST_USD", "3", 3.0),
    ("CLAVAIN_BUDGET_MAX_COST_USD", "inf", None), ("CLAVAIN_BUDGET_MAX_COST_USD", "1e13", None),
    ("CLAVAIN_BUDGET_MAX_COST_USD", "1..2", None),
])
def test_variables_are_decimal_text(variable: str, text: str, value: object) -> None:
    key = next(k for k, name in policy.ENV.items() if name == variable)
    limits, problems = policy.resolve(None, {variable: text})
    if value is None:
        assert len(problems) == 1 and variable in problems[0] and key in problems[0]
    else:
        assert problems == [] and limits[key] == value


@pytest.mark.parametrize(("text", "named"), [
    ('{"budgets": null}', "budgets must be an object"),
    ('{"budgets": [1]}', "budgets must be an object"),
    ('[1]', "is not a JSON object"),
    ('{"budgets": {"maxComands": 5}}', "did you mean maxCommands?"),
    ('{"budgets": {"maxCostUsd": 1e999}}', "maxCostUsd Infinity"),
])
def test_the_hook_reads_the_file_as_the_schema_does(tmp_path, text: str, named: str) -> None:
    from clavain import config
    from clavain.errors import ClavainError
    from clavain.guards.counting import run_context

    (tmp_path / "config.json").write_text(text)
    problems = run_context(str(tmp_path), "s")["problems"]
    assert len(problems) == 1 and named in problems[0]
    with pytest.raises(ClavainError):
        config.load(tmp_path / "config.json")


def test_a_good_file_is_good_for_both(tmp_path) -> None:
    from clavain import config
    from clavain.guards.counting import run_context

    (tmp_path / "config.json").write_text(
        '{"budgets": {"maxCommands": 12.0, "maxCostUsd": 3, "scope": null, "profile": "yolo"}}')
    context = run_context(str(tmp_path), "s")
    assert context["problems"] == [] and context["limits"]["maxCommands"] == 12
    assert config.load(tmp_path / "config.json")["budgets"]["maxCommands"] == 12.0
