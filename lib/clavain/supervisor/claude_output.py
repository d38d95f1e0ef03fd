"""What one `claude -p --output-format json` run reported, read without ever raising.

The supervisor has to tell three endings apart: a result to record, an ordinary failure (spends
an attempt) and a usage or rate limit (the node goes back unspent and the run waits for the
reset). Bad output is a `problem` line, never an exception: a runner that crashed mid-write must
still be recorded as a failed attempt.

Observed on the real 2.1.330 binary against a scripted API on 127.0.0.1 (captures in
tests/fixtures/claude_output/; stderr was empty and the exit code 1 in every error case):

- Any API error ends with `type: "result"`, `subtype: "success"` (sic), `is_error: true`,
  `terminal_reason: "api_error"`, `api_error_status` (429, 529, 500), `api_error_type`
  (`rate_limit_error`, `overloaded_error`, `api_error`) and the message in `result`, e.g.
  `API Error: Request rejected (429) · <server message>`. A plain API-key 429 carries no reset
  time anywhere in the output: `retry-after` and `anthropic-ratelimit-unified-*` headers are
  used for the binary's own retries and not reported.
- With a subscription login (OAuth) a 429 with `anthropic-ratelimit-unified-*` headers becomes
  `api_error: "usage_limit_reached"` and `result: "You've hit your 5-hour limit · resets
  3:59pm (UTC)"`; past 24 hours `resets Nov 27, 10:32pm (UTC)`. The zone is the process's (TZ).
  Only `--verbose` / stream-json output carries the reset as an epoch: a `rate_limit_event`
  and the assistant message's `api_error_params.rate_limit_info.resetsAt`.
- Retries: by default an API-key 429, a 529 and a 500 are retried 10 times (11 requests,
  180-205 s; backoff 0.5 s doubling to ~35 s, a 429's `retry-after: 7` honoured at first);
  `CLAUDE_CODE_MAX_RETRIES=0` stops that (exit within 0.5 s); `ANTHROPIC_MAX_RETRIES` does
  nothing. A usage-limit 429 is never retried.
- `--max-turns N` ends with `subtype: "error_max_turns"`, no `result` key and
  `errors: ["Reached maximum number of turns (N)"]`.
- `--max-budget-usd X` (only with -p) ends with `subtype: "error_max_budget_usd"`,
  `terminal_reason: "budget_exhausted"`, `is_error: true`, no `result` key, `errors: ["Reached
  maximum budget ($X)"]`, exit 1, and `total_cost_usd` / `modelUsage` of what was spent. The
  host checks after each model response, so the figure may pass X by that response's cost
  (seen: $0.0503 against a $0.001 limit).

So: structured fields first (`api_error_status`, `api_error`, `api_error_type`, rate-limit
events), text second (the `result` text, `errors` and stderr), and text only for a run that
failed, because a successful answer may well talk about rate limits.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from typing import Any

from clavain.guards import window
from clavain.supervisor import limit_text

QUOTE_CHARS = 200
MESSAGE_CHARS = 300
TAIL_LINES = 20  # of stderr (and of non-JSON stdout) searched for a limit message
_DECODER = json.JSONDecoder(strict=False)

USAGE_LIMIT = "usage_limit"  # a plan or spend limit: waits of hours, a reset time is given
RATE_LIMIT = "rate_limit"    # a per-minute API throttle: usually seconds


@dataclass(frozen=True)
class RateLimit:
    """A limit that stopped the run: not the node's failure, a reason to wait."""

    reset_at: datetime | None
    retry_after_seconds: float | None
    message: str
    kind: str = RATE_LIMIT
    limit_type: str | None = None  # the host's name for it: five_hour, seven_day, …
    source: str = "structured"     # "structured" (JSON fields) or "text" (patterns)

    def wait_seconds(self, now: datetime | None = None) -> float | None:
        """How long to wait from `now`: the reset if known, else the retry-after, else None."""
        if self.reset_at is not None:
            moment = now or datetime.now(timezone.utc)
            return max(0.0, (self.reset_at - moment).total_seconds())
        return self.retry_after_seconds


@dataclass(frozen=True)
class ClaudeReport:
    result_text: str = ""
    is_error: bool = False
    subtype: str = ""
    num_turns: int = 0
    session_id: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_tokens: int = 0
    cache_read_tokens: int = 0
    cost_usd: float = 0.0  # 0.0 when the output carries no `total_cost_usd`
    models: tuple[str, ...] = ()
    rate_limit: RateLimit | None = None
    problem: str | None = None
    exit_code: int | None = None
    errors: tuple[str, ...] = ()
    terminal_reason: str = ""
    api_error_status: int | None = None  # 529/500 here are transient; the caller decides
    api_error: str = ""
    permission_denials: int = 0  # tool calls the host refused (a loop's breaker counts them)

    @property
    def tokens(self) -> int:
        return (self.input_tokens + self.output_tokens + self.cache_creation_tokens
                + self.cache_read_tokens)

    @property
    def over_budget(self) -> bool:
        """The host stopped the run at its `--max-budget-usd`."""
        return self.subtype == "error_max_budget_usd" or \
            self.terminal_reason == "budget_exhausted"

    @property
    def failed(self) -> bool:
        """The run did not end in a clean answer (a problem, an error result or a bad exit)."""
        return bool(self.problem) or self.is_error or self.exit_code not in (0, None)

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["tokens"] = self.tokens
        data["models"] = list(self.models)
        data["errors"] = list(self.errors)
        if self.rate_limit is not None:
            limit = data["rate_limit"]
            limit["reset_at"] = (self.rate_limit.reset_at.isoformat()
                                 if self.rate_limit.reset_at else None)
        return data


def parse(stdout: str, stderr: str, exit_code: int | None, *,
          now: datetime | None = None) -> ClaudeReport:
    """Read a run's output. `now` anchors reset times given as a clock time ("resets 3pm")."""
    stdout = stdout or ""
    stderr = stderr or ""
    moment = (now or datetime.now(timezone.utc))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    messages, problem = _messages(stdout)
    result = _last_result(messages)
    if result is None and problem is None:
        problem = _describe_missing_result(messages, stdout, stderr, exit_code)
    elif problem is not None:
        problem = f"{problem}{_exit_note(exit_code)}; {_quote(stdout, stderr)}"
    report = _report(result or {}, problem, exit_code)
    limit = _rate_limit(report, result or {}, messages, stdout, stderr, moment)
    if limit is None:
        return report
    return replace(report, rate_limit=limit)


def is_report(stdout: str) -> bool:
    """Whether `stdout` holds a claude JSON report (a `type: "result"` object)."""
    messages, _ = _messages(stdout or "")
    return any(message.get("type") == "result" for message in messages)


# ---------------------------------------------------------------------------------------------
# Finding the result object


def _messages(stdout: str) -> tuple[list[dict[str, Any]], str | None]:
    """Every JSON object the output holds, in order, or why there are none.

    The whole output as one value first (the normal case, and `--verbose`'s array); else every
    line that starts a JSON object (warning lines before the result, stream-json).
    """
    text = stdout.strip()
    if not text:
        return [], "claude printed nothing on stdout"
    try:
        whole = _DECODER.decode(text)
    except ValueError as exc:
        found = _objects_by_line(stdout)
        if found:
            return found, None
        return [], _why_not_json(text, exc)
    if isinstance(whole, dict):
        return [whole], None
    if isinstance(whole, list) and any(isinstance(item, dict) for item in whole):
        return [item for item in whole if isinstance(item, dict)], None
    return [], f"claude printed JSON that is not an object (a {_json_kind(whole)})"


def _objects_by_line(stdout: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    offset = 0
    for line in stdout.splitlines(keepends=True):
        start = offset + (len(line) - len(line.lstrip()))
        offset += len(line)
        if not line.lstrip().startswith("{"):
            continue
        try:
            value, _ = _DECODER.raw_decode(stdout, start)
        except ValueError:
            continue
        if isinstance(value, dict):
            found.append(value)
    return found


def _why_not_json(text: str, exc: ValueError) -> str:
    position = getattr(exc, "pos", None)
    if text.startswith(("{", "[")) and position is not None and position >= len(text) - 1:
        return f"claude's JSON output is truncated (it ends after {len(text)} characters)"
    return "claude's output is not JSON"


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "list"
    if isinstance(value, str):
        return "string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    return "number"


def _last_result(messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    for message in reversed(messages):
        if message.get("type") == "result":
            return message
    # A lone object without a type is still the whole output: read what it has.
    if len(messages) == 1 and "type" not in messages[0]:
        return messages[0]
    return None


def _describe_missing_result(messages: list[dict[str, Any]], stdout: str, stderr: str,
                             exit_code: int | None) -> str:
    kinds = sorted({str(m.get("type")) for m in messages})
    return (f"claude's output has no result object (JSON of type {', '.join(kinds)})"
            f"{_exit_note(exit_code)}; {_quote(stdout, stderr)}")


def _exit_note(exit_code: int | None) -> str:
    return " (no exit code: killed?)" if exit_code is None else f" (exit {exit_code})"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _quote(stdout: str, stderr: str) -> str:
    """Up to QUOTE_CHARS of stderr (where the reason usually is), else of stdout."""
    for name, text in (("stderr", stderr), ("stdout", stdout)):
        flat = _one_line(text)
        if flat:
            clipped = flat if len(flat) <= QUOTE_CHARS else flat[:QUOTE_CHARS - 1] + "…"
            return f"{name}: {clipped!r}"
    return "stdout and stderr empty"


# ---------------------------------------------------------------------------------------------
# Fields


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    return max(0, int(value))


def _float(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0.0
    return float(value) if value == value else 0.0  # NaN counts as missing


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _report(result: dict[str, Any], problem: str | None, exit_code: int | None) -> ClaudeReport:
    tokens = _token_counts(result)
    model_usage = result.get("modelUsage")
    status = result.get("api_error_status")
    raw_errors = result.get("errors")
    errors = raw_errors if isinstance(raw_errors, list) else []
    return ClaudeReport(
        result_text=_str(result.get("result")),
        is_error=result.get("is_error") is True,
        subtype=_str(result.get("subtype")),
        num_turns=_int(result.get("num_turns")),
        session_id=_str(result.get("session_id")),
        input_tokens=tokens[0], output_tokens=tokens[1],
        cache_creation_tokens=tokens[2], cache_read_tokens=tokens[3],
        cost_usd=_float(result.get("total_cost_usd")),
        models=tuple(model_usage) if isinstance(model_usage, dict) else (),
        problem=problem,
        exit_code=exit_code,
        errors=tuple(str(e) for e in errors),
        terminal_reason=_str(result.get("terminal_reason")),
        api_error_status=status if isinstance(status, int) and not isinstance(status, bool)
        else None,
        api_error=_str(result.get("api_error")),
        permission_denials=len(result["permission_denials"])
        if isinstance(result.get("permission_denials"), list) else 0,
    )


def _token_counts(result: dict[str, Any]) -> tuple[int, int, int, int]:
    """Input, output, cache-creation and cache-read tokens.

    `modelUsage` first: it includes subagents, which `usage` leaves out, and the budget must
    see what the run really spent; `usage` when there is no per-model table.
    """
    model_usage = result.get("modelUsage")
    if isinstance(model_usage, dict) and model_usage:
        per_model = [m for m in model_usage.values() if isinstance(m, dict)]
        return (sum(_int(m.get("inputTokens")) for m in per_model),
                sum(_int(m.get("outputTokens")) for m in per_model),
                sum(_int(m.get("cacheCreationInputTokens")) for m in per_model),
                sum(_int(m.get("cacheReadInputTokens")) for m in per_model))
    usage = result.get("usage")
    if not isinstance(usage, dict):
        return 0, 0, 0, 0
    return (_int(usage.get("input_tokens")), _int(usage.get("output_tokens")),
            _int(usage.get("cache_creation_input_tokens")),
            _int(usage.get("cache_read_input_tokens")))


# ---------------------------------------------------------------------------------------------
# Rate and usage limits


def _rate_limit(report: ClaudeReport, result: dict[str, Any], messages: list[dict[str, Any]],
                stdout: str, stderr: str, now: datetime) -> RateLimit | None:
    if not report.failed:
        return None
    structured = _structured_limit(report, result, messages)
    # A clean answer's text is the model's and may discuss rate limits; a runner's own log
    # may name them anywhere, so only its last lines (where a final error is) are read.
    texts = [report.result_text if report.is_error else "", *report.errors, _tail(stderr)]
    if report.problem:
        texts.append(_tail(stdout))
    text = "\n".join(t for t in texts if t)
    retry_after = limit_text.retry_after(text)
    if structured is not None:
        kind, limit_type, reset_at = structured
        reset_at = reset_at or limit_text.reset_from_text(text, now)
        status = f" (HTTP {report.api_error_status})" if report.api_error_status else ""
        message = _message(report.result_text) or f"{kind.replace('_', ' ')}{status}"
        return RateLimit(reset_at, retry_after, message, kind, limit_type, "structured")
    line = limit_text.limit_line(text)
    if line is None:
        return None
    kind = USAGE_LIMIT if re.search(r"usage limit|hit your .{0,40}limit", line, re.I) \
        else RATE_LIMIT
    return RateLimit(limit_text.reset_from_text(text, now), retry_after, _message(line), kind,
                     None, "text")


def _structured_limit(report: ClaudeReport, result: dict[str, Any],
                      messages: list[dict[str, Any]]
                      ) -> tuple[str, str | None, datetime | None] | None:
    """(kind, limit type, reset) from the JSON fields, or None when they say nothing of one."""
    infos = [info for info in map(_rate_limit_info, messages) if info is not None]
    rejected = [info for info in infos if info.get("status") == "rejected"]
    said_so = (report.api_error == "usage_limit_reached"
               or report.api_error_status == 429
               or result.get("api_error_type") == "rate_limit_error"
               or any(m.get("type") == "assistant" and m.get("error") == "rate_limit"
                      for m in messages))
    if not said_so and not (rejected and (report.problem or not report.result_text)):
        return None
    info = rejected[-1] if rejected else (infos[-1] if infos else {})
    kind = USAGE_LIMIT if (report.api_error == "usage_limit_reached" or rejected) else RATE_LIMIT
    limit_type = info.get("rateLimitType") if isinstance(info.get("rateLimitType"), str) else None
    return kind, limit_type, limit_text.from_epoch(info.get("resetsAt"))


def _rate_limit_info(message: dict[str, Any]) -> dict[str, Any] | None:
    """The `rate_limit_info` of a rate_limit_event or of an API-error assistant message."""
    info = message.get("rate_limit_info")
    if info is None:
        params = message.get("api_error_params")
        info = params.get("rate_limit_info") if isinstance(params, dict) else None
    return info if isinstance(info, dict) else None


def _tail(text: str) -> str:
    return "\n".join(text.strip().splitlines()[-TAIL_LINES:])


def _message(text: str) -> str:
    flat = _one_line(text)
    return flat if len(flat) <= MESSAGE_CHARS else flat[:MESSAGE_CHARS - 1] + "…"


def windows(stdout: str, now: float) -> dict[str, dict[str, float]]:
    """The subscription windows the output's `rate_limit_event`s (and a refused request's
    `rate_limit_info`) reported, the last reading of each: {name: {"used_percent",
    "resets_at"}} (`guards.window`). Only `--verbose` / stream-json output carries them."""
    found: dict[str, dict[str, float]] = {}
    if "rate_limit_info" not in (stdout or ""):
        return found
    for message in _messages(stdout)[0]:
        found.update(window.from_rate_limit_info(_rate_limit_info(message), now))
    return found


def record_runner_output(root: str, stdout: str, now: float | None = None) -> bool:
    """Record the windows a runner's output reported (its `rate_limit_event`s, the last of
    each window); whether the file changed. Never raises: a run is not stopped by this."""
    if not stdout or "rate_limit" not in stdout:
        return False
    try:
        moment = time.time() if now is None else now
        return window.record(root, windows(stdout, moment), window.RUNNER, moment)
    except Exception:  # the windows are advice to the next dispatch, never the run's failure
        return False
