"""Tokens and dollars of a run, measured from Claude Code's transcripts after tool calls.

A session's usage is its transcript plus its subagents' (deduplicated like the verdicts' token
counts: one entry per API response), priced per model with both cache-write rates
(`pricing`). A run (a sprint can span sessions) is measured over all its sessions together,
from its start on: what a session spent before a sprint is not charged to it, and `clavain
budget reset` starts the count again. PreToolUse starts a
measurement at most every 30 s as a detached process (`start_measuring`): the model never waits
for it, and later calls compare the last measured figures with the limits.

A measurement reads on from where the last one stopped (`measure`): each file's position and
the responses counted so far are kept in the state database (migration 0010), so its cost is
what was written since, not the session again; the figures are those of a full re-read
(`usage_cost`). A file now shorter than its position, or changed before it, is read again from
the start with the rest of the run. A line is read once it ends with its newline.
"""

from __future__ import annotations

# No pathlib, datetime or typing at import: the tool call that starts a measurement imports
# this module for `start_measuring` alone (~20 ms of imports it would never use).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path


def usage_cost(transcripts: list[Path], since: str | None = None) -> tuple[int, float, dict]:
    """(tokens, dollars, per model {token counts, cost_usd}) of sessions and their subagents,
    together (a response copied into several files counts once)."""
    from clavain.verdicts.transcript import subagent_files, usage_of_files

    files = [f for t in transcripts if t.is_file() for f in (t, *subagent_files(t))]
    return priced(usage_of_files(files, since))


def priced(total) -> tuple[int, float, dict]:
    """(tokens, dollars, per model) of a `transcript.Usage`."""
    from clavain.guards.pricing import cost_usd

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
    from clavain.guards.counting import SUPERVISED_PREFIX
    from clavain.store.db import transaction

    if run_key.startswith(SUPERVISED_PREFIX):
        return  # a supervised run's usage is its runners' own reports, added by the supervisor
    from pathlib import Path

    from clavain.clock import now_iso

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
    # Another measurer that saved first wins; reading on from what it saved, this one's lines
    # are still counted (a SubagentStop releases a reservation only after its measurement).
    for _ in range(MEASURE_TRIES):
        measured = _read_on(conn, run_key, paths, since)
        if measured is None:  # a file was rewritten: the whole run again
            measured = _read_on(conn, run_key, paths, since, from_start=True)
        if _save_measured(conn, run_key, run["started_at"], since, measured):
            return


MEASURE_TRIES = 3
# How many bytes before a file's position are kept to recognise it as the same file.
TAIL_BYTES = 64
CHUNK_BYTES = 1 << 22


def _read_on(conn, run_key: str, transcripts: list[Path], since: str, *,
             from_start: bool = False) -> tuple | None:
    """(deduplicated responses, {path: (position, tail)}, what was loaded) after reading each
    file of the run on from its position, or None when a file was rewritten (shorter than its
    position, or other bytes before it). From the start: when asked, on the run's first
    measurement, and when its start moved (a reset). Only the responses the new lines may
    repeat are loaded (by message id): the cost is the new lines', not the session's."""
    from clavain.verdicts.transcript import _Deduper, feed_lines, subagent_files

    state = conn.execute("SELECT since, generation, anonymous FROM budget_measures "
                         "WHERE run_key = ?", (run_key,)).fetchone()
    loaded = {"generation": state["generation"] if state else None, "entries": {},
              "messages": {}, "positions": {}, "from_start": True, "anonymous": 0}
    if state is not None and state["since"] == since and not from_start:
        loaded.update(from_start=False, anonymous=state["anonymous"], positions={
            row["path"]: (row["read_to"], bytes(row["tail"])) for row in conn.execute(
                "SELECT path, read_to, tail FROM budget_usage_files WHERE run_key = ?",
                (run_key,))})
    positions = dict(loaded["positions"])
    lines: list[bytes] = []
    files = [f for t in transcripts if t.is_file() for f in (t, *subagent_files(t))]
    for path in files:
        key = str(path)
        position = _read_file_on(path, *positions.get(key, (0, b"")), lines)
        if position is None:
            return None
        positions[key] = position
    deduper = _Deduper()
    if not loaded["from_start"]:
        _restore(conn, run_key, deduper, loaded, _message_ids(lines))
    feed_lines(deduper, lines, since)
    return deduper, positions, loaded


def _message_ids(lines: list[bytes]) -> set[str]:
    """The message ids the new lines carry (what they may repeat)."""
    from clavain import fastjson  # `json` imports `re`
    from clavain.verdicts.transcript import decoded_line

    found = set()
    for line in lines:
        try:
            record = fastjson.loads(decoded_line(line))
        except (ValueError, RecursionError):
            continue
        message = record.get("message") if isinstance(record, dict) else None
        message_id = message.get("id") if isinstance(message, dict) else None
        if isinstance(message_id, str):
            found.add(message_id)
    return found


def _restore(conn, run_key: str, deduper, loaded: dict, message_ids: set[str]) -> None:
    """Put in `deduper` the saved responses and first lines of `message_ids`, as the
    deduplicator left them (verdicts.transcript: one owner for what counts once)."""
    for message_id in message_ids:
        for row in conn.execute("SELECT * FROM budget_responses WHERE run_key = ? AND "
                                "message_id = ?", (run_key, message_id)):
            loaded["entries"][_key(row["response"])] = (
                (row["input_tokens"], row["output_tokens"], row["cache_creation_input_tokens"],
                 row["cache_read_input_tokens"]), row["total"], row["model"],
                row["cache_write_1h"])
        row = conn.execute("SELECT response, sidechain FROM budget_messages WHERE run_key = ? "
                           "AND message_id = ?", (run_key, message_id)).fetchone()
        if row is not None:
            loaded["messages"][message_id] = (_key(row["response"]), bool(row["sidechain"]))
    deduper.entries.update(loaded["entries"])
    deduper._by_message.update(loaded["messages"])
    deduper._anonymous = loaded["anonymous"]


def _read_file_on(path: Path, position: int, tail: bytes,
                  lines: list[bytes]) -> tuple[int, bytes] | None:
    """Add to `lines` the usage lines among the whole lines of `path` after `position`; the
    new (position, tail), or None when the file is not the one read before."""
    import os

    from clavain.verdicts.transcript import marked_lines

    with open(path, "rb") as handle:
        if os.fstat(handle.fileno()).st_size < position:
            return None
        if position:
            handle.seek(position - len(tail))
            if handle.read(len(tail)) != tail:
                return None
        pending: list[bytes] = []  # the unfinished last line, in pieces
        at = end = position  # where the next chunk starts; just past the last whole line
        while chunk := handle.read(CHUNK_BYTES):
            cut = chunk.rfind(b"\n")
            if cut < 0:
                pending.append(chunk)
            else:
                block = b"".join([*pending, chunk[: cut + 1]]) if pending else chunk[: cut + 1]
                pending = [chunk[cut + 1:]] if cut + 1 < len(chunk) else []
                lines.extend(marked_lines(block))
                end = at + cut + 1
            at += len(chunk)
        if end == position:
            return position, tail
        handle.seek(max(0, end - TAIL_BYTES))
        return end, handle.read(min(TAIL_BYTES, end))


def _key(text: str) -> object:
    """A response's deduplication key from its stored form (`_response`)."""
    from clavain import fastjson

    return int(text[1:]) if text.startswith("#") else tuple(fastjson.loads(text))


def _response(key: object) -> str:
    from clavain import fastjson

    return f"#{key}" if isinstance(key, int) else fastjson.dumps(list(key))


def _generation(conn, run_key: str) -> int | None:
    row = conn.execute("SELECT generation FROM budget_measures WHERE run_key = ?",
                       (run_key,)).fetchone()
    return None if row is None else row["generation"]


def _save_measured(conn, run_key: str, started_at: str, since: str, measured: tuple) -> bool:
    """Save a measurement and the run's figures, unless the run was reset meanwhile or another
    measurement saved first (its figures stand; the next one reads on from them)."""
    from clavain import fastjson
    from clavain.store.db import transaction

    deduper, positions, loaded = measured
    with transaction(conn):
        now = conn.execute("SELECT started_at FROM budget_runs WHERE run_key = ?",
                           (run_key,)).fetchone()
        if now is None or now["started_at"] != started_at or \
                _generation(conn, run_key) != loaded["generation"]:
            return False
        _save(conn, run_key, since, deduper, positions, loaded)
        tokens, dollars, per_model = priced(_saved_usage(conn, run_key))
        conn.execute("UPDATE budget_runs SET tokens = ?, cost_usd = ?, usage_json = ? "
                     "WHERE run_key = ?", (tokens, dollars, fastjson.dumps(per_model), run_key))
    return True


def _saved_usage(conn, run_key: str):
    """The run's `transcript.Usage` summed in SQL over its saved responses, priced by model as
    `Usage.usage` does (a response with no model is "unknown")."""
    from clavain.verdicts.transcript import Usage

    total = Usage()
    for row in conn.execute(
            "SELECT coalesce(model, 'unknown'), sum(input_tokens), sum(output_tokens), "
            "sum(cache_creation_input_tokens - cache_write_1h), sum(cache_write_1h), "
            "sum(cache_read_input_tokens) FROM budget_responses WHERE run_key = ? "
            "GROUP BY coalesce(model, 'unknown')", (run_key,)):
        total.per_model[row[0]] = list(row[1:])
        for field, count in zip(("input_tokens", "output_tokens", "cache_creation_input_tokens",
                                 "cache_creation_input_tokens", "cache_read_input_tokens"),
                                row[1:], strict=True):
            setattr(total, field, getattr(total, field) + count)
    return total


def _save(conn, run_key: str, since: str, deduper, positions: dict, loaded: dict) -> None:
    """Write what changed since `loaded` (SQL only: the caller's transaction)."""
    if loaded["from_start"]:
        for table in ("budget_usage_files", "budget_responses", "budget_messages"):
            conn.execute(f"DELETE FROM {table} WHERE run_key = ?", (run_key,))
    conn.executemany(
        "INSERT OR REPLACE INTO budget_responses (run_key, response, message_id, input_tokens, "
        "output_tokens, cache_creation_input_tokens, cache_read_input_tokens, total, model, "
        "cache_write_1h) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(run_key, _response(key), None if isinstance(key, int) else key[0], *counts, total,
          model, write_1h)
         for key, entry in deduper.entries.items() if loaded["entries"].get(key) != entry
         for counts, total, model, write_1h in (entry,)])
    conn.executemany(
        "INSERT OR IGNORE INTO budget_messages (run_key, message_id, response, sidechain) "
        "VALUES (?, ?, ?, ?)",
        [(run_key, message_id, _response(key), int(sidechain))
         for message_id, (key, sidechain) in deduper._by_message.items()
         if message_id not in loaded["messages"]])
    conn.executemany(
        "INSERT OR REPLACE INTO budget_usage_files (run_key, path, read_to, tail) "
        "VALUES (?, ?, ?, ?)",
        [(run_key, path, read_to, tail) for path, (read_to, tail) in positions.items()
         if loaded["positions"].get(path) != (read_to, tail)])
    conn.execute("INSERT INTO budget_measures (run_key, since, generation, anonymous) "
                 "VALUES (?, ?, 1, ?) ON CONFLICT (run_key) DO UPDATE SET since = excluded.since, "
                 "generation = generation + 1, anonymous = excluded.anonymous",
                 (run_key, since, deduper._anonymous))


def _minute_before(stamp: str) -> str:
    from clavain.clock import earlier_iso

    return earlier_iso(stamp, 60)


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
        from clavain.hook_log import log_failure

        log_failure("usage", f"{type(exc).__name__}: {exc}", {"cwd": project})
