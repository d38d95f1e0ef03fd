"""What a person sees of a supervised run: a line per node started and finished (node, role,
runner, worker, elapsed), the running nodes every few seconds, a countdown while the run waits
(a rate limit's reset, a retry backoff), then the final table. Lines go to stderr so stdout
stays the result (the table, or `--json`)."""

from __future__ import annotations

import time
from typing import Any, TextIO

from clavain.tables import render_table


def _clock(seconds: float) -> str:
    seconds = max(0, int(seconds + 0.999))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def _outcome(event: dict[str, Any], now: float | None = None) -> str:
    """`done in 3.2s`; a failed attempt sent back for another says when that one starts (its
    back-off's end), which is what a person waits for, beside how long the failed one took:
    `failed attempt 1 after 0.6s, retries at 14:52:10Z (in 49s)`."""
    took = f"{event.get('seconds') or 0:.1f}s"
    retry_at = event.get("retry_at")
    if event.get("outcome") != "retry" or not isinstance(retry_at, str):
        return f"{event.get('outcome')} in {took}"
    from datetime import datetime

    attempt = f" attempt {event['attempts']}" if isinstance(event.get("attempts"), int) else ""
    try:
        moment = datetime.fromisoformat(retry_at.replace("Z", "+00:00"))
    except ValueError:
        return f"failed{attempt} after {took}, retries after {retry_at}"
    left = moment.timestamp() - (time.time() if now is None else now)
    return (f"failed{attempt} after {took}, retries at {moment.strftime('%H:%M:%S')}Z "
            f"(in {_span(left)})")


def _span(seconds: float) -> str:
    """`49s`, `3m 05s`, `1h 02m`: a wait as a person reads it."""
    seconds = max(0, int(seconds + 0.999))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m {seconds % 60:02d}s"
    return f"{seconds // 3600}h {seconds % 3600 // 60:02d}m"


class LinePrinter:
    """Event lines on a stream; a countdown (`waiting` events) rewrites one terminal line, and
    elsewhere (a log) appears at most every WAIT_LINE_SECONDS. Subclasses say what each event
    reads as (`line`)."""

    WAIT_LINE_SECONDS = 30.0

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.last_wait_line = 0.0  # when a countdown line was last printed (not a terminal)
        self.waiting = False  # a countdown is on the terminal's current line

    def line(self, event: dict[str, Any]) -> str | None:
        raise NotImplementedError

    def wait_line_due(self) -> bool:
        now = time.monotonic()
        if not self.tty and now - self.last_wait_line < self.WAIT_LINE_SECONDS:
            return False
        self.last_wait_line = now
        return True

    def __call__(self, event: dict[str, Any]) -> None:
        line = self.line(event)
        if line is None:
            return
        if event["event"] == "waiting" and self.tty:
            self.stream.write(f"\r{line}\033[K")
            self.waiting = True
        else:
            self.stream.write(("\n" if self.waiting else "") + line + "\n")
            self.waiting = False
        self.stream.flush()


# A node given back (no attempt spent) is not a failure.
_MARKS = {"done": "✔", "released": "↩", "rate_limited": "↩", "store_unavailable": "↩",
          "runner_unusable": "↩", "not_recorded": "↩", "budget_share": "↩"}


class Printer(LinePrinter):
    """A supervised run's lines."""

    def line(self, event: dict[str, Any]) -> str | None:
        kind = event["event"]
        if kind == "start":
            mode = f"{event['workers']} worker(s)" + (", git worktrees" if event["worktrees"]
                                                     else "")
            problems = "".join(f"\n  budget settings: {p}" for p in event["budget_problems"])
            return f"clavain run {event['run_id']} on graph {event['graph_id']} ({mode}){problems}"
        if kind == "recovered":
            still = event.get("still_running") or []
            return (f"recovered run {event['run_id']}: stopped runners "
                    f"{', '.join(event['stopped_runners']) or 'none'}; gave back "
                    f"{', '.join(event['released']) or 'nothing'} (no attempt spent)"
                    + (f"; still running, left claimed: {', '.join(still)}" if still else "")
                    + (f"; charged their budget reservations: {', '.join(event['charged'])}"
                       if event.get("charged") else "")
                    + (f" (measured from transcripts: {', '.join(event['measured'])})"
                       if event.get("measured") else ""))
        if kind == "cleaned":
            return "removed what crashed runs left in git: " + ", ".join(event["removed"])
        if kind == "reconciled":
            return (f"gave back {', '.join(event['released'])}: its worker ended without "
                    "giving it back (no attempt spent)")
        if kind == "started":
            share = f", share ${event['share_usd']:.4f}" if event.get("share_usd") else ""
            return (f"▶ {event['node']} ({event['role']}, attempt {event['attempt']}{share}) "
                    f"on worker {event['worker']}")
        if kind == "cap_reached":
            return (f"budget cap reached ({event['message']}): stopping the configured "
                    "runners still at work; their nodes go back unspent")
        if kind == "finished":
            who = "/".join(str(p) for p in (event.get("role"), event.get("runner"),
                                            event.get("model")) if p)
            cost = f", {event['tokens']:,} tokens, ${event['cost_usd']:.4f}" \
                if event.get("tokens") else ""
            return (f"{_MARKS.get(event.get('outcome'), '✖')} {event['node']} "
                    f"[{who}] worker {event.get('worker')}: {_outcome(event)}{cost} — "
                    f"{str(event.get('summary'))[:160]}")
        if kind == "stopping":
            return ("stopping: runners get SIGTERM and 5 s to finish; their nodes go back "
                    "unspent (Ctrl-C again to kill them now)")
        if kind == "killing":
            return "killing the runners now"
        if kind == "progress":
            running = ", ".join(f"{r['node']} ({r['role']}, worker {r['worker']}) "
                                f"{r['elapsed']:.0f}s" for r in event["running"])
            return f"… running: {running}"
        if kind == "waiting":
            if not self.wait_line_due():
                return None
            return (f"⏳ waiting ({event['why']}) {_clock(event['seconds_left'])} until "
                    f"{event['until'][:19]}Z: {event.get('message') or ''}")
        return None


def print_plan(plan: dict[str, Any]) -> None:
    print(f"Dry run on graph {plan['graph_id']} (per-call figures from {plan['source']}):")
    print(render_table([{"node": r["id"], "role": r["role"], "runner": r["runner"],
                         "model": r["model"] or "-", "llm calls": r["llm_calls"],
                         "tokens": f"{r['tokens']:,.0f}", "cost": f"${r['cost_usd']:.2f}"}
                        for r in plan["nodes"]],
                       ["node", "role", "runner", "model", "llm calls", "tokens", "cost"]))
    totals, budget = plan["totals"], plan["budget"]
    print(f"Total: {totals['nodes']} node(s), {totals['llm_calls']} LLM call(s), "
          f"{totals['tokens']:,} tokens, ${totals['cost_usd']:.2f}; "
          f"{totals['verify_without_llm']} verify node(s) with no LLM")
    if totals["planners"]:
        print(f"Not counted: the tasks {totals['planners']} planner(s) will add "
              f"(up to {plan['planned_tasks_not_counted']} executor calls)")
    if budget["enabled"]:
        verdict = ("OVER budget: " + ", ".join(budget["over"])) if budget["over"] else \
            "within budget"
        print(f"Budget: {budget['max_tokens']:,} tokens, ${budget['max_cost_usd']:.2f} — "
              f"{verdict}")
    reserve = plan.get("reservation")
    if reserve and budget["enabled"]:
        print_reservation_plan(reserve)


def print_reservation_plan(reserve: dict[str, Any]) -> None:
    """The nodes that fit what the run has unreserved, in dispatch order."""
    print(f"Reservations ({reserve['run']}): headroom ${reserve['headroom']['cost_usd']:.4f}, "
          f"{reserve['headroom']['tokens']:,.0f} tokens")
    print(render_table([{"node": r["id"], "role": r["role"], "model": r["model"] or "-",
                         "projected": f"${r['cost_usd']:.4f}",
                         "cumulative": f"${r['cumulative_cost_usd']:.4f}",
                         "fits": "yes" if r["fits"] else "no"} for r in reserve["nodes"]],
                       ["node", "role", "model", "projected", "cumulative", "fits"]))
    after = (f"; nothing starts from {reserve['first_over']} on"
             if reserve["first_over"] else "")
    print(f"Fit the budget: {reserve['fits']} of {reserve['pending']} pending node(s) in "
          f"dispatch order{after}")


def print_final(report: dict[str, Any]) -> None:
    metrics = report["metrics"]
    rows = [{"node": e["node"], "role": e.get("role") or "-", "runner": e.get("runner") or "-",
             "worker": e.get("worker"), "seconds": f"{e.get('seconds') or 0:.1f}",
             "outcome": e.get("outcome"), "tokens": f"{e.get('tokens') or 0:,}",
             "cost": f"${e.get('cost_usd') or 0:.4f}"} for e in metrics["timeline"]]
    if rows:
        print(render_table(rows, ["node", "role", "runner", "worker", "seconds", "outcome",
                                  "tokens", "cost"]))
    by_role = ", ".join(f"{role} {n}" for role, n in metrics["llm_invocations_by_role"].items())
    print(f"Run {report['run_id']}: {report['status']} — {report['message']}")
    print(f"LLM calls: {metrics['llm_invocations']}" + (f" ({by_role})" if by_role else "")
          + f"; verify with no LLM: {metrics['verify_without_llm']}; tokens: "
          f"{metrics['tokens']:,}; cost: ${metrics['cost_usd']:.4f}; wall: "
          f"{metrics['wall_seconds']:.1f}s; peak concurrency: {metrics['peak_concurrency']}")
    spend = report.get("spend")
    if spend is not None:
        print(f"Spend (the run's ledger): ${spend['cost_usd']:.4f}, {spend['tokens']:,} tokens"
              + (f" (${spend['charged']['cost_usd']:.4f} charged for "
                 f"{spend['charged']['count']} runner(s) that ended unmeasured)"
                 if spend["charged"]["count"] else ""))
    if report.get("reason") == "store_damaged":  # its nodes cannot be read: never "nothing"
        print(f"Done: {len(report['done'])} node(s) before the damage; what is left cannot be "
              "read until the database is recovered (the line above says how)")
    else:
        print(f"Done: {len(report['done'])} node(s); left: {left_summary(report['left'])}")
    if metrics.get("crashes"):
        print("Crashes (given back, no attempt spent): "
              + ", ".join(f"{node} {n}" for node, n in metrics["crashes"].items()))


LEFT_NAMED = 5
# The left nodes a person acts on first: a failure or a question before work not yet reached.
_LEFT_ORDER = {"failed": 0, "needs_human": 1, "running": 2}


def left_summary(left: list[dict[str, Any]], named: int = LEFT_NAMED) -> str:
    """`task-7 (failed), task-11 (needs_human), … and 125 more (120 open, 5 blocked)`: at most
    `named` nodes, failed and waiting ones first, then the count of the rest by status (a
    200-node run's leftovers on one line are unreadable)."""
    if not left:
        return "nothing"
    ordered = sorted(left, key=lambda n: _LEFT_ORDER.get(n["status"], 3))  # stable: plan order
    shown = ", ".join(f"{n['id']} ({n['status']})" for n in ordered[:named])
    rest = ordered[named:]
    if not rest:
        return shown
    counts: dict[str, int] = {}
    for n in rest:
        counts[n["status"]] = counts.get(n["status"], 0) + 1
    by_status = ", ".join(f"{count} {status}" for status, count in
                          sorted(counts.items(), key=lambda item: (-item[1], item[0])))
    return f"{shown} and {len(rest)} more ({by_status}); `clavain graph ls` lists them"
