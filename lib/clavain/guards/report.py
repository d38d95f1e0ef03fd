"""What a run spent and where it went round in circles: budgets used of their limits, the most
repeated commands, denied calls with their reasons, repeated patches, tokens and cost per
model, and the PreToolUse hook's own time. `clavain report`, `clavain budget status`, the sprint
summary and `.clavain/runs/<sprint>/report.md` all read it from here.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from clavain.errors import ClavainError
from clavain.guards import reservations
from clavain.guards.budget import BUDGETS, amount
from clavain.guards.pricing import priced_as

TOP = 5


def current_run(conn: Any, sprint_id: str | None, session_id: str | None = None) -> str | None:
    """The run a command means by "this run": its own session's, else the one that counted the
    active sprint's calls last, else the run touched last (None when there is none)."""
    if session_id and conn.execute("SELECT 1 FROM budget_runs WHERE run_key = ?",
                                   (f"session:{session_id}",)).fetchone():
        return f"session:{session_id}"
    counted = sprint_run(conn, sprint_id) if sprint_id else None
    if counted:
        return counted
    row = conn.execute("SELECT run_key FROM budget_runs ORDER BY updated_at DESC, run_key "
                       "LIMIT 1").fetchone()
    return row["run_key"] if row else None


def sprint_run(conn: Any, sprint_id: str) -> str | None:
    """The run that counted a sprint's calls last (budgets follow the session; the hook
    remembers the run behind each sprint). A sprint counted before version 9 is its own run."""
    try:
        row = conn.execute("SELECT run_key FROM budget_sprints WHERE sprint_id = ?",
                           (sprint_id,)).fetchone()
    except sqlite3.OperationalError:  # a read-only database from before version 9
        row = None
    if row:
        return row["run_key"]
    own = conn.execute("SELECT 1 FROM budget_runs WHERE run_key = ?",
                       (f"sprint:{sprint_id}",)).fetchone()
    return f"sprint:{sprint_id}" if own else None


def runs(conn: Any) -> list[str]:
    """Every run with counts, newest first, then those a person reset (their decisions stay
    on record)."""
    counted = [row["run_key"] for row in conn.execute(
        "SELECT run_key FROM budget_runs ORDER BY updated_at DESC, run_key")]
    try:
        reset = [row[0] for row in conn.execute(
            "SELECT run_key FROM person_decisions GROUP BY run_key ORDER BY max(id) DESC")]
    except sqlite3.OperationalError:  # a read-only database from before version 8
        reset = []
    return counted + [key for key in reset if key not in counted]


def build(conn: Any, run_key: str, limits: dict) -> dict[str, Any]:
    run = conn.execute("SELECT * FROM budget_runs WHERE run_key = ?", (run_key,)).fetchone()
    if run is None:
        return empty(run_key, limits)
    # Tokens and dollars: the one figure, measured plus what dead holders are charged.
    charged = reservations.spent_with_charged(conn, run_key)
    budgets = [{"budget": label, "used": charged.get(column, run[column]), "limit": limits[key]}
               for column, key, label in BUDGETS]
    top = [{"command": r["subject"], "count": r["n"]} for r in conn.execute(
        "SELECT subject, count(*) AS n FROM budget_calls WHERE run_key = ? AND kind IN "
        "('command', 'test') AND decision IN ('allow', 'warn') GROUP BY fingerprint "
        "ORDER BY n DESC, max(id) DESC LIMIT ?",
        (run_key, TOP))]
    denied = [dict(r) for r in conn.execute(
        "SELECT at, tool, subject, reason FROM budget_calls WHERE run_key = ? AND "
        "decision = 'deny' ORDER BY id", (run_key,))]
    patches = [{"path": r["subject"], "count": r["n"]} for r in conn.execute(
        "SELECT subject, count(*) AS n FROM budget_calls WHERE run_key = ? AND kind = 'edit' "
        "AND decision NOT IN ('deny', 'failed') GROUP BY fingerprint HAVING n > 1 "
        "ORDER BY n DESC", (run_key,))]
    per_model = json.loads(run["usage_json"])
    for model, counts in per_model.items():  # how each model was priced, as of now
        counts["priced_as"], note = priced_as(model)
        if note and any(value for key, value in counts.items() if key.endswith("_tokens")):
            counts["pricing_note"] = note
    times = sorted(r[0] for r in conn.execute(
        "SELECT hook_ms FROM budget_calls WHERE run_key = ? AND hook_ms IS NOT NULL", (run_key,)))
    return {"run": run_key, "profile": limits["profile"], "scope": limits["scope"],
            "started_at": run["started_at"], "updated_at": run["updated_at"],
            "budgets": budgets, "top_commands": top, "denied": denied, "patch_repeats": patches,
            "tokens": run["tokens"], "cost_usd": round(run["cost_usd"], 4), "models": per_model,
            "hook_ms": {"calls": len(times), "p50": quantile(times, 0.5),
                        "p95": quantile(times, 0.95)}}


def quantile(values: list[float], q: float) -> float | None:
    """The `q` quantile of sorted `values` (nearest rank), None when there are none."""
    if not values:
        return None
    return values[min(len(values) - 1, int(q * len(values)))]


def render(report: dict[str, Any]) -> str:
    """Markdown, for people and for `.clavain/runs/<sprint>/report.md`."""
    lines = [f"# Run {report['run']} ({report['profile']}/{report['scope']})", ""]
    lines += [f"Budget settings error (defaults used): {problem}"
              for problem in report.get("problems", [])]
    lines += ["## Budgets"]
    lines += [f"- {b['budget']}: {amount(b['used'])} / {amount(b['limit'])}"
              for b in report["budgets"]]
    lines += ["", "## Top commands"]
    lines += [f"- {c['count']}× `{c['command'][:120]}`" for c in report["top_commands"]] \
        or ["- none"]
    lines += ["", "## Denied calls"]
    lines += [f"- {d['at']} {d['tool']} `{(d['subject'] or '')[:80]}`: {d['reason']}"
              for d in report["denied"]] or ["- none"]
    if report["patch_repeats"]:
        lines += ["", "## Repeated patches"]
        lines += [f"- {p['count']}× {p['path']}" for p in report["patch_repeats"]]
    lines += ["", "## Tokens and cost",
              f"- {report['tokens']:,} tokens, ${report['cost_usd']:.4f} (measured from the "
              "transcripts, priced per model with both cache-write rates)"]
    lines += [f"  - {model}: ${counts.get('cost_usd', 0):.4f}"
              + (f" ({counts['pricing_note']})" if counts.get("pricing_note") else "")
              for model, counts in sorted(report["models"].items())]
    if report.get("person_decisions"):
        from clavain.authority import describe

        lines += ["", "## A person's decisions"]
        lines += [f"- {d['at']} {d['what']}: {describe(d['decided_by'])}"
                  for d in report["person_decisions"]]
    hook = report["hook_ms"]
    if hook["calls"]:
        lines += ["", f"PreToolUse hook (from its launcher's start): p50 {hook['p50']:.1f} ms, p95 "
                      f"{hook['p95']:.1f} ms over {hook['calls']} calls."]
    return "\n".join(lines) + "\n"


def reset(conn: Any, run_key: str, decided_by: dict[str, Any]) -> int:
    """Forget a run's counts, calls, red tests, usage, reservations and its running subagents'
    counts, and record who decided it (a person: `clavain.authority`); returns the calls
    removed."""
    from clavain.clock import now_iso
    from clavain.store.db import transaction

    with transaction(conn):
        removed = conn.execute("DELETE FROM budget_calls WHERE run_key = ?", (run_key,)).rowcount
        for table in ("budget_red_tests", "budget_usage", "budget_reservations", "budget_runs"):
            conn.execute(f"DELETE FROM {table} WHERE run_key = ?", (run_key,))
        # Its running subagents' own counts start again; the finished ones stay as history.
        conn.execute("DELETE FROM budget_agents WHERE run_key = ? AND ended_at IS NULL",
                     (run_key,))
        record_decision(conn, run_key, f"budget reset ({removed} call(s) forgotten)",
                        decided_by, at=now_iso())
    return removed


def record_decision(conn: Any, run_key: str, what: str, decided_by: dict[str, Any], *,
                    at: str) -> None:
    """One person-only decision and who made it (SQL only: the caller's transaction)."""
    import json

    conn.execute("INSERT INTO person_decisions (run_key, what, decided_by_json, at) "
                 "VALUES (?, ?, ?, ?)", (run_key, what, json.dumps(decided_by), at))


def decisions(conn: Any, run_key: str) -> list[dict[str, Any]]:
    """The person-only decisions made for `run_key`, oldest first, and who made them."""
    try:
        rows = conn.execute("SELECT what, decided_by_json, at FROM person_decisions "
                            "WHERE run_key = ? ORDER BY id", (run_key,)).fetchall()
    except sqlite3.OperationalError:  # a read-only database from before version 8
        return []
    return [{"what": row[0], "decided_by": json.loads(row[1]), "at": row[2]} for row in rows]


def empty(run_key: str, limits: dict) -> dict[str, Any]:
    """The report of a run nothing has been counted in yet: its limits, all unused."""
    return {"run": run_key, "profile": limits["profile"], "scope": limits["scope"],
            "started_at": None, "updated_at": None,
            "budgets": [{"budget": label, "used": 0.0 if column == "cost_usd" else 0,
                         "limit": limits[key]} for column, key, label in BUDGETS],
            "top_commands": [], "denied": [], "patch_repeats": [], "tokens": 0,
            "cost_usd": 0.0, "models": {}, "hook_ms": {"calls": 0, "p50": None, "p95": None},
            "person_decisions": []}


def resolve_run(conn: Any, run_key: str) -> str:
    """`sprint:ID`, `session:ID`, or a bare ID that names exactly one of them."""
    known = runs(conn)
    if run_key in known:
        return run_key
    if run_key.startswith("sprint:"):  # the session that worked on it
        counted = sprint_run(conn, run_key[len("sprint:"):])
        if counted:
            return counted
    matches = [key for key in (f"sprint:{run_key}", f"session:{run_key}", f"run:{run_key}")
               if key in known]
    if len(matches) == 1:
        return matches[0]
    raise ClavainError(f"no budget run {run_key!r} (runs are `sprint:<id>`, `session:<id>` or "
                       "`run:<id>`; "
                       f"recent: {', '.join(known[:5]) or 'none yet'})")


def _target(state: Any, conn: Any, run_key: str | None,
            session_id: str | None = None) -> tuple[str, dict]:
    """(the run asked for - else the current one (`current_run`), else a placeholder name -,
    the run context with the limits that apply now)."""
    from clavain.authority import host_environment
    from clavain.guards.counting import run_context

    # The limits the hook applies: the variables the host set, not the command line's.
    context = run_context(str(state.root), session_id, env=host_environment())
    if run_key:
        if conn is None:
            raise ClavainError(f"no budget run {run_key!r}: nothing has been counted here yet")
        return resolve_run(conn, run_key), context
    chosen = current_run(conn, context["sprint_id"], session_id) if conn is not None else None
    return chosen or (context["run_key"] if session_id or context["sprint_id"]
                      else "session (none counted yet)"), context


def _connect(state: Any) -> Any:
    """The state database, or None when nothing was ever counted (nothing is created); opened
    read-only when its folder cannot be written (a report only reads)."""
    import os

    from clavain.store.db import connect, connect_readonly

    if not state.db.exists():
        return None
    if os.access(state.db.parent, os.W_OK) and os.access(state.db, os.W_OK):
        return connect(state.db)
    return connect_readonly(state.db, immutable=True)


def project_report(state: Any, run_key: str | None = None, *, measure_now: bool = True,
                   session_id: str | None = None) -> dict[str, Any]:
    """The report of `run_key`, else of the current run, with the limits that apply now and any
    problem with the settings; a run nothing was counted in shows its limits, unused. Tokens
    are measured now (unless `measure_now` is False: a read-only state folder), not as of the
    last background measurement."""
    from clavain.guards.usage import measure

    conn = _connect(state)
    try:
        run_key, context = _target(state, conn, run_key, session_id)
        if conn is None:
            report = empty(run_key, context["limits"])
        else:
            if measure_now:
                measure(conn, run_key=run_key)
            report = {**build(conn, run_key, context["limits"]),
                      "person_decisions": decisions(conn, run_key)}
        return {**report, "problems": context["problems"]}
    finally:
        if conn is not None:
            conn.close()


def project_reset(state: Any, run_key: str | None, decided_by: dict[str, Any],
                  session_id: str | None = None) -> dict[str, Any]:
    """A person's budget reset of `run_key` (else the current run of `session_id`), recorded
    as theirs."""
    conn = _connect(state)
    try:
        run_key, _ = _target(state, conn, run_key, session_id)
        removed = reset(conn, run_key, decided_by) if conn is not None else 0
        return {"run": run_key, "calls_removed": removed, "decided_by": decided_by}
    finally:
        if conn is not None:
            conn.close()
