"""Spend reserved before it happens, so a run never passes its cap (migration 0012).

Work that will cost — a headless runner (`clavain run`), a subagent a session launches — is
given its projected cost as a reservation against its run before it starts, and it may start
only if what the run spent, what its other work holds, and this reservation together fit every
cap (dollars, tokens): `fits`. A reservation ends when what it stood for is measured and added
to the run (`release`, in the same transaction as the measured figures). A holder that died
before it reported keeps its reservation as spent (`charge`) until its transcript is measured.

The one owner of "how much is spoken for": the supervisor, the PreToolUse hook, `clavain
budget status`, the report and the status line all ask here. Stdlib only (the hook path);
every function runs on the caller's connection and inside the caller's transaction, so a
check and the reservation it allows are one step (`reserve_if_fits`).
"""

from __future__ import annotations

RUNNER = "runner"
SUBAGENT = "subagent"
HELD = "held"
CHARGED = "charged"
# (spent column, limit key, label) of the caps a reservation counts against.
CAPS = (("cost_usd", "maxCostUsd", "dollars"), ("tokens", "maxTokens", "tokens"))


def reserved(conn, run_key: str) -> dict:
    """{"tokens", "cost_usd", "count", "charged_cost_usd", "charged_tokens"}: what the run's
    live and charged reservations hold (charged ones count as spent: `spent_with_charged`)."""
    row = conn.execute(
        "SELECT count(*), coalesce(sum(tokens), 0), coalesce(sum(cost_usd), 0), "
        "coalesce(sum(CASE WHEN state = 'charged' THEN cost_usd END), 0), "
        "coalesce(sum(CASE WHEN state = 'charged' THEN tokens END), 0) "
        "FROM budget_reservations WHERE run_key = ?", (run_key,)).fetchone()
    return {"count": row[0], "tokens": int(row[1]), "cost_usd": float(row[2]),
            "charged_cost_usd": float(row[3]), "charged_tokens": int(row[4])}


def spent_with_charged(conn, run_key: str) -> dict:
    """{"tokens", "cost_usd"}: the run's one spend figure — measured, plus what holders that
    died unmeasured are charged. A database from before the reservations table: measured."""
    used = spent(conn, run_key)
    try:
        held = reserved(conn, run_key)
    except Exception as exc:  # sqlite3.OperationalError, without importing it here
        if "no such table" not in str(exc):
            raise
        return used
    return {"tokens": used["tokens"] + held["charged_tokens"],
            "cost_usd": used["cost_usd"] + held["charged_cost_usd"]}


def spent(conn, run_key: str) -> dict:
    """{"tokens", "cost_usd"} the run has measured (0 before its first)."""
    row = conn.execute("SELECT tokens, cost_usd FROM budget_runs WHERE run_key = ?",
                       (run_key,)).fetchone()
    return {"tokens": int(row[0]) if row else 0, "cost_usd": float(row[1]) if row else 0.0}


def headroom(conn, run_key: str, limits: dict) -> dict:
    """{"tokens", "cost_usd"}: what is left under each cap once spent and reserved are taken
    (never below 0); a cap that is off (budgets disabled) leaves None."""
    if not limits.get("enabled", True):
        return {"tokens": None, "cost_usd": None}
    used, held = spent(conn, run_key), reserved(conn, run_key)
    return {column: max(0.0, float(limits[key]) - used[column] - held[column])
            for column, key, _ in CAPS}


def fits(conn, run_key: str, limits: dict, *, tokens: float, cost_usd: float) -> str | None:
    """None when spent + reserved + (tokens, cost_usd) fits every cap; else one line naming the
    cap and the figures."""
    if not limits.get("enabled", True):
        return None
    used, held = spent(conn, run_key), reserved(conn, run_key)
    wanted = {"tokens": tokens, "cost_usd": cost_usd}
    for column, key, label in CAPS:
        total = used[column] + held[column] + wanted[column]
        if total > float(limits[key]) + 1e-9:
            return (f"{label}: {_figure(column, used[column])} spent + "
                    f"{_figure(column, held[column])} reserved + "
                    f"{_figure(column, wanted[column])} for this would pass the cap of "
                    f"{_figure(column, limits[key])} ({key})")
    return None


def reserve(conn, run_key: str, holder: str, *, kind: str, tokens: float, cost_usd: float,
            at: str, detail: dict | None = None) -> None:
    """Hold (tokens, cost_usd) for `holder` (a holder reserving again replaces its own)."""
    from clavain import fastjson

    conn.execute("INSERT INTO budget_runs (run_key, started_at, updated_at) VALUES (?, ?, ?) "
                 "ON CONFLICT (run_key) DO NOTHING", (run_key, at, at))
    conn.execute(
        "INSERT INTO budget_reservations (run_key, holder, kind, tokens, cost_usd, state, "
        "detail_json, reserved_at) VALUES (?, ?, ?, ?, ?, 'held', ?, ?) "
        "ON CONFLICT (run_key, holder) DO UPDATE SET kind = excluded.kind, "
        "tokens = excluded.tokens, cost_usd = excluded.cost_usd, state = 'held', "
        "detail_json = excluded.detail_json, reserved_at = excluded.reserved_at",
        (run_key, holder, kind, int(tokens), float(cost_usd), fastjson.dumps(detail or {}), at))


def add_spent(conn, run_key: str, *, tokens: int, cost_usd: float, at: str) -> None:
    """Add measured usage (tokens, cost_usd) to the run's row, creating the row if it has
    none yet; on the caller's transaction, with the `release` of what it stood for."""
    conn.execute("INSERT INTO budget_runs (run_key, started_at, updated_at) VALUES (?, ?, ?) "
                 "ON CONFLICT (run_key) DO NOTHING", (run_key, at, at))
    conn.execute("UPDATE budget_runs SET tokens = tokens + ?, cost_usd = cost_usd + ?, "
                 "updated_at = ? WHERE run_key = ?", (int(tokens), float(cost_usd), at, run_key))


def holders_named(conn, run_key: str, holder: str) -> set[str]:
    """Which of `holder` and `holder.N` (its later tries) hold a reservation of the run, live
    or charged: a new try takes a name none holds, so a charge is never overwritten."""
    return {row[0] for row in conn.execute(
        "SELECT holder FROM budget_reservations WHERE run_key = ? AND (holder = ? OR "
        "holder LIKE ?)", (run_key, holder, holder + ".%"))}


def note_transcript(conn, run_key: str, holder: str, path: str) -> bool:
    """Keep where `holder`'s transcript will be in its reservation's detail, so a holder that
    dies unmeasured can be measured later; whether it holds one. Call it inside a write
    transaction (a read-modify-write of the detail)."""
    from clavain import fastjson

    row = conn.execute("SELECT detail_json FROM budget_reservations WHERE run_key = ? AND "
                       "holder = ?", (run_key, holder)).fetchone()
    if row is None:
        return False
    detail = fastjson.loads(row[0] or "{}")
    detail["transcript"] = path
    conn.execute("UPDATE budget_reservations SET detail_json = ? WHERE run_key = ? AND "
                 "holder = ?", (fastjson.dumps(detail), run_key, holder))
    return True


def reserve_if_fits(conn, run_key: str, holder: str, limits: dict, *, kind: str,
                    tokens: float, cost_usd: float, at: str,
                    detail: dict | None = None) -> str | None:
    """`fits`, then `reserve` when it does: None when reserved, else why not. Call it inside
    one write transaction, so two callers cannot both take the last room."""
    why = fits(conn, run_key, limits, tokens=tokens, cost_usd=cost_usd)
    if why is None:
        reserve(conn, run_key, holder, kind=kind, tokens=tokens, cost_usd=cost_usd, at=at,
                detail=detail)
    return why


def release(conn, run_key: str, holder: str) -> dict | None:
    """End `holder`'s reservation (its spend is measured, or it never started); what it held,
    or None when it held nothing."""
    row = conn.execute("SELECT * FROM budget_reservations WHERE run_key = ? AND holder = ?",
                       (run_key, holder)).fetchone()
    if row is None:
        return None
    conn.execute("DELETE FROM budget_reservations WHERE run_key = ? AND holder = ?",
                 (run_key, holder))
    return _as_dict(row)


def charge(conn, run_key: str, holder: str) -> bool:
    """Its holder died before it reported: the reservation stays, counted as spent, until its
    transcript is measured. Whether there was one."""
    return conn.execute("UPDATE budget_reservations SET state = 'charged' WHERE run_key = ? "
                        "AND holder = ?", (run_key, holder)).rowcount > 0


def listed(conn, run_key: str, *, kind: str | None = None, state: str | None = None
           ) -> list[dict]:
    """The run's reservations, oldest first."""
    query = "SELECT * FROM budget_reservations WHERE run_key = ?"
    args: list = [run_key]
    if kind is not None:
        query += " AND kind = ?"
        args.append(kind)
    if state is not None:
        query += " AND state = ?"
        args.append(state)
    return [_as_dict(row) for row in conn.execute(query + " ORDER BY reserved_at, holder", args)]


def _as_dict(row) -> dict:
    from clavain import fastjson

    record = dict(zip(row.keys(), row, strict=True))
    try:
        record["detail"] = fastjson.loads(record.pop("detail_json") or "{}")
    except ValueError:
        record["detail"] = {}
    return record


def _figure(column: str, value: float) -> str:
    return f"${float(value):.2f}" if column == "cost_usd" else f"{int(value):,}"
