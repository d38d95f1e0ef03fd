"""What one runner call came to: a result to record, a rate limit to wait out, or a stop.

The runner's result is the last `<result>{…}</result>` of its output — for `claude`, of the JSON
report's `result` text — parsed by the workgraph's strict model. A missing or invalid block is a
failed attempt whose reason lands in `err.summary` (retry and escalation as usual), so is a
runner past its timeout or one that exited without a result. A usage or rate limit the runner
reports is not the node's failure: the node goes back unspent and the run waits for the reset.
A runner stopped at its budget share (`claude --max-budget-usd`, `error_max_budget_usd`) is not
the node's failure either: it goes back unspent, its usage counted (`over_share`).

A configured runner that prints claude's JSON report (a wrapper around claude, a stand-in) is
read as claude's, so its usage counts; one that prints only text reports no usage.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from clavain.errors import ClavainError
from clavain.supervisor import claude_output
from clavain.supervisor.process import ProcessOutcome
from clavain.supervisor.routes import CLAUDE
from clavain.workgraph.results import parse_result

STDERR_SHOWN = 600
# API errors that say "not now" rather than "this node failed": waited out like a rate limit.
UNAVAILABLE_STATUSES = frozenset({500, 502, 503, 504, 529})
UNAVAILABLE_WAIT_SECONDS = 60.0


@dataclass
class Outcome:
    # "result" | "rate_limited" | "stopped" | "unusable" (the runner cannot work) |
    # "over_share" (stopped at its budget share)
    kind: str
    result: dict[str, Any] | None = None
    tokens: int = 0
    cost_usd: float = 0.0
    reset_at: datetime | None = None
    retry_after_seconds: float | None = None
    note: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    # Whether the runner said what it spent (False: stopped, timed out, crashed, no report);
    # its reservation is then charged until its transcript is measured (`run_reserve`).
    reported: bool = True


MIN_LIMIT_WAIT_SECONDS = 5.0
# Limits in a row after which a run stops instead of waiting again (with the doubling floor
# and an hour's cap that is most of a day): a limit that never lifts needs a person.
MAX_LIMITS_IN_A_ROW = 12
DEFAULT_LIMIT_WAIT_SECONDS = 60.0


def limit_wait_seconds(reset_at: datetime | None, retry_after: float | None, *, now: float,
                       in_a_row: int, cap: float) -> float:
    """How long to wait out a rate or usage limit: until the reset it was given (else its
    retry-after, else a minute), never less than a floor that doubles with each limit in a row
    (a reset already past must not become a busy loop), never more than `cap`."""
    floor = min(cap, MIN_LIMIT_WAIT_SECONDS * 2 ** max(0, in_a_row - 1))
    if reset_at is not None:
        seconds = reset_at.timestamp() - now
    elif retry_after is not None:
        seconds = retry_after
    else:
        seconds = DEFAULT_LIMIT_WAIT_SECONDS
    return min(max(seconds, floor), cap)


def failure(summary: str, *errors: str) -> dict[str, Any]:
    return {"status": "fail", "summary": summary[:2000], "errors": [e for e in errors if e]}


def _stderr_tail(process: ProcessOutcome) -> str:
    text = process.stderr.strip()
    return text[-STDERR_SHOWN:] if text else ""


def _result_from_text(text: str, who: str, process: ProcessOutcome) -> dict[str, Any]:
    try:
        return parse_result(text).model_dump(exclude_none=True)
    except ClavainError as exc:
        how = "" if process.exit_code in (0, None) else f" (exit {process.exit_code})"
        return failure(f"{who} gave no valid <result> block{how}: {exc}",
                       f"{exc} (output: {process.stdout_path})", _stderr_tail(process))


def interpret(runner: str, process: ProcessOutcome, timeout: float) -> Outcome:
    """The outcome of one finished runner process."""
    if process.stopped:
        return Outcome("stopped", note="stopped by the supervisor", reported=False)
    if process.timed_out:
        return Outcome("result", failure(
            f"runner {runner} timed out after {timeout:g}s and was killed",
            f"timed out after {timeout:g}s (output: {process.stdout_path})"), reported=False)
    if runner == CLAUDE or claude_output.is_report(process.stdout):
        return _from_claude(process)
    text = process.stdout
    # A plain-text runner says nothing of its spend; one killed by a signal never got to.
    outcome = Outcome("result", _result_from_text(text, f"runner {runner}", process),
                      reported=process.exit_code is not None and process.exit_code >= 0)
    if outcome.result and outcome.result["status"] == "fail" and "<result>" not in text:
        limited = claude_output.parse(process.stdout, process.stderr, process.exit_code)
        if limited.rate_limit is not None:
            return _rate_limited(limited)
    return outcome


def _rate_limited(report: Any) -> Outcome:
    limit = report.rate_limit
    return Outcome("rate_limited", tokens=report.tokens, cost_usd=report.cost_usd,
                   reset_at=limit.reset_at, retry_after_seconds=limit.retry_after_seconds,
                   note=limit.message or "rate limited", details=report.as_dict())


def api_unavailable(report: Any) -> claude_output.RateLimit | None:
    """An API outage (500/502/503/504/529) as a wait like a limit's: nobody's failure, for the
    supervisor and the loop alike."""
    if report.api_error_status not in UNAVAILABLE_STATUSES:
        return None
    return claude_output.RateLimit(
        None, UNAVAILABLE_WAIT_SECONDS,
        f"the API is unavailable ({report.api_error_status}): {report.result_text[:200]}")


def _from_claude(process: ProcessOutcome) -> Outcome:
    report = claude_output.parse(process.stdout, process.stderr, process.exit_code)
    if report.rate_limit is not None:
        return _rate_limited(report)
    details = report.as_dict()
    outage = api_unavailable(report)
    if outage is not None:
        return Outcome("rate_limited", tokens=report.tokens, cost_usd=report.cost_usd,
                       retry_after_seconds=outage.retry_after_seconds, details=details,
                       note=outage.message)
    usage = {"tokens": report.tokens, "cost_usd": report.cost_usd, "details": details}
    if report.over_budget and "<result>" not in report.result_text:
        limit = report.errors[0] if report.errors else "its budget share"
        return Outcome("over_share", note=f"stopped at its budget share ({limit}); given back "
                                          "unspent", **usage)
    if report.is_error and report.terminal_reason == "api_error" and \
            "<result>" not in report.result_text:
        # Not logged in, a bad key, a refused request: every node would fail the same way.
        return Outcome("unusable", note=f"claude could not use the API: "
                                        f"{report.result_text[:300] or report.api_error}",
                       **usage)
    if report.problem:
        return Outcome("result", failure(f"claude runner: {report.problem}",
                                         f"{report.problem} (output: {process.stdout_path})",
                                         _stderr_tail(process)), reported=False, **usage)
    result = _result_from_text(report.result_text, "claude", process)
    if result["status"] == "fail" and report.is_error:
        # The host's reason (error_max_turns, …) says more than "no result block".
        reason = (report.subtype if report.subtype not in ("", "success")
                  else report.terminal_reason or "an error")
        why = f"claude stopped with {reason} after {report.num_turns} turns"
        result = failure(f"{why}; {result['summary']}", why, *result.get("errors", []))
    return Outcome("result", result, **usage)
