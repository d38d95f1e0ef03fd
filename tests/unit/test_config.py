import json
import math
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clavain import config, schema_check
from clavain.errors import ClavainError
from clavain.models import config as config_model


def test_defaults_when_no_file(tmp_path: Path) -> None:
    cfg = config.load(tmp_path / "config.json")
    assert config.get(cfg, "defaults.verifyRunner") == "shellVerify"


def test_user_file_merges_deeply(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"defaults": {"maxAttempts": 5}, "runners": {"codex": {"command": "x"}}}')
    cfg = config.load(path)
    assert config.get(cfg, "defaults.maxAttempts") == 5
    assert config.get(cfg, "defaults.verifyRunner") == "shellVerify"
    assert config.get(cfg, "runners.codex.command") == "x"
    assert config.get(cfg, "runners.nope.command", "fallback") == "fallback"
    # Loading never mutates the shared defaults.
    assert config.get(config.DEFAULTS, "defaults.maxAttempts") == 3


@pytest.mark.parametrize(("text", "message"), [
    ("{not json", r"config\.json: not valid JSON"),
    ("[1, 2]", r"config\.json: \(top level\): \[1, 2\] \(expected an object\)"),
    ('{"defaults": 5}', r"config\.json: defaults: 5 \(expected an object\)"),
    ('{"defaults": {"maxAttempts": "abc"}}',
     r'defaults\.maxAttempts: "abc" \(expected a whole number from 1 to 100\)'),
    ('{"defaults": {"maxAttempts": 0}}',
     r"defaults\.maxAttempts: 0 \(expected a whole number from 1 to 100\)"),
    ('{"defaults": {"lockLeaseSeconds": -1}}',
     r"defaults\.lockLeaseSeconds: -1 \(expected a number above 0\)"),
    ('{"defaults": {"maxAttemps": 5}}',
     r"defaults\.maxAttemps: not a known key \(did you mean maxAttempts\?\)"),
    ('{"runners": {"codex": {}}}', r'runners\.codex: the key "command" is missing'),
    ('{"defaults": {"snapshotMaxLagSeconds": NaN}}',
     r"defaults\.snapshotMaxLagSeconds: not a finite number"),
    # JSON's value as written, never Python's (`True`).
    ('\ufeff{"defaults": {"maxAttempts": true}}',
     r"defaults\.maxAttempts: true \(expected a whole number"),
    ('{"store": {"url": "postgress://db"}}',
     r'store\.url: "postgress://db" \(expected a URL starting postgres:// or postgresql://'),
    ('{"supervisor": {"claude": {"allowedTools": [3]}}}',
     r"supervisor\.claude\.allowedTools\[0\]: 3 \(expected text\)"),
])
def test_a_bad_file_is_one_line_naming_the_path_and_what_is_allowed(
        tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ClavainError, match=message) as raised:
        config.load(path)
    assert "\n" not in str(raised.value)


def test_every_problem_of_a_bad_file_is_named_at_once(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"budgets": {"maxTestRuns": true, "maxCommands": "x"}, "store": {"url": '
                    '"postgress://x"}, "defaults": {"maxAttempts": -1, "nope": 1}}')
    with pytest.raises(ClavainError) as raised:
        config.load(path)
    first, *rest = str(raised.value).splitlines()
    assert first == f"{path}: 5 problems:"
    assert [line.split(":")[0].strip() for line in rest] == [
        "budgets.maxCommands", "budgets.maxTestRuns", "defaults.maxAttempts", "defaults.nope",
        "store.url"]
    assert "^postgres" not in str(raised.value)  # a person never reads a regular expression


def test_the_model_the_schemas_and_the_defaults_agree() -> None:
    text = config_model.render_schema()
    assert config_model.REPO_SCHEMA.read_text() == text, (
        "schemas/config.schema.json is stale: python -m clavain.models.config")
    assert Path(schema_check.SCHEMAS_DIR, "config.schema.json").read_text() == text
    assert config_model.Config().model_dump(by_alias=True) == config.DEFAULTS


_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 200) | st.floats(allow_nan=False,
                                                                   allow_infinity=False)
    | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                max_size=3),
    max_leaves=6)
_keys = st.sampled_from([*config.DEFAULTS["defaults"], "bogus"])
_configs = st.fixed_dictionaries({}, optional={
    "defaults": st.dictionaries(_keys, _values | st.integers(-2, 200), max_size=4),
    "runners": st.dictionaries(st.sampled_from(["a", "b"]), st.fixed_dictionaries(
        {}, optional={"command": _values, "timeoutSeconds": _values, "x": _values}),
        max_size=2),
    "extra": _values})


@settings(max_examples=300, deadline=None)
@given(user=_configs | _values)
def test_the_stdlib_checker_agrees_with_jsonschema(user) -> None:
    schema = json.loads(Path(schema_check.SCHEMAS_DIR, "config.schema.json").read_text())
    by_jsonschema = jsonschema.Draft202012Validator(schema).is_valid(user)
    assert schema_check.valid(user, schema, schema) == by_jsonschema


def test_non_finite_numbers_are_refused_although_jsonschema_takes_them() -> None:
    schema = json.loads(Path(schema_check.SCHEMAS_DIR, "config.schema.json").read_text())
    assert not schema_check.valid({"defaults": {"retryBackoffSeconds": math.inf}}, schema, schema)
