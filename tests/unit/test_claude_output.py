"""claude_output: real captures of `claude -p --output-format json` (2.1.330, a scripted API on
127.0.0.1, 2026-11-25 ~14:59 UTC, TZ=UTC except the verbose one in Europe/London) and a table
of the shapes a crashed or odd run can leave."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from clavain.supervisor import claude_output
from clavain.supervisor.claude_output import RATE_LIMIT, USAGE_LIMIT, parse

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "claude_output"
CAPTURED_AT = datetime(2026, 11, 25, 14, 59, 20, tzinfo=timezone.utc)
NOW = datetime(2026, 11, 25, 14, 0, tzinfo=timezone.utc)


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def result_json(**fields: object) -> str:
    base: dict[str, object] = {
        "type": "result", "subtype": "success", "is_error": False, "num_turns": 2,
        "result": "done", "session_id": "s-1", "total_cost_usd": 0.25,
        "usage": {"input_tokens": 100, "output_tokens": 20, "cache_creation_input_tokens": 3,
                  "cache_read_input_tokens": 4}}
    base.update(fields)
    return json.dumps({k: v for k, v in base.items() if v is not None})


# ---------------------------------------------------------------------------------------------
# Captured output


def test_captured_success():
    report = parse(fixture("success.json"), "", 0)
    assert report.problem is None and report.rate_limit is None
    assert (report.result_text, report.is_error, report.subtype) == ("OK.", False, "success")
    assert report.num_turns == 1
    assert report.session_id == "ac487266-0b63-4572-b81f-1ce574978a85"
    assert (report.input_tokens, report.output_tokens) == (12398, 8)
    assert report.tokens == 12406
    assert report.cost_usd == pytest.approx(0.049752)
    assert report.models == ("claude-opus-5-5",)
    assert not report.failed


def test_captured_max_turns():
    report = parse(fixture("max_turns.json"), "", 1)
    assert report.subtype == "error_max_turns" and report.is_error
    assert report.result_text == ""  # the host writes no `result` key for it
    assert report.errors == ("Reached maximum number of turns (1)",)
    assert report.num_turns == 2 and report.tokens == 12398 + 34
    assert report.rate_limit is None and report.problem is None


def test_captured_api_key_429_is_a_rate_limit_without_reset():
    report = parse(fixture("rate_limited_429.json"), "", 1, now=CAPTURED_AT)
    assert report.is_error and report.api_error_status == 429
    limit = report.rate_limit
    assert limit is not None and limit.source == "structured" and limit.kind == RATE_LIMIT
    assert limit.reset_at is None and limit.retry_after_seconds is None
    assert limit.message.startswith("API Error: Request rejected (429)")


def test_captured_usage_limit_within_a_day():
    report = parse(fixture("usage_limit_5h.json"), "", 1, now=CAPTURED_AT)
    limit = report.rate_limit
    assert report.api_error == "usage_limit_reached"
    assert limit is not None and limit.kind == USAGE_LIMIT
    assert limit.reset_at == datetime(2026, 11, 25, 15, 59, tzinfo=timezone.utc)
    assert limit.message == "You've hit your 5-hour limit · resets 3:59pm (UTC)"
    assert limit.wait_seconds(CAPTURED_AT) == pytest.approx(3580)


def test_captured_weekly_usage_limit_with_a_date():
    limit = parse(fixture("usage_limit_weekly.json"), "", 1, now=CAPTURED_AT).rate_limit
    assert limit is not None
    assert limit.reset_at == datetime(2026, 11, 27, 22, 32, tzinfo=timezone.utc)


def test_captured_verbose_array_carries_the_reset_epoch():
    report = parse(fixture("usage_limit_verbose.json"), "", 1, now=CAPTURED_AT)
    limit = report.rate_limit
    assert report.result_text.startswith("You've hit your 5-hour limit")
    assert limit is not None and limit.limit_type == "five_hour"
    assert limit.reset_at == datetime.fromtimestamp(1795622367, timezone.utc)


@pytest.mark.parametrize(("name", "status"), [("overloaded_529.json", 529),
                                              ("server_error_500.json", 500)])
def test_captured_server_errors_are_not_rate_limits(name: str, status: int):
    report = parse(fixture(name), "", 1, now=CAPTURED_AT)
    assert report.is_error and report.api_error_status == status
    assert report.rate_limit is None and report.problem is None
    assert "try again in a moment" in report.result_text


def test_as_dict_is_snake_case_json():
    data = parse(fixture("usage_limit_5h.json"), "", 1, now=CAPTURED_AT).as_dict()
    assert json.loads(json.dumps(data)) == data
    assert data["rate_limit"]["reset_at"] == "2026-11-25T15:59:00+00:00"
    assert {"result_text", "is_error", "subtype", "num_turns", "session_id", "input_tokens",
            "output_tokens", "cache_creation_tokens", "cache_read_tokens", "tokens",
            "cost_usd", "models", "rate_limit", "problem"} <= set(data)


# ---------------------------------------------------------------------------------------------
# The table


def test_success_fields():
    report = parse(result_json(), "", 0)
    assert (report.result_text, report.num_turns, report.session_id) == ("done", 2, "s-1")
    assert (report.input_tokens, report.output_tokens, report.cache_creation_tokens,
            report.cache_read_tokens, report.tokens) == (100, 20, 3, 4, 127)
    assert report.cost_usd == 0.25 and report.problem is None and report.rate_limit is None


def test_error_max_turns():
    report = parse(result_json(subtype="error_max_turns", is_error=True, result=None), "", 1)
    assert report.subtype == "error_max_turns" and report.is_error
    assert report.rate_limit is None and report.problem is None


def test_model_usage_counts_subagents_over_usage():
    stdout = result_json(modelUsage={
        "opus": {"inputTokens": 100, "outputTokens": 20, "cacheReadInputTokens": 4,
                 "cacheCreationInputTokens": 3},
        "haiku": {"inputTokens": 50, "outputTokens": 5}})
    report = parse(stdout, "", 0)
    assert report.models == ("opus", "haiku")
    assert report.tokens == 127 + 55


def test_garbage_lines_before_the_result():
    stdout = ("Warning: something odd\n{\"type\": \"system\", \"subtype\": \"init\"}\n"
              "{not json either\n" + result_json(result="after warnings") + "\n")
    report = parse(stdout, "", 0)
    assert report.problem is None and report.result_text == "after warnings"


def test_last_result_wins_in_stream_json():
    stdout = "\n".join([result_json(result="first"), '{"type": "assistant"}',
                        result_json(result="second")])
    assert parse(stdout, "", 0).result_text == "second"


def test_truncated_json():
    stdout = result_json()[:60]
    report = parse(stdout, "Killed\n", None)
    assert report.problem is not None and "truncated" in report.problem
    assert "stderr: 'Killed'" in report.problem and "killed?" in report.problem
    assert report.failed and report.rate_limit is None


def test_empty_stdout_quotes_stderr():
    report = parse("", "Error: something broke\n  at line 3\n", 1)
    assert report.problem is not None
    assert report.problem.startswith("claude printed nothing on stdout (exit 1)")
    assert "'Error: something broke at line 3'" in report.problem
    assert "\n" not in report.problem


def test_long_stderr_is_clipped():
    report = parse("", "x" * 5000, 1)
    assert report.problem is not None and len(report.problem) < 300


@pytest.mark.parametrize(("stdout", "kind"), [("[1, 2]", "list"), ('"hello"', "string"),
                                              ("42", "number"), ("null", "null")])
def test_non_object_json(stdout: str, kind: str):
    report = parse(stdout, "", 0)
    assert report.problem is not None and f"not an object (a {kind})" in report.problem


def test_plain_text_is_not_json():
    report = parse("hello there\n", "", 0)
    assert report.problem is not None and "not JSON" in report.problem
    assert "stdout: 'hello there'" in report.problem


def test_object_without_a_result_message():
    report = parse('{"type": "system", "subtype": "init"}\n{"type": "assistant"}\n', "", 1)
    assert report.problem is not None and "no result object" in report.problem


def test_replacement_characters_from_invalid_utf8():
    raw = (b'\xff\xfeboot noise\n'
           b'{"type": "result", "is_error": false, "result": "caf\xc3\xa9\xff"}\n')
    stdout = raw.decode("utf-8", errors="replace")
    report = parse(stdout, b"\xc3\x28 bad".decode("utf-8", errors="replace"), 0)
    assert report.problem is None and report.result_text == "caf\u00e9\ufffd"


def test_pure_binary_garbage_never_raises():
    stdout = bytes(range(256)).decode("utf-8", errors="replace") * 4
    report = parse(stdout, "\x00\x01", 3)
    assert report.problem is not None and report.failed


def test_no_cost_field():
    report = parse(result_json(total_cost_usd=None), "", 0)
    assert report.cost_usd == 0.0 and report.problem is None


def test_usage_missing():
    report = parse(result_json(usage=None), "", 0)
    assert report.tokens == 0 and report.problem is None


def test_wrong_types_in_fields_are_ignored():
    report = parse(result_json(num_turns="three", usage={"input_tokens": "many"},
                               total_cost_usd="free", is_error="yes"), "", 0)
    assert (report.num_turns, report.tokens, report.cost_usd, report.is_error) == (0, 0, 0.0,
                                                                                   False)


# ---------------------------------------------------------------------------------------------
# Rate limits


def test_structured_rate_limit_with_reset_epoch():
    stdout = "\n".join([
        json.dumps({"type": "rate_limit_event", "rate_limit_info": {
            "status": "rejected", "resetsAt": 1795622400, "rateLimitType": "seven_day"}}),
        result_json(is_error=True, api_error_status=429, api_error="usage_limit_reached",
                    result="You've hit your weekly limit")])
    limit = parse(stdout, "", 1, now=NOW).rate_limit
    assert limit is not None and limit.source == "structured" and limit.kind == USAGE_LIMIT
    assert limit.reset_at == datetime.fromtimestamp(1795622400, timezone.utc)
    assert limit.limit_type == "seven_day"


def test_rate_limit_event_in_milliseconds():
    stdout = "\n".join([
        json.dumps({"type": "assistant", "error": "rate_limit", "api_error_params": {
            "rate_limit_info": {"status": "rejected", "resetsAt": 1795622400000}}}),
        result_json(is_error=True, result="limited")])
    limit = parse(stdout, "", 1, now=NOW).rate_limit
    assert limit is not None
    assert limit.reset_at == datetime.fromtimestamp(1795622400, timezone.utc)


def test_allowed_rate_limit_event_on_a_successful_run_is_nothing():
    stdout = "\n".join([
        json.dumps({"type": "rate_limit_event", "rate_limit_info": {
            "status": "allowed_warning", "resetsAt": 1795622400}}),
        result_json(result="Rate limits explained: a 429 means too many requests.")])
    assert parse(stdout, "", 0).rate_limit is None


def test_successful_answer_about_rate_limits_is_not_a_limit():
    report = parse(result_json(result="You hit a rate limit? It resets at 3pm."), "", 0)
    assert report.rate_limit is None


@pytest.mark.parametrize(("text", "reset", "retry_after"), [
    ("Claude usage limit reached. Your limit resets at 3pm (UTC).",
     datetime(2026, 11, 25, 15, 0, tzinfo=timezone.utc), None),
    ("Rate limit exceeded, try again in 30 seconds", None, 30.0),
    ("429 Too Many Requests: try again in 2 minutes", None, 120.0),
    ("usage limit reached; reset at 2026-11-26T09:30:00Z", datetime(2026, 11, 26, 9, 30,
                                                                    tzinfo=timezone.utc), None),
    ("Claude AI usage limit reached|1795622400",
     datetime.fromtimestamp(1795622400, timezone.utc), None),
    ("You've hit your session limit · resets 1am (Europe/London)",
     datetime(2026, 11, 26, 1, 0, tzinfo=timezone.utc), None),
    ("You've hit your limit · resets 9am (America/New_York)",
     datetime(2026, 11, 25, 14, 0, tzinfo=timezone.utc), None),
    ("You've hit your weekly limit · resets Jan 3, 4pm (UTC)",
     datetime(2027, 1, 3, 16, 0, tzinfo=timezone.utc), None),
    ("rate limited (HTTP 429); retry-after: 7", None, 7.0),
])
def test_text_rate_limits_in_result(text: str, reset: datetime | None,
                                    retry_after: float | None):
    report = parse(result_json(is_error=True, result=text), "", 1, now=NOW)
    limit = report.rate_limit
    assert limit is not None and limit.source == "text"
    assert limit.reset_at == reset
    assert limit.retry_after_seconds == retry_after


def test_clock_time_just_past_is_now_not_tomorrow():
    report = parse(result_json(is_error=True, result="usage limit · resets 1:58pm (UTC)"),
                   "", 1, now=NOW)
    assert report.rate_limit is not None
    assert report.rate_limit.reset_at == NOW - timedelta(minutes=2)


def test_clock_time_earlier_today_means_tomorrow():
    report = parse(result_json(is_error=True, result="usage limit · resets 9am (UTC)"),
                   "", 1, now=NOW)
    assert report.rate_limit is not None
    assert report.rate_limit.reset_at == datetime(2026, 11, 26, 9, 0, tzinfo=timezone.utc)


def test_text_rate_limit_on_stderr_with_no_json():
    report = parse("", "Error: 429 rate limit reached, try again in 45 seconds\n", 1, now=NOW)
    assert report.problem is not None
    assert report.rate_limit is not None and report.rate_limit.retry_after_seconds == 45.0
    assert report.rate_limit.kind == RATE_LIMIT


def test_text_rate_limit_in_a_plain_runner_output():
    report = parse("working…\nAPI Error: Request rejected (429)\n", "", 1, now=NOW)
    assert report.rate_limit is not None
    assert report.rate_limit.message == "API Error: Request rejected (429)"


def test_other_numbers_429_are_not_limits():
    report = parse(result_json(is_error=True, result="processed 429 files then failed"),
                   "", 1)
    assert report.rate_limit is None


def test_ordinary_failure_is_not_a_limit():
    report = parse("", "Traceback: ValueError\n", 1)
    assert report.rate_limit is None and report.problem is not None


def test_wait_seconds_prefers_the_reset():
    limit = claude_output.RateLimit(NOW + timedelta(minutes=10), 5.0, "x")
    assert limit.wait_seconds(NOW) == 600
    assert claude_output.RateLimit(None, 5.0, "x").wait_seconds(NOW) == 5.0
    assert claude_output.RateLimit(NOW - timedelta(hours=1), None, "x").wait_seconds(NOW) == 0
