"""What a runner's output comes to, on the real `claude -p` captures in tests/fixtures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clavain.supervisor.outcome import interpret
from clavain.supervisor.process import ProcessOutcome

CAPTURES = Path(__file__).resolve().parents[1] / "fixtures" / "claude_output"


def _process(stdout: str, exit_code: int | None = 0, **flags: bool) -> ProcessOutcome:
    return ProcessOutcome(exit_code, flags.get("timed_out", False), flags.get("stopped", False),
                          1.0, stdout, "", Path("/tmp/out.log"), Path("/tmp/err.log"))


def _capture(name: str, **changes: object) -> str:
    data = json.loads((CAPTURES / name).read_text())
    data.update(changes)
    return json.dumps(data)


def test_a_claude_answer_with_a_result_block_is_recorded_with_its_usage() -> None:
    stdout = _capture("success.json", result='Done.\n<result>{"status": "success", '
                                             '"summary": "wrote it"}</result>')
    outcome = interpret("claude", _process(stdout), 60)
    assert outcome.kind == "result" and outcome.result["status"] == "success"
    assert outcome.tokens > 0 and outcome.cost_usd > 0


def test_an_answer_without_a_result_block_fails_with_the_reason() -> None:
    outcome = interpret("claude", _process(_capture("success.json")), 60)
    assert outcome.result["status"] == "fail"
    assert "no valid <result> block" in outcome.result["summary"]
    assert outcome.tokens > 0  # what it cost still counts


def test_max_turns_names_the_hosts_reason() -> None:
    outcome = interpret("claude", _process(_capture("max_turns.json"), 1), 60)
    assert outcome.result["status"] == "fail"
    assert "error_max_turns" in outcome.result["summary"]


@pytest.mark.parametrize("name", ["rate_limited_429.json", "usage_limit_5h.json",
                                  "overloaded_529.json", "server_error_500.json"])
def test_limits_and_outages_give_the_node_back_instead_of_failing_it(name: str) -> None:
    outcome = interpret("claude", _process(_capture(name), 1), 60)
    assert outcome.kind == "rate_limited", outcome
    assert outcome.result is None


def test_a_usage_limit_carries_its_reset_time() -> None:
    outcome = interpret("claude", _process(_capture("usage_limit_5h.json"), 1), 60)
    assert outcome.reset_at is not None


def test_timeouts_and_stops() -> None:
    timed_out = interpret("claude", _process("", None, timed_out=True), 5)
    assert timed_out.result["status"] == "fail" and "timed out after 5s" in \
        timed_out.result["summary"]
    assert interpret("claude", _process("", None, stopped=True), 5).kind == "stopped"


def test_garbage_from_claude_is_a_failed_attempt_not_a_crash() -> None:
    for junk in ("", "{\"type\": \"result\", \"resu", "\x00\xff not json", "[1, 2]"):
        outcome = interpret("claude", _process(junk, 1), 60)
        assert outcome.kind == "result" and outcome.result["status"] == "fail", junk


def test_a_runner_stopped_at_its_budget_share_goes_back_with_its_usage() -> None:
    """The real binary's `--max-budget-usd` ending (captured on 2.1.330): not the node's
    failure — it goes back unspent, and what it spent (past its share: the host checks after
    each response) is counted."""
    stdout = (CAPTURES / "max_budget_usd.json").read_text()
    for runner in ("claude", "stand-in"):  # a configured runner printing claude's report too
        outcome = interpret(runner, _process(stdout, 1), 60)
        assert outcome.kind == "over_share" and outcome.result is None
        assert outcome.cost_usd == pytest.approx(0.050308) and outcome.tokens > 0
        assert outcome.reported and "Reached maximum budget ($0.001)" in outcome.note


def test_a_runner_that_ended_without_a_report_did_not_report_its_usage() -> None:
    assert not interpret("claude", _process("", None, stopped=True), 60).reported
    assert not interpret("claude", _process("killed mid-wr", -9), 60).reported
    assert not interpret("stand-in", _process("", -9), 60).reported
    assert interpret("stand-in", _process("<result>{}</result>", 0), 60).reported
