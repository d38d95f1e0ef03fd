"""Budget arithmetic per profile × scope with config and env overrides (bad values named, never
a crash), and pricing with both cache-write rates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clavain.guards import policy, pricing
from clavain.guards.usage import usage_cost


@pytest.mark.parametrize(("profile", "scope", "expected"), [
    ("strict", "large", (60, 10, 30)),   # the seed's figures
    ("yolo", "tiny", (20, 2, 10)),
    ("strict", "tiny", (30, 5, 15)),
    ("smoke", "medium", (15, 2, 8)),
])
def test_profile_and_scope_set_the_defaults(profile, scope, expected) -> None:
    limits, problems = policy.resolve({"profile": profile, "scope": scope}, {})
    assert (limits["maxCommands"], limits["maxTestRuns"], limits["maxWebRequests"]) == expected
    assert problems == []


def test_every_profile_is_at_most_as_generous_as_strict() -> None:
    for scope in policy.SCOPES:
        strict = policy.LIMITS[("strict", scope)]
        for profile in ("yolo", "smoke"):
            assert all(a <= b for a, b in zip(policy.LIMITS[(profile, scope)], strict,
                                              strict=True))
    for profile in policy.PROFILES:  # a bigger job gets more room
        rows = [policy.LIMITS[(profile, scope)] for scope in policy.SCOPES]
        assert rows == sorted(rows)


@pytest.mark.parametrize(("complexity", "scope"), [(1, "tiny"), (2, "tiny"), (3, "medium"),
                                                    (4, "large"), (5, "large")])
def test_the_sprints_complexity_sets_the_scope(complexity: int, scope: str) -> None:
    limits, _ = policy.resolve({"scope": "tiny"}, {}, complexity)
    assert limits["scope"] == scope


def test_no_sprint_and_no_setting_is_strict_medium() -> None:
    limits, problems = policy.resolve(None, {})
    assert (limits["profile"], limits["scope"], limits["maxCommands"]) == ("strict", "medium", 45)
    assert limits["enabled"] and limits["maxPatchRepeats"] == 2 and problems == []


def test_env_beats_config_beats_defaults() -> None:
    settings = {"maxCommands": 7, "maxCostUsd": 2.5, "profile": "yolo"}
    limits, _ = policy.resolve(settings, {})
    assert (limits["maxCommands"], limits["maxCostUsd"], limits["profile"]) == (7, 2.5, "yolo")
    env = {"CLAVAIN_BUDGET_MAX_COMMANDS": "3", "CLAVAIN_BUDGET_MAX_COST_USD": "0.5",
           "CLAVAIN_BUDGET_PROFILE": "smoke", "CLAVAIN_BUDGET_MAX_TOKENS": "1000",
           "CLAVAIN_BUDGET_MAX_TEST_RUNS": "1", "CLAVAIN_BUDGET_MAX_WEB_REQUESTS": "0"}
    limits, problems = policy.resolve(settings, env)
    assert (limits["maxCommands"], limits["maxCostUsd"], limits["profile"], limits["maxTokens"],
            limits["maxTestRuns"], limits["maxWebRequests"]) == (3, 0.5, "smoke", 1000, 1, 0)
    assert problems == []


@pytest.mark.parametrize(("settings", "env", "named"), [
    ({"profile": "reckless"}, {}, "budget profile \"reckless\""),
    ({"scope": "huge"}, {}, "budget scope \"huge\""),
    ({"maxCommands": -1}, {}, "maxCommands -1"),
    ({"maxCommands": 2.5}, {}, "maxCommands 2.5"),
    ({"maxCommands": True}, {}, "maxCommands true"),  # JSON as written, not Python
    ({}, {"CLAVAIN_BUDGET_MAX_COMMANDS": "lots"}, "maxCommands \"lots\""),
    ({}, {"CLAVAIN_BUDGET_MAX_COST_USD": "nan"}, "maxCostUsd \"nan\""),
    ({"maxPatchRepeats": "x"}, {}, "maxPatchRepeats \"x\""),
    ({"maxCommands": 10 ** 400}, {}, "maxCommands 1000"),
    ({"maxCommands": "3"}, {}, "maxCommands \"3\" is not a whole number"),
    ({"maxComands": 3}, {}, "did you mean maxCommands?"),
    ({"profile": None}, {}, "budget profile null"),
    ({"scope": ""}, {}, "budget scope \"\""),
    ({"testPatterns": "pytest"}, {}, "budget testPatterns \"pytest\""),
    ({}, {"CLAVAIN_BUDGET_PROFILE": "fast"}, "budget profile \"fast\" (CLAVAIN_BUDGET_PROFILE)"),
    ({"enabled": "no"}, {}, "budgets enabled \"no\" is not true or false"),
])
def test_a_bad_value_is_named_and_its_default_used(settings, env, named) -> None:
    limits, problems = policy.resolve(settings, env)
    assert len(problems) == 1 and named in problems[0]
    assert limits["profile"] in policy.PROFILES and limits["maxCommands"] >= 0
    assert limits["maxPatchRepeats"] >= 0


def test_enabled_false_and_odd_settings() -> None:
    assert policy.resolve({"enabled": False}, {})[0]["enabled"] is False
    assert policy.resolve({"testPatterns": "pytest"}, {})[0]["testPatterns"] == []
    assert policy.resolve({"testPatterns": ["a", 1]}, {})[0]["testPatterns"] == ["a"]
    assert policy.resolve("not a dict", {})[1] == []


def test_prices_both_cache_write_rates() -> None:
    one_million = 1_000_000
    cost = pricing.cost_usd("claude-sonnet-4-5-20250929", input_tokens=one_million,
                            output_tokens=one_million, cache_write_5m=one_million,
                            cache_write_1h=one_million, cache_read=one_million)
    assert cost == pytest.approx(3 + 15 + 3.75 + 6 + 0.30)
    for model, (price_in, _, write_5m, write_1h, read) in pricing.PRICES.items():
        if model == "claude-3-haiku":  # the official table lists $0.30, not 1.25 x $0.25
            continue
        assert write_5m == pytest.approx(1.25 * price_in)
        assert write_1h == pytest.approx(2 * price_in)
        assert read < price_in


@pytest.mark.parametrize(("model", "row"), [
    ("claude-opus-4-1-20250805", "claude-opus-4-1"),
    ("claude-opus-4-20250514", "claude-opus-4"),
    ("claude-opus-4-0", "claude-opus-4-0"),
    ("claude-opus-4-5-20251101", "claude-opus-4-5"),  # the longest id wins
    ("claude-opus-4-6[1m]", "claude-opus-4-6"),
    ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5"),  # Bedrock
    ("claude-sonnet-4-5@20250929", "claude-sonnet-4-5"),  # Vertex
    ("claude-3-5-sonnet-20241022", "claude-3-5-sonnet"),
    ("claude-3-7-sonnet-latest", "claude-3-7-sonnet"),
    ("claude-haiku-4-5-20251001", "claude-haiku-4-5"),
    ("claude-sonnet-5-5", "claude-sonnet-5-5"),
    ("claude-fable-5-1", "claude-fable-5-1"),
])
def test_a_known_model_is_priced_at_its_own_row(model: str, row: str) -> None:
    assert pricing.priced_as(model) == (row, None)


@pytest.mark.parametrize(("model", "row"), [
    ("claude-opus-4-9", "claude-opus-5-5"),  # another version is not Opus 4
    ("claude-opus-9-0", "claude-opus-5-5"),
    ("claude-sonnet-45", "claude-sonnet-5-5"),
    ("claude-haiku-6", "claude-haiku-5-5"),
    ("claude-fable-5-2", "claude-fable-5-1"),
    ("some-new-model", "claude-opus-4-1"),  # no family: the dearest row ($15 / $75)
    ("", "claude-opus-4-1"),
])
def test_an_unknown_model_follows_the_documented_rule_and_says_so(model: str, row: str) -> None:
    priced, note = pricing.priced_as(model)
    assert priced == row and pricing.rates(model) == pricing.PRICES[row]
    assert note is not None and note.startswith(f"priced as {row}: unknown model ")


def test_every_row_names_its_source_and_the_fallbacks_are_rows() -> None:
    assert set(pricing.SOURCES) == set(pricing.PRICES) == set(pricing.ROWS)
    for model, source in pricing.SOURCES.items():
        assert source.startswith(("https://platform.claude.com/docs/",
                                  "https://docs.anthropic.com/")), model
    assert set(pricing.FAMILY.values()) <= set(pricing.PRICES)
    assert pricing.PRICES[pricing.FALLBACK][:2] == (15.0, 75.0)
    assert all(pricing.PRICES[pricing.FALLBACK][:2] >= row[:2]
               for row in pricing.PRICES.values())
    for family, row in pricing.FAMILY.items():
        assert family in row
    doc = pricing.__doc__ or ""
    assert "unknown model" in doc and "dearest row" in doc and "newest row" in doc


def _assistant(message_id: str, model: str, **usage: object) -> str:
    return json.dumps({"type": "assistant", "requestId": f"req-{message_id}", "message": {
        "id": message_id, "model": model, "usage": usage}})


def test_session_cost_prices_the_1h_share_of_cache_writes_apart(tmp_path: Path) -> None:
    transcript = tmp_path / "s.jsonl"
    line = _assistant("m1", "claude-sonnet-4-5", input_tokens=1000, output_tokens=500,
                      cache_creation_input_tokens=4000, cache_read_input_tokens=10000,
                      cache_creation={"ephemeral_5m_input_tokens": 1000,
                                      "ephemeral_1h_input_tokens": 3000})
    transcript.write_text(line + "\n" + line + "\n")  # one line per content block: counted once
    agent = tmp_path / "s" / "subagents" / "agent-a.jsonl"
    agent.parent.mkdir(parents=True)
    agent.write_text(_assistant("m2", "claude-haiku-4-5", input_tokens=100, output_tokens=10,
                                cache_creation_input_tokens=0, cache_read_input_tokens=0) + "\n")
    tokens, dollars, per_model = usage_cost([transcript])
    assert tokens == 15500 + 110
    sonnet = (1000 * 3 + 500 * 15 + 1000 * 3.75 + 3000 * 6 + 10000 * 0.30) / 1e6
    haiku = (100 * 1 + 10 * 5) / 1e6
    assert dollars == pytest.approx(sonnet + haiku)
    assert per_model["claude-sonnet-4-5"]["cache_write_1h_tokens"] == 3000
    assert per_model["claude-sonnet-4-5"]["cache_write_5m_tokens"] == 1000
    # Priced as if every write were a 5-minute one, the session would look cheaper.
    flat = (1000 * 3 + 500 * 15 + 4000 * 3.75 + 10000 * 0.30) / 1e6
    assert flat < sonnet


def _stamped(message_id: str, stamp: str, tokens: int) -> str:
    return json.dumps({"type": "assistant", "requestId": f"r-{message_id}", "timestamp": stamp,
                       "message": {"id": message_id, "model": "claude-sonnet-4-5", "usage": {
                           "input_tokens": tokens, "output_tokens": 0,
                           "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}})


def test_a_run_is_charged_from_its_start_across_its_sessions(tmp_path: Path) -> None:
    """What a session spent before a sprint is not the sprint's; a response copied into a
    resumed session's transcript counts once; a reset starts from zero."""
    from clavain.guards import report, usage
    from clavain.store import db

    first, second = tmp_path / "s1.jsonl", tmp_path / "s2.jsonl"
    first.write_text(_stamped("old", "2026-11-23T10:00:00.000Z", 5000) + "\n"
                     + _stamped("m1", "2026-11-23T12:00:30.000Z", 100) + "\n")
    second.write_text(_stamped("m1", "2026-11-23T12:00:30.000Z", 100) + "\n"  # copied
                      + _stamped("m2", "2026-11-23T12:05:00.000Z", 10) + "\n")
    conn = db.connect(tmp_path / "state.sqlite")
    conn.execute("INSERT INTO budget_runs (run_key, started_at, updated_at) VALUES "
                 "('sprint:x', '2026-11-23T12:01:00.000Z', '2026-11-23T12:01:00.000Z')")
    usage.measure(conn, run_key="sprint:x", transcript=str(first))
    usage.measure(conn, run_key="sprint:x", transcript=str(second))
    row = conn.execute("SELECT tokens FROM budget_runs").fetchone()
    assert row["tokens"] == 110  # not the 5,000 before the sprint, m1 once
    assert report.reset(conn, "sprint:x", {"by": "person", "via": "test"}) == 0
    assert conn.execute("SELECT count(*) FROM budget_usage").fetchone()[0] == 0
