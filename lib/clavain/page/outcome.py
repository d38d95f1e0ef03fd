"""The page's first section: how the subject ended (or stands), in words a person reads in ten
seconds — the outcome as a badge worded and coloured for it, "live" or "no longer rewritten"
beside it, the reason in words, start and end clock times and the wall, what it cost against
its cap, and the "Needs you / Blocked / Next" lines with their exact commands (asked of
`clavain.status` through `page.standing`). A sprint leads with its step, its gate and the
verdicts that need attention."""

from __future__ import annotations

from html import escape
from typing import Any

from clavain.textio import clip
from clavain.workgraph.statuses import SETTLED, NodeStatus

# status → (the word, its tone, a symbol: the word and the symbol say it without colour).
RUN_OUTCOMES = {
    "complete": ("complete", "ok", "✔"), "done": ("complete", "ok", "✔"),
    "blocked": ("blocked", "bad", "✖"), "error": ("error", "bad", "✖"),
    "budget": ("stopped: budget", "stopped", "■"),
    "window_limit": ("stopped: window limit", "stopped", "■"),
    "breaker_open": ("stopped: breaker open", "stopped", "■"),
    "max_iterations": ("stopped: iteration limit", "stopped", "■"),
    "stopped_at_limit": ("stopped: call limit", "stopped", "■"),
    "interrupted": ("stopped by a person", "stopped", "■"),
    "abandoned": ("abandoned", "stopped", "■"),
    "running": ("running", "live", "●"), "active": ("in progress", "live", "●"),
}

# metrics.json's `reason` (supervisor.pacing, run_budget, the scheduler's idle reasons).
REASONS = {
    "deadlock": "deadlock — nothing left can start: every open node waits on a failed node "
                "or on a person's answer",
    "needs_human": "a node waits for a person's answer",
    "all_done": "every node is done",
    "budget": "the run's spend reached its cap",
    "budget_meter": "the budget meter could not be read, so nothing more was started",
    "window_share": "the subscription's usage window reached the share the run may use "
                    "(windowShareMax)",
    "interrupted": "stopped by a signal (Ctrl-C or kill)",
    "max_iterations": "stopped after the runner calls asked for (--once / --max-iterations)",
    "rate_limited": "the runner was rate limited",
    "worker_errors": "the workers kept failing",
    "runner_unusable": "the runner could not be used",
    "store_damaged": "the workgraph's database is damaged",
    "store_unavailable": "the workgraph's database could not be reached",
}


def outcome_of(page: dict[str, Any]) -> dict[str, Any]:
    """{"status", "word", "tone", "symbol", "reason", "started_at", "ended_at", "wall_seconds",
    "go_on"}: the subject's outcome; `go_on` the command that continues it, if any."""
    kind = page["subject"]["kind"]
    if kind == "loop" and page["loops"]:
        return _loop(page["loops"][0])
    if kind == "sprint" and page["sprint"] is not None:
        sprint = page["sprint"]
        return _worded(sprint["outcome"], "", sprint.get("started_at"),
                       None if sprint["outcome"] == "active" else sprint.get("updated_at"), None)
    if page["runs"]:  # a run's page, or a graph's: its last run
        return _run(page["runs"][-1], page)
    nodes = (page["graph"] or {}).get("nodes") or []
    if nodes and all(node.get("status") in SETTLED for node in nodes):
        return _worded("complete", "all_done", None, None, None)
    stuck = any(node.get("status") in (NodeStatus.FAILED, NodeStatus.NEEDS_HUMAN)
                for node in nodes)
    return _worded("blocked" if stuck else "open", "", None, None, None)


def word(status: str) -> str:
    """A status as the page words it (`breaker_open` → "stopped: breaker open")."""
    return RUN_OUTCOMES.get(status, (status.replace("_", " "),))[0]


def _worded(status: str, reason: str, started: Any, ended: Any, wall: float | None,
            **more: Any) -> dict[str, Any]:
    word, tone, symbol = RUN_OUTCOMES.get(status, (status.replace("_", " "), "unknown", "?"))
    return {"status": status, "word": word, "tone": tone, "symbol": symbol,
            "reason": REASONS.get(reason, reason.replace("_", " ")),
            "started_at": started or None, "ended_at": ended or None, "wall_seconds": wall,
            "go_on": None, **more}


def _run(run: dict[str, Any], page: dict[str, Any]) -> dict[str, Any]:
    status = "running" if run["live"] else run["status"]
    reason = "" if run["live"] else run.get("reason") or ""
    found = _worded(status, reason, run["started_at"], None if run["live"]
                    else run.get("finished_at"), None if run["live"] else run["wall_seconds"])
    if reason == "budget":
        found["reason"] += _against_cap(page)
    if not run["live"] and status != "complete":
        raise_cap = ("raise budgets.maxCostUsd in .clavain/config.json, then "
                     if status == "budget" else "")
        found["go_on"] = (f"{raise_cap}once unblocked: clavain run --resume {run['run_id']}"
                          if status == "blocked" else
                          f"{raise_cap}clavain run --resume {run['run_id']}")
    return found


def _loop(loop: dict[str, Any]) -> dict[str, Any]:
    from clavain.loop.decide import RESET_CIRCUIT

    status = "running" if loop["live"] else loop["status"]
    summary = loop["summary"]
    why = str(summary.get("message") or "")
    if status == "breaker_open":
        opened = next((t["iteration"] for t in reversed(loop["breaker_transitions"])
                       if t["to"] == "OPEN"), None)
        # The loop's message ends with how a person closes the breaker: "Go on" says that.
        why = why.split(" (a person", 1)[0] or "circuit breaker open"
        why = f"the {why}" + (f" (it opened at iteration {opened})" if opened else "")
    found = _worded(status, "", loop.get("started_at"), loop.get("finished_at"),
                    loop.get("wall_seconds") or None)
    found["reason"] = why
    if status == "breaker_open":
        found["go_on"] = RESET_CIRCUIT.format(run=loop["run_id"]).replace("`", "")
    return found


def _against_cap(page: dict[str, Any]) -> str:
    dollars = _cap_row(page, "Dollars")
    return (f": ${float(dollars['used']):.2f} of ${float(dollars['limit']):.2f}"
            if dollars else "")


def _cap_row(page: dict[str, Any], name: str) -> dict[str, Any] | None:
    budget = page.get("budget") or {}
    return next((row for row in budget.get("budgets") or [] if row.get("budget") == name), None)


def _clock(value: Any) -> str:
    from clavain.clock import parse_iso

    try:
        return parse_iso(str(value)).strftime("%Y-%m-%d %H:%M:%S UTC")
    except ValueError:
        return str(value)


def wall_words(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.1f} s"
    minutes = int(seconds // 60)
    if minutes < 90:
        return f"{minutes} min {int(seconds % 60)} s"
    return f"{minutes // 60} h {minutes % 60} min"


# ---------------------------------------------------------------- drawn

def section(page: dict[str, Any], liveness: str) -> str:
    """The first section; `liveness` the plain words on whether the file is still rewritten."""
    found = outcome_of(page)
    badge = (f'<span class="outcome-badge tone-{found["tone"]}" id="outcome" '
             f'data-status="{escape(found["status"])}">{found["symbol"]} '
             f'{escape(found["word"])}</span>')
    head = [f'<div class="outcome-head">{badge} {liveness}</div>']
    if found["reason"]:
        head.append(f'<p class="reason" id="outcome-reason">{escape(found["reason"])}</p>')
    times = []
    if found["started_at"]:
        times.append(f"started {_clock(found['started_at'])}")
    if found["ended_at"]:
        times.append(f"ended {_clock(found['ended_at'])}")
    if found["wall_seconds"]:
        times.append(f"wall {wall_words(float(found['wall_seconds']))}")
    if times:
        head.append(f'<p class="times">{escape(" · ".join(times))}</p>')
    head.append(_spent(page))
    head += _sprint_lead(page)
    head.append(_steps(page, found))
    return '<section id="standing" class="standing">' + "".join(head) + "</section>"


def _spent(page: dict[str, Any]) -> str:
    """Dollars and tokens against their caps: the run's ledger figure (run_report)."""
    parts = []
    for name, unit in (("Dollars", "$"), ("Tokens", "")):
        row = _cap_row(page, name)
        if row is None:
            continue
        used, limit = float(row["used"]), float(row["limit"])
        share = f" ({used / limit:.0%})" if limit else ""
        figure = (f"${used:.2f} of ${limit:.2f} cap{share}" if unit else
                  f"{int(used):,} of {int(limit):,} tokens{share}")
        parts.append(figure)
    if not parts:
        return ""
    return f'<p class="spent" id="spent">Spent {escape(" · ".join(parts))}</p>'


def _sprint_lead(page: dict[str, Any]) -> list[str]:
    status = page.get("status") or {}
    sprint = status.get("sprint")
    lines = []
    if sprint is not None:
        if sprint["step"] is None:
            lines.append("<li><b>Step</b> every step done</li>")
        else:
            lines.append(f'<li id="current-step"><b>Step</b> <code>{escape(sprint["step"])}'
                         f'</code> ({sprint["position"]} of {len(sprint["route"])})</li>')
            gate = sprint["gate"]
            lines.append(
                '<li class="gate"><b>Gate</b> ' + (
                    "waits for: " + escape("; ".join(clip(g, 160) for g in gate)) if gate
                    else f"open: <code>clavain sprint done {escape(sprint['step'])}</code> "
                         "records it") + "</li>")
    attention = [v for v in page["verdicts"]
                 if str(v.get("status")) not in ("CLEAN", "COMPLETE")] if page["sprint"] else []
    for verdict in attention[:5]:
        lines.append(f'<li class="verdict-attention"><b>Verdict</b> '
                     f'<span class="status-{escape(str(verdict.get("status")))}">'
                     f'{escape(str(verdict.get("status")))}</span> '
                     f'{escape(str(verdict.get("agent")))}: '
                     f'{escape(clip(str(verdict.get("summary") or ""), 200))}</li>')
    return [f'<ul class="sprint-lead">{"".join(lines)}</ul>'] if lines else []


def _steps(page: dict[str, Any], found: dict[str, Any]) -> str:
    steps = (page.get("status") or {}).get("next_steps") or []
    items = []
    for step in steps:
        node = (f' <code class="node">{escape(step["node"])}</code>:' if step["node"] else "")
        error = (f' <span class="error">error: {escape(clip(step["error"], 200))}</span>'
                 if step.get("error") and step["label"] != "Next" else "")
        command = (f'<br><code class="command">{escape(step["command"])}</code>'
                   if step["command"] else "")
        items.append(f'<li class="step" data-label="{escape(step["label"])}" '
                     f'data-node="{escape(step["node"] or "")}"><b>{escape(step["label"])}</b>'
                     f'{node} {escape(clip(step["text"] or "", 300))}{error}{command}</li>')
    if found["go_on"]:
        items.append(f'<li class="step" data-label="Go on"><b>Go on</b> '
                     f'<code class="command">{escape(found["go_on"])}</code></li>')
    return f'<ul class="next-steps" id="next-steps">{"".join(items)}</ul>' if items else ""
