"""One subagent's own cap, and what its end settles (migrations 0012, 0013).

Every tool call whose payload carries the host's `agent_id` (Claude Code sets it only for a
call made inside a subagent) is counted against that subagent in `budget_agents`: its calls,
and, only while `budgets.perAgentMaxTokens` is set, the tokens of its own transcript
(`<session>/subagents/agent-<agent_id>.jsonl` beside the session's `<session>.jsonl`), read
on from where the last call stopped. Once it is over `perAgentMaxCalls` or `perAgentMaxTokens`
each further call it makes is denied, telling it to stop and return what it has
(`over_reason` recorded), and its parent is told once: the run's `agents_untold` marks it,
and the main thread's next counted call, which reads the run's row anyway, carries the note
(`tell_parent`). A SubagentStop's additionalContext would reach the subagent itself (the
2.1.330 binary says so, and it would make it go on), never its parent.

The calls counted are those the PreToolUse hook is registered for (Bash, web, edits,
Agent/Task/Workflow): hooking Read, Grep and Glob too would put a process start on every
main-thread read, which carries no `agent_id` (the host cannot match on it).
`perAgentMaxTokens` bounds what the uncounted ones cost.

At SubagentStop (`subagent_stopped`) the subagent's transcript is measured into its row (its
tokens, dollars, ended_at and model bucket: the history new subagents are projected from), the
session's measured figure is folded forward (`usage.measure`, synchronously: the spend is in
`budget_runs` before the reservation goes, so there is no moment where neither counts it), and
then one of its reservations is released (`fanout.release_one`).
"""

from __future__ import annotations

import os

# The four counts of a response's usage (as `verdicts.transcript` counts them).
USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_creation_input_tokens",
                "cache_read_input_tokens")
STOP = ("Clavain budget: this subagent is over its own cap ({why}). Stop now: make no more tool "
        "calls and return what you have as your final answer (what is done, what is left and "
        "why). Do not work around this.")
TOLD = ("Clavain budget: subagent {kind} ({agent}) was stopped: {why}. Its further tool calls "
        "are denied; use what it returns, and do not start it again for the same work without "
        "asking the user.")
# How long SubagentStop waits for the host to flush the subagent's last line.
TRANSCRIPT_WAIT_SECONDS = 5.0


def agent_transcript(transcript: str | None, agent_id: str) -> str | None:
    """Where the host writes a subagent's transcript: beside its session's `<session>.jsonl`,
    in `<session>/subagents/` (as `verdicts.transcript.subagent_files` finds them)."""
    if not transcript or not transcript.endswith(".jsonl") or not _plain(agent_id):
        return None
    return os.path.join(transcript[: -len(".jsonl")], "subagents", f"agent-{agent_id}.jsonl")


def _plain(text: str) -> bool:
    return 0 < len(text) <= 200 and "/" not in text and "\\" not in text and ".." not in text \
        and "\0" not in text


def count_call(conn, run_key: str, call: dict, limits: dict, at: str) -> str | None:
    """Count one call of the subagent `call["agent_id"]`, or the denial when it is over its cap
    (the denied call is not counted). Inside the caller's write transaction."""
    agent_id = call["agent_id"]
    conn.execute("INSERT INTO budget_agents (run_key, agent_id, agent_type, started_at, "
                 "updated_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (run_key, agent_id) DO NOTHING",
                 (run_key, agent_id, call.get("agent_type"), at, at))
    row = conn.execute("SELECT * FROM budget_agents WHERE run_key = ? AND agent_id = ?",
                       (run_key, agent_id)).fetchone()
    if row["over_reason"]:
        return STOP.format(why=row["over_reason"])
    tokens, read_to, last = row["tokens"], row["read_to"], row["last_message"]
    if limits.get("perAgentMaxTokens") is not None and call.get("agent_file"):
        tokens, read_to, last = read_on(_written(call["agent_file"]), tokens, read_to, last)
    why = _over(row["calls"], tokens, limits)
    if why:
        conn.execute("UPDATE budget_agents SET tokens = ?, read_to = ?, last_message = ?, "
                     "over_reason = ?, updated_at = ? WHERE run_key = ? AND agent_id = ?",
                     (tokens, read_to, last, why, at, run_key, agent_id))
        conn.execute("UPDATE budget_runs SET agents_untold = agents_untold + 1 "
                     "WHERE run_key = ?", (run_key,))
        return STOP.format(why=why)
    conn.execute("UPDATE budget_agents SET calls = calls + 1, tokens = ?, read_to = ?, "
                 "last_message = ?, updated_at = ? WHERE run_key = ? AND agent_id = ?",
                 (tokens, read_to, last, at, run_key, agent_id))
    return None


def _written(path: str) -> str:
    """The subagent's file: `path`, or, for an agent of a Workflow run, the same name in
    `subagents/workflows/<run>/` (where 2.1.330 writes those)."""
    if os.path.isfile(path):
        return path
    runs = os.path.join(os.path.dirname(path), "workflows")
    try:
        names = os.listdir(runs)
    except OSError:
        return path
    found = (os.path.join(runs, run, os.path.basename(path)) for run in sorted(names))
    return next((candidate for candidate in found if os.path.isfile(candidate)), path)


def _over(calls: int, tokens: int, limits: dict) -> str | None:
    """Why one more call would take the subagent over its cap, or None."""
    most_calls, most_tokens = limits.get("perAgentMaxCalls"), limits.get("perAgentMaxTokens")
    if most_calls is not None and calls >= most_calls:
        return f"{calls:,} of perAgentMaxCalls {most_calls:,} tool calls made"
    if most_tokens is not None and tokens >= most_tokens:
        return f"{tokens:,} of perAgentMaxTokens {most_tokens:,} tokens used"
    return None


def read_on(path: str, tokens: int, read_to: int, last: str | None) -> tuple[int, int, str | None]:
    """(tokens, position, last response) after reading the whole lines of the subagent's
    transcript past `read_to`. The host writes one line per content block, each repeating its
    response's usage, one response after another: a line of the response just counted is
    skipped (the larger total is not kept: a cap errs by at most one response's growth). A
    file shorter than the position was rewritten: read from the start."""
    from clavain import fastjson

    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size < read_to:
                tokens, read_to, last = 0, 0, None
            handle.seek(read_to)
            block = handle.read()
    except OSError:  # not written yet, or unreadable: what was counted stands
        return tokens, read_to, last
    end = block.rfind(b"\n") + 1
    for line in block[:end].split(b"\n"):
        if b'"usage"' not in line:  # tool results, the bulk of a transcript: never decoded
            continue
        try:
            record = fastjson.loads(line.decode("utf-8", errors="replace"))
        except (ValueError, RecursionError):
            continue
        message = record.get("message") if isinstance(record, dict) else None
        usage = message.get("usage") if isinstance(message, dict) else None
        if not isinstance(usage, dict) or record.get("type") != "assistant":
            continue
        key = f"{message.get('id')}/{record.get('requestId')}"
        if key != last or message.get("id") is None:
            tokens += sum(value for value in map(usage.get, USAGE_FIELDS)
                          if type(value) is int and value > 0)
            last = key
    return tokens, read_to + end, last


def tell_parent(conn, run_key: str, at: str) -> str | None:
    """The note for the main thread about subagents stopped by their cap and not yet told
    (marked told), or None. Inside the caller's write transaction."""
    rows = conn.execute("SELECT agent_id, agent_type, over_reason FROM budget_agents WHERE "
                        "run_key = ? AND over_reason IS NOT NULL AND parent_told_at IS NULL "
                        "ORDER BY updated_at", (run_key,)).fetchall()
    conn.execute("UPDATE budget_agents SET parent_told_at = ? WHERE run_key = ? AND "
                 "over_reason IS NOT NULL AND parent_told_at IS NULL", (at, run_key))
    conn.execute("UPDATE budget_runs SET agents_untold = 0 WHERE run_key = ?", (run_key,))
    return " ".join(TOLD.format(kind=row["agent_type"] or "?", agent=row["agent_id"],
                                why=row["over_reason"]) for row in rows) or None


def finish(conn, run_key: str, agent_id: str, agent_type: str | None, *, model: str,
           tokens: int, cost_usd: float, at: str) -> None:
    """Record a stopped subagent's measured figures (the history of its model bucket)."""
    conn.execute(
        "INSERT INTO budget_agents (run_key, agent_id, agent_type, model, tokens, cost_usd, "
        "started_at, updated_at, ended_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (run_key, agent_id) DO UPDATE SET model = excluded.model, "
        "tokens = excluded.tokens, cost_usd = excluded.cost_usd, "
        "agent_type = coalesce(budget_agents.agent_type, excluded.agent_type), "
        "updated_at = excluded.updated_at, ended_at = excluded.ended_at",
        (run_key, agent_id, agent_type, model, tokens, cost_usd, at, at, at))


def subagent_stopped(payload: dict, agent_usage=None) -> str | None:
    """SubagentStop: measure the subagent into its row, fold the session's spend forward, then
    release one of its reservations. `agent_usage`: the subagent's transcript as the verdict
    read it whole (a `transcript.Usage`), so it is not read again. A note for hooks.log, or
    None."""
    from clavain.guards.counting import counting_here

    where = counting_here(payload, database_needed=True)
    agent_id = payload.get("agent_id")
    if where is None or not isinstance(agent_id, str) or not _plain(agent_id):
        return None
    _, _, database, context = where
    run_key = context["run_key"]
    agent_type = payload.get("agent_type")
    agent_type = agent_type[:200] if isinstance(agent_type, str) else None
    measured, note = _measure_agent(payload, agent_usage)
    from clavain.clock import now_iso
    from clavain.guards import fanout, usage
    from clavain.store import db

    conn = db.connect(database)
    try:
        transcript = payload.get("transcript_path")
        # First the spend, then the reservation: in between both count it (over, never under).
        usage.measure(conn, run_key=run_key,
                      transcript=transcript if isinstance(transcript, str) and transcript
                      else None)
        with db.transaction(conn):
            detail = fanout.release_one(conn, run_key, agent_type)
            tokens, cost, main_model = measured
            bucket = (detail or {}).get("model")
            if bucket not in (*fanout.MODELS, fanout.INHERIT):
                bucket = fanout.model_family(main_model)
            finish(conn, run_key, agent_id, agent_type, model=bucket, tokens=tokens,
                   cost_usd=cost, at=now_iso())
    finally:
        conn.close()
    return note  # no reservation matched: one made before budgets counted, or none at all


def _measure_agent(payload: dict, known=None) -> tuple[tuple[int, float, str | None], str | None]:
    """((tokens, dollars, main model), a note) of the subagent's own transcript, once the host
    wrote its final message (waiting at most TRANSCRIPT_WAIT_SECONDS); from `known` (its usage,
    read whole already) when the subagent started none of its own."""
    path = payload.get("agent_transcript_path")
    if not isinstance(path, str) or not path:
        return (0, 0.0, None), None
    import time
    from pathlib import Path

    from clavain.guards.usage import usage_cost
    from clavain.verdicts.transcript import holds_final_message

    message = payload.get("last_assistant_message")
    deadline = time.monotonic() + TRANSCRIPT_WAIT_SECONDS
    # `known` was read once the verdict saw the final message there: no second look.
    while known is None and isinstance(message, str) and message.strip() and \
            not holds_final_message(Path(path), message) and time.monotonic() < deadline:
        time.sleep(0.05)
    if not os.path.isfile(path):
        return (0, 0.0, None), f"agent_transcript_path {path!r} not written in " \
            f"{TRANSCRIPT_WAIT_SECONDS:g} s: measured as 0 (the session's figure counts it later)"
    from clavain.verdicts.transcript import subagent_files

    if known is not None and not subagent_files(Path(path)):
        from clavain.guards.usage import priced

        tokens, dollars, per_model = priced(known)
    else:
        tokens, dollars, per_model = usage_cost([Path(path)])
    main = max(per_model, key=lambda m: per_model[m]["cost_usd"]) if per_model else None
    return (tokens, dollars, main), None
