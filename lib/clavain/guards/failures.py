"""PostToolUseFailure (async: the model is not waiting): what a call that ran and failed
changes in its run's budget. A test command is remembered red, so running it again with nothing
changed is caught; a failed edit is marked, so it never counts as a patch applied; a failed
Agent/Task/Workflow call gives back the reservation its PreToolUse made (`guards.fanout`).
An interrupted or timed-out test run says nothing about the tests. Stdlib only."""

from __future__ import annotations

import time


def post_tool_use_failure(payload: dict) -> None:
    from clavain.guards import budget, fanout
    from clavain.guards.counting import counting_here
    from clavain.guards.gate import _open_database, _text

    tool = payload.get("tool_name")
    error = payload.get("error")
    fan_out = tool in fanout.FANOUT_TOOLS
    if not fan_out and (tool not in ("Bash", *budget.EDIT_TOOLS) or payload.get("is_interrupt")
                        or (isinstance(error, str) and "timed out" in error.lower())):
        return
    tool_use_id = _text(payload.get("tool_use_id"))
    if fan_out and tool_use_id is None:
        return
    where = counting_here(payload, database_needed=True)
    if where is None:
        return
    from clavain.fsutil import UnsafePathError

    _, _, database, context = where
    try:
        conn = _open_database(database)
    except UnsafePathError:  # a FIFO, a device or a symlink: not opened, nothing recorded
        return
    try:
        if fan_out:  # it started nothing, or what it started is measured as the session's
            fanout.release_failed(conn, context["run_key"], tool_use_id)
        else:
            call = budget.describe(tool, payload.get("tool_input"), context["patterns"])
            record_failure(conn, run_key=context["run_key"], call=call, tool_use_id=tool_use_id)
    finally:
        conn.close()


def record_failure(conn, *, run_key: str, call: dict, tool_use_id: str | None) -> None:
    """After a call failed: a test command is remembered red with the change count it ran
    at (read from its own PreToolUse record, so an edit already counted since does not hide
    in it); a failed edit (text not found, rejected) is marked so it never counts as a patch
    applied."""
    from clavain.guards.budget import stamp
    from clavain.store.db import transaction

    if call["kind"] not in ("test", "edit"):
        return
    with transaction(conn):
        row = conn.execute(
            "SELECT id, changes_at FROM budget_calls WHERE tool_use_id = ? AND run_key = ? "
            "ORDER BY id DESC LIMIT 1", (tool_use_id, run_key)).fetchone() \
            if tool_use_id else None
        if call["kind"] == "edit":
            if row is not None:
                conn.execute("UPDATE budget_calls SET decision = 'failed' WHERE id = ?",
                             (row["id"],))
            return
        if row is None:  # no PreToolUse record (another id, a hook that failed): the count now
            row = conn.execute("SELECT changes AS changes_at FROM budget_runs WHERE run_key = ?",
                               (run_key,)).fetchone()
        if row is None:
            return
        conn.execute(
            "INSERT INTO budget_red_tests (run_key, fingerprint, changes_at, at) "
            "VALUES (?, ?, ?, ?) ON CONFLICT (run_key, fingerprint) DO UPDATE SET "
            "changes_at = excluded.changes_at, at = excluded.at",
            (run_key, call["fingerprint"], row["changes_at"], stamp(time.time())))
