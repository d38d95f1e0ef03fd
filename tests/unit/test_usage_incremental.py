"""Tokens measured incrementally (guards/usage.py, migration 0010) against the naive full
re-read (`usage_cost`): a transcript appended in pieces, cut anywhere (mid-line too), gives
exactly the figures of reading it whole; a rewritten or truncated file is read again from the
start; a partial last line waits for its newline; a reset forgets the positions."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clavain.guards import report, usage
from clavain.store import db

STARTED = "2026-11-23T12:01:00.000Z"  # measured from a minute before: 12:00:00
RUN = "session:s1"


def _line(message_id: str | None, request_id: str | None, tokens: tuple[int, int, int, int],
          *, model: str = "claude-sonnet-4-5", sidechain: bool = False,
          stamp: str = "2026-11-23T12:05:00.000Z", hour: int = 0) -> str:
    message: dict = {"model": model, "usage": {
        "input_tokens": tokens[0], "output_tokens": tokens[1],
        "cache_creation_input_tokens": tokens[2], "cache_read_input_tokens": tokens[3],
        "cache_creation": {"ephemeral_1h_input_tokens": hour}}}
    if message_id is not None:
        message["id"] = message_id
    record: dict = {"type": "assistant", "timestamp": stamp, "isSidechain": sidechain,
                    "message": message}
    if request_id is not None:
        record["requestId"] = request_id
    return json.dumps(record)


def _tool_result(size: int) -> str:
    return json.dumps({"type": "user", "timestamp": "2026-11-23T12:05:00.000Z",
                       "message": {"role": "user", "content": "x" * size}})


def _connect(folder: Path):
    conn = db.connect(folder / "state.sqlite")
    conn.execute("INSERT INTO budget_runs (run_key, started_at, updated_at) VALUES (?, ?, ?)",
                 (RUN, STARTED, STARTED))
    conn.commit()
    return conn


def _measured(conn) -> tuple[int, float, dict]:
    row = conn.execute("SELECT tokens, cost_usd, usage_json FROM budget_runs WHERE run_key = ?",
                       (RUN,)).fetchone()
    return row["tokens"], row["cost_usd"], json.loads(row["usage_json"])


def _naive(transcript: Path, upto: int | None = None) -> tuple[int, float, dict]:
    """A full re-read of the transcript's whole lines (of its first `upto` bytes)."""
    data = transcript.read_bytes()[:upto]
    whole = transcript.parent / "naive" / transcript.name
    whole.parent.mkdir(exist_ok=True)
    whole.write_bytes(data[: data.rfind(b"\n") + 1])
    subagents = transcript.with_suffix("") / "subagents"
    if subagents.is_dir():
        copy = whole.with_suffix("") / "subagents"
        copy.mkdir(parents=True, exist_ok=True)
        for agent in subagents.iterdir():
            (copy / agent.name).write_bytes(agent.read_bytes())
    return usage.usage_cost([whole], usage._minute_before(STARTED))


def _same(measured: tuple[int, float, dict], naive: tuple[int, float, dict]) -> None:
    assert measured[0] == naive[0]
    assert measured[2] == naive[2]
    assert measured[1] == pytest.approx(naive[1])


RECORDS = st.lists(st.one_of(
    st.builds(lambda m, r, t, side, old, hour: _line(
        m, r, t, sidechain=side, hour=hour,
        stamp="2026-11-23T11:00:00.000Z" if old else "2026-11-23T12:05:00.000Z"),
        st.one_of(st.none(), st.sampled_from(["m1", "m2", "m3", "m4"])),
        st.one_of(st.none(), st.sampled_from(["r1", "r2", "r3"])),
        st.tuples(*[st.integers(0, 5000)] * 4), st.booleans(),
        st.integers(0, 5).map(lambda n: n == 0), st.integers(0, 100)),
    st.integers(0, 300).map(_tool_result),
    st.just("not json {"),
), min_size=1, max_size=25)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=RECORDS, cuts=st.lists(st.floats(0, 1), max_size=8))
def test_appended_in_pieces_measures_what_a_full_re_read_does(records: list[str],
                                                               cuts: list[float]) -> None:
    """Cut anywhere, mid-line too: after each piece the run holds the full re-read's figures
    for the whole lines written so far, and at the end those of the whole file."""
    data = ("\n".join(records) + "\n").encode()
    ends = sorted({int(cut * len(data)) for cut in cuts} | {len(data)})
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        transcript = folder / "s1.jsonl"
        transcript.write_bytes(b"")
        conn = _connect(folder)
        try:
            written = 0
            for end in ends:
                with open(transcript, "ab") as handle:
                    handle.write(data[written:end])
                written = end
                usage.measure(conn, run_key=RUN, transcript=str(transcript))
                _same(_measured(conn), _naive(transcript, end))
        finally:
            conn.close()


def test_a_measurement_reads_only_what_was_written_since(tmp_path: Path) -> None:
    """Bytes before the position are not read again: a count changed there (same length, away
    from the tail) is not seen, while a full re-read would see it."""
    transcript = tmp_path / "s1.jsonl"
    first = _line("m1", "r1", (100, 0, 0, 0)) + "\n" + _tool_result(200) + "\n"
    transcript.write_text(first)
    conn = _connect(tmp_path)
    usage.measure(conn, run_key=RUN, transcript=str(transcript))
    assert _measured(conn)[0] == 100
    transcript.write_text(first.replace('"input_tokens": 100', '"input_tokens": 900')
                          + _line("m2", "r2", (10, 0, 0, 0)) + "\n")
    usage.measure(conn, run_key=RUN, transcript=str(transcript))
    assert _measured(conn)[0] == 110
    assert _naive(transcript)[0] == 910
    row = conn.execute("SELECT read_to FROM budget_usage_files").fetchone()
    assert row["read_to"] == transcript.stat().st_size


def test_a_truncated_or_rewritten_transcript_is_read_again_from_the_start(
        tmp_path: Path) -> None:
    transcript = tmp_path / "s1.jsonl"
    transcript.write_text(_line("m1", "r1", (100, 0, 0, 0)) + "\n"
                          + _line("m2", "r2", (50, 0, 0, 0)) + "\n")
    conn = _connect(tmp_path)
    usage.measure(conn, run_key=RUN, transcript=str(transcript))
    assert _measured(conn)[0] == 150
    transcript.write_text(_line("m3", "r3", (7, 0, 0, 0)) + "\n")  # shorter than the position
    usage.measure(conn, run_key=RUN, transcript=str(transcript))
    _same(_measured(conn), _naive(transcript))
    assert _measured(conn)[0] == 7
    # Rewritten longer, with other bytes just before the old position: read from the start too.
    transcript.write_text(_line("m4", "r4", (1, 0, 0, 0)) + "\n"
                          + _line("m5", "r5", (2, 0, 0, 0)) + "\n")
    usage.measure(conn, run_key=RUN, transcript=str(transcript))
    assert _measured(conn)[0] == 3
    assert conn.execute("SELECT count(*) FROM budget_responses").fetchone()[0] == 2


def test_a_partial_last_line_is_read_once_it_ends(tmp_path: Path) -> None:
    transcript = tmp_path / "s1.jsonl"
    whole, partial = _line("m1", "r1", (100, 0, 0, 0)), _line("m2", "r2", (40, 0, 0, 0))
    transcript.write_text(whole + "\n" + partial)  # complete JSON, but no newline yet
    conn = _connect(tmp_path)
    usage.measure(conn, run_key=RUN, transcript=str(transcript))
    assert _measured(conn)[0] == 100
    assert conn.execute("SELECT read_to FROM budget_usage_files").fetchone()[0] == \
        len(whole) + 1
    with open(transcript, "a") as handle:
        handle.write("\n")
    usage.measure(conn, run_key=RUN, transcript=str(transcript))
    assert _measured(conn)[0] == 140


def test_subagents_and_resumed_sessions_count_each_response_once(tmp_path: Path) -> None:
    """A subagent file that appears later and a sidechain copy in it, and a second session's
    copy of a response: the figures of a full re-read of all of them."""
    main, resumed = tmp_path / "s1.jsonl", tmp_path / "s2.jsonl"
    main.write_text(_line("m1", "r1", (100, 10, 0, 0)) + "\n")
    conn = _connect(tmp_path)
    usage.measure(conn, run_key=RUN, transcript=str(main))
    agent = tmp_path / "s1" / "subagents" / "agent-a.jsonl"
    agent.parent.mkdir(parents=True)
    agent.write_text(_line("m1", None, (100, 10, 0, 0), sidechain=True) + "\n"
                     + _line("a1", "ra", (5, 5, 0, 0), model="claude-haiku-4-5") + "\n")
    with open(main, "a") as handle:
        handle.write(_line("m2", "r2", (20, 0, 300, 0), hour=100) + "\n")
    usage.measure(conn, run_key=RUN)
    resumed.write_text(_line("m2", "r2", (20, 0, 300, 0), hour=100) + "\n"
                       + _line("m3", "r3", (1, 0, 0, 0)) + "\n")
    usage.measure(conn, run_key=RUN, transcript=str(resumed))
    tokens, dollars, per_model = _measured(conn)
    naive = usage.usage_cost([main, resumed], usage._minute_before(STARTED))
    assert (tokens, per_model) == (naive[0], naive[2]) and dollars == pytest.approx(naive[1])
    assert tokens == 110 + 10 + 320 + 1


def test_a_reset_forgets_the_positions_and_counts_from_the_new_start(tmp_path: Path) -> None:
    transcript = tmp_path / "s1.jsonl"
    transcript.write_text(_line("m1", "r1", (100, 0, 0, 0)) + "\n")
    conn = _connect(tmp_path)
    usage.measure(conn, run_key=RUN, transcript=str(transcript))
    report.reset(conn, RUN, {"by": "person", "via": "test"})
    for table in ("budget_measures", "budget_usage_files", "budget_responses",
                  "budget_messages"):
        assert conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0, table
    later = "2026-11-23T13:00:00.000Z"
    conn.execute("INSERT INTO budget_runs (run_key, started_at, updated_at) VALUES (?, ?, ?)",
                 (RUN, later, later))
    conn.commit()
    with open(transcript, "a") as handle:
        handle.write(_line("m2", "r2", (30, 0, 0, 0), stamp="2026-11-23T13:00:30.000Z") + "\n")
    usage.measure(conn, run_key=RUN, transcript=str(transcript))
    assert _measured(conn)[0] == 30  # m1 came before the new start


def test_a_new_start_alone_measures_the_run_again(tmp_path: Path) -> None:
    """The run's start moved without the rows being deleted (another path to a new start):
    the saved positions belong to the old one and are not used."""
    transcript = tmp_path / "s1.jsonl"
    transcript.write_text(_line("m1", "r1", (100, 0, 0, 0), stamp="2026-11-23T12:00:30.000Z")
                          + "\n" + _line("m2", "r2", (30, 0, 0, 0),
                                         stamp="2026-11-23T13:00:30.000Z") + "\n")
    conn = _connect(tmp_path)
    usage.measure(conn, run_key=RUN, transcript=str(transcript))
    assert _measured(conn)[0] == 130
    conn.execute("UPDATE budget_runs SET started_at = '2026-11-23T13:00:00.000Z'")
    conn.commit()
    usage.measure(conn, run_key=RUN)
    assert _measured(conn)[0] == 30


def test_a_measurement_overtaken_by_another_is_not_saved(tmp_path: Path) -> None:
    """Two measurers that overlap read from the same positions: the one that saves second
    would count the new lines again; it keeps the first one's figures instead."""
    transcript = tmp_path / "s1.jsonl"
    transcript.write_text(_line(None, None, (100, 0, 0, 0)) + "\n")  # no id: counted by place
    conn = _connect(tmp_path)
    other = db.connect(tmp_path / "state.sqlite")
    usage.measure(conn, run_key=RUN, transcript=str(transcript))
    with open(transcript, "a") as handle:
        handle.write(_line(None, None, (5, 0, 0, 0)) + "\n")
    since = usage._minute_before(STARTED)
    slow = usage._read_on(conn, RUN, [transcript], since)
    usage.measure(other, run_key=RUN)  # saves first
    assert _measured(conn)[0] == 105
    assert usage._save_measured(conn, RUN, STARTED, since, slow) is False
    usage.measure(conn, run_key=RUN)  # nothing new since: still 105, not 110
    assert _measured(conn)[0] == 105
    other.close()
    # A measurement that began before a reset is not saved over the new run either.
    stale = usage._read_on(conn, RUN, [transcript], since)
    report.reset(conn, RUN, {"by": "person", "via": "test"})
    conn.execute("INSERT INTO budget_runs (run_key, started_at, updated_at) VALUES (?, ?, ?)",
                 (RUN, STARTED, STARTED))
    conn.commit()
    assert usage._save_measured(conn, RUN, STARTED, since, stale) is False
    assert _measured(conn)[0] == 0


def test_a_measurement_overtaken_by_another_reads_on_and_saves_its_lines(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A SubagentStop releases a reservation right after its measurement: when another
    measurer saves first what it read before the agent's last lines, this one reads on from
    what that one saved and saves the rest, never leaving them in neither figure."""
    transcript = tmp_path / "s1.jsonl"
    transcript.write_text(_line(None, None, (100, 0, 0, 0)) + "\n")
    conn = _connect(tmp_path)
    other = db.connect(tmp_path / "state.sqlite")
    usage.measure(conn, run_key=RUN, transcript=str(transcript))
    since = usage._minute_before(STARTED)
    early = usage._read_on(other, RUN, [transcript], since)  # read before the new line
    real_save = usage._save_measured
    overtaken: list[bool] = []

    def overtaking(*args: object) -> bool:
        if not overtaken:  # the other measurer saves first
            overtaken.append(True)
            assert real_save(other, RUN, STARTED, since, early)
        return real_save(*args)

    with open(transcript, "a") as handle:
        handle.write(_line(None, None, (5, 0, 0, 0)) + "\n")
    monkeypatch.setattr(usage, "_save_measured", overtaking)
    usage.measure(conn, run_key=RUN)
    assert _measured(conn)[0] == 105
    other.close()
