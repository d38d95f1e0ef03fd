"""Tokens and dollars of a run, measured from Claude Code's transcripts after tool calls.

A session's usage is its transcript plus its subagents' (deduplicated like the verdicts' token
counts: one entry per API response), priced per model with both cache-write rates
(`pricing`). A run (a sprint can span sessions) is measured over all its sessions together,
from its start on: what a session spent before a sprint is not charged to it, and `clavain
budget reset` starts the count again. PreToolUse starts a
measurement at most every 30 s as a detached process (`start_measuring`): the model never waits
for it, and later calls compare the last measured figures with the limits.
"""

from __future__ import annotations

from pathlib import Path

from clavain.clock import now_iso


def usage_cost(transcripts: list[Path], since: str | None = None) -> tuple[int, float, dict]:
    """(tokens, dollars, per model {token counts, cost_usd}) of sessions and their subagents,
    together (a response copied into several files counts once)."""
    from clavain.guards.pricing import cost_usd
    from clavain.verdicts.transcript import subagent_files, usage_of_files

    files = [f for t in transcripts if t.is_file() for f in (t, *subagent_files(t))]
    total = usage_of_files(files, since)
    per_model = {}
    dollars = 0.0
    for model, (fresh, output, write_5m, write_1h, read) in total.per_model.items():
        cost = cost_usd(model, input_tokens=fresh, output_tokens=output,
                        cache_write_5m=write_5m, cache_write_1h=write_1h, cache_read=read)
        dollars += cost
        per_model[model] = {"input_tokens": fresh, "output_tokens": output,
                            "cache_write_5m_tokens": write_5m, "cache_write_1h_tokens": write_1h,
                            "cache_read_tokens": read, "cost_usd": round(cost, 6)}
    return total.total, dollars, per_model


def measure(conn, *, run_key: str, transcript: str | None = None) -> None:
    """Add `transcript` to the run's sessions and measure the run over all of them, counting
    the responses written from a minute before the run's first counted call (the response that
    made that call comes just before it) — so a sprint is not charged what its session spent
    earlier, and a reset starts from zero."""
    from clavain import fastjson
    from clavain.guards.gate import SUPERVISED_PREFIX
    from clavain.store.db import transaction

    if run_key.startswith(SUPERVISED_PREFIX):
        return  # a supervised run's usage is its runners' own reports, added by the supervisor
    at = now_iso()
    if transcript:
        with transaction(conn):
            conn.execute("INSERT OR IGNORE INTO budget_usage (run_key, transcript, added_at) "
                         "VALUES (?, ?, ?)", (run_key, transcript, at))
    run = conn.execute("SELECT started_at FROM budget_runs WHERE run_key = ?",
                       (run_key,)).fetchone()
    if run is None:
        return
    paths = [Path(row[0]) for row in conn.execute(
        "SELECT transcript FROM budget_usage WHERE run_key = ? ORDER BY added_at", (run_key,))]
    since = _minute_before(run["started_at"])
    tokens, dollars, per_model = usage_cost(paths, since)
    with transaction(conn):
        conn.execute("UPDATE budget_runs SET tokens = ?, cost_usd = ?, usage_json = ? "
                     "WHERE run_key = ?", (tokens, dollars, fastjson.dumps(per_model), run_key))


def _minute_before(stamp: str) -> str:
    from datetime import datetime, timedelta

    moment = datetime.fromisoformat(stamp.replace("Z", "+00:00")) - timedelta(minutes=1)
    return now_iso(moment)


def start_measuring(project: str, run_key: str, transcript: str) -> None:
    """Measure in a detached process: the hook returns at once and the process outlives it."""
    from clavain import detached

    detached.start("clavain.guards.usage", [project, run_key, transcript], cwd=project)


def main(argv: list[str]) -> None:
    """The detached measurement: `PROJECT RUN_KEY TRANSCRIPT`. A failure is one line in the
    project's hooks.log, never an exception (nobody would read it)."""
    project, run_key, transcript = argv
    try:
        from clavain.paths import StatePaths
        from clavain.store import db

        state = StatePaths.discover(project)
        conn = db.connect(state.db)
        try:
            measure(conn, run_key=run_key, transcript=transcript)
        finally:
            conn.close()
    except Exception as exc:
        from clavain.hooks import log_failure

        log_failure("usage", f"{type(exc).__name__}: {exc}", {"cwd": project})
