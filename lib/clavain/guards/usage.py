"""Tokens and dollars of a run, measured from Claude Code's transcripts after tool calls.

A session's usage is its transcript plus its subagents' (deduplicated like the verdicts' token
counts: one entry per API response), priced per model with both cache-write rates
(`pricing`). A run (a sprint can span sessions) sums its sessions. PreToolUse starts a
measurement at most every 30 s as a detached process (`start_measuring`): the model never waits
for it, and later calls compare the last measured figures with the limits.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from clavain.clock import now_iso


def session_cost(transcript: Path) -> tuple[int, float, dict]:
    """(tokens, dollars, per model {tokens..., cost_usd}) of a session and its subagents."""
    from clavain.guards.pricing import cost_usd
    from clavain.verdicts.transcript import session_usage

    total, _ = session_usage(transcript, with_subagents=True)
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


def measure(conn, *, run_key: str, transcript: str) -> None:
    """Measure one session of a run and refresh the run's totals."""
    from clavain.store.db import transaction

    path = Path(transcript)
    if not path.is_file():
        return
    tokens, dollars, per_model = session_cost(path)
    at = now_iso()
    with transaction(conn):
        conn.execute(
            "INSERT INTO budget_usage (run_key, transcript, tokens, cost_usd, usage_json, "
            "measured_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (run_key, transcript) DO UPDATE "
            "SET tokens = excluded.tokens, cost_usd = excluded.cost_usd, "
            "usage_json = excluded.usage_json, measured_at = excluded.measured_at",
            (run_key, str(path), tokens, dollars, json.dumps(per_model), at))
        conn.execute(
            "UPDATE budget_runs SET tokens = (SELECT coalesce(sum(tokens), 0) FROM budget_usage "
            "WHERE run_key = ?1), cost_usd = (SELECT coalesce(sum(cost_usd), 0) FROM "
            "budget_usage WHERE run_key = ?1), updated_at = ?2 WHERE run_key = ?1",
            (run_key, at))


def start_measuring(project: str, run_key: str, transcript: str) -> None:
    """Measure in a detached process (`python -S`, its own session, no pipes): the hook returns
    at once and the process outlives it."""
    import subprocess

    lib = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    code = ("import sys; sys.path[:0] = [sys.argv[1]]\n"
            "from clavain.guards.usage import main; main(sys.argv[2:])")
    subprocess.Popen([sys.executable, "-S", "-c", code, lib, project, run_key, transcript],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True,
                     cwd=project)


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
