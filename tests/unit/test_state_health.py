"""`store.health`: the one judgement of the state database — its kinds and fix lines, the bounded
quick check, the marker that makes every later open refuse a damaged file, and every library
caller (the supervisor's damage line, doctor's rows, the PreToolUse hook's failure) in its
words."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from clavain.store import db, faults, health
from clavain.store.db import sqlite3


@pytest.fixture(autouse=True)
def _no_check_on_open(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(db, "CHECK_ON_OPEN", False)
    monkeypatch.setattr(db, "_checked", set())


def _database(folder: Path, rows: int = 400) -> Path:
    path = folder / "state.sqlite"
    conn = db.connect(path)
    with db.transaction(conn):
        for index in range(rows):
            conn.execute("INSERT INTO graphs (id, kind, created_at) VALUES (?, 'run', ?)",
                         (f"g-{index:04d}-" + "x" * 200, "2026-01-01"))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return path


def _damage(path: Path, table: str = "graphs") -> None:
    conn = sqlite3.connect(str(path))
    size = conn.execute("PRAGMA page_size").fetchone()[0]
    pages = [row[0] for row in conn.execute(
        "SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf'", (table,))]
    conn.close()
    with open(path, "r+b") as handle:
        handle.seek((pages[len(pages) // 2] - 1) * size)
        handle.write(bytes([0x0D]) + b"\xff" * (size - 1))


def test_each_failure_has_one_kind_and_one_fix(tmp_path: Path, monkeypatch) -> None:
    path = str(tmp_path / "state.sqlite")
    damaged = health.judge(sqlite3.DatabaseError("database disk image is malformed"), path)
    assert damaged.kind == health.DAMAGED and damaged.fix_line == health.recovery(path)
    assert "clavain db recover" in damaged.fix_line and "keeps the damaged one" in \
        damaged.fix_line
    assert "rm " not in damaged.fix_line and "start over" not in damaged.line
    assert health.judge(faults.StoreDamaged("x"), path).fix_line == health.recovery(path)
    locked = health.judge(sqlite3.OperationalError("database is locked"), path)
    assert locked.kind == health.LOCKED
    assert "stayed busy (another clavain process holds it); try again" in locked.line
    for exc in (sqlite3.OperationalError("database or disk is full"),
                OSError(errno.ENOSPC, "No space left on device")):
        full = health.judge(exc, path)
        assert full.kind == health.FULL and "free space" in full.fix_line
    readonly = sqlite3.OperationalError("attempt to write a readonly database")
    assert health.judge(readonly, path) is None  # the folder is writable: not the state's
    monkeypatch.setattr(os, "access", lambda p, mode: False)
    judged = health.judge(readonly, path)
    assert judged.kind == health.READ_ONLY and "is not writable by" in judged.fix_line
    assert "chmod" in judged.fix_line and "owner" in judged.fix_line
    assert health.judge(ValueError("a bug"), path) is None


def test_the_quick_check_finds_a_damaged_page_the_reads_never_touch(tmp_path: Path) -> None:
    path = _database(tmp_path)
    conn = db.connect(path)
    assert health.quick_check(conn, path).kind == health.HEALTHY
    conn.close()
    _damage(path)
    conn = db.connect(path)
    conn.execute("SELECT count(*) FROM nodes").fetchone()  # reads elsewhere: no complaint
    assert health.quick_check(conn, path).kind == health.DAMAGED
    conn.close()


def test_a_command_open_refuses_a_damaged_file_and_so_does_every_later_open(
        tmp_path: Path, monkeypatch) -> None:
    path = _database(tmp_path)
    _damage(path)
    before = path.read_bytes()
    monkeypatch.setattr(db, "CHECK_ON_OPEN", True)
    with pytest.raises(faults.StoreDamaged) as first:
        db.connect(path)
    assert first.value.judgement.kind == health.DAMAGED
    assert health.recovery(str(path)) in str(first.value) and first.value.exit_code == 1
    monkeypatch.setattr(db, "CHECK_ON_OPEN", False)  # a hook's open: one stat, no check
    with pytest.raises(faults.StoreDamaged) as later:
        db.connect(path)
    assert health.recovery(str(path)) in str(later.value)
    assert faults.kind(later.value) == faults.DAMAGED
    assert path.read_bytes() == before
    # Recovered and put in its place: used again, the marker gone.
    os.replace(path, tmp_path / "state.sqlite.damaged")
    _database(tmp_path, rows=1)
    db.connect(path).close()
    assert not Path(f"{path}-damage.json").exists()


def test_the_supervisor_and_doctor_say_the_same_line(tmp_path: Path) -> None:
    from clavain import doctor
    from clavain.paths import StatePaths

    state = StatePaths.discover(tmp_path)
    state.root.mkdir(parents=True, exist_ok=True)
    _database(state.root)
    _damage(state.db)
    row = doctor._database(state)
    line = health.damage_message(state.db, sqlite3.DatabaseError(
        "database disk image is malformed"))
    assert row["status"] == "fail" and row["state"] == health.DAMAGED
    assert health.recovery(str(state.db)) in row["detail"]
    assert health.recovery(str(state.db)) in line and str(state.db) in line


def test_the_hook_names_a_read_only_state_in_the_same_words(tmp_path: Path,
                                                            monkeypatch) -> None:
    """The PreToolUse failure path words a read-only state as every command does (root writes
    through modes, so the refusal is given in-process)."""
    import json

    from clavain.guards import gate

    project = tmp_path / "project"
    (project / ".clavain").mkdir(parents=True)
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(project))

    def refuse(path):
        raise sqlite3.OperationalError("attempt to write a readonly database")

    real = os.access
    monkeypatch.setattr(gate, "_open_database", refuse)
    monkeypatch.setattr(os, "access", lambda p, mode: False if str(p).endswith(
        ".clavain") else real(p, mode))
    output = gate.pre_tool_use({"hook_event_name": "PreToolUse", "session_id": "s",
                                "cwd": str(project), "tool_name": "Bash",
                                "tool_input": {"command": "ls"}})
    assert "permissionDecision" not in json.dumps(output)
    assert "read-only" in output["systemMessage"]
    assert "is not writable by" in output["systemMessage"]


def test_a_run_ended_by_damage_never_says_nothing_is_left(capsys) -> None:
    from clavain.supervisor.progress import print_final

    line = health.make(health.DAMAGED, "/p/.clavain/state.sqlite", "malformed").line
    metrics = {"timeline": [], "llm_invocations_by_role": {}, "llm_invocations": 0,
               "verify_without_llm": 0, "tokens": 0, "cost_usd": 0.0, "wall_seconds": 1.0,
               "peak_concurrency": 1}
    print_final({"run_id": "r", "status": "blocked", "reason": "store_damaged",
                 "message": line, "done": [], "left": [], "metrics": metrics})
    out = capsys.readouterr().out
    assert health.recovery("/p/.clavain/state.sqlite") in out
    assert "left: nothing" not in out and "cannot be read" in out


def test_a_locked_database_names_who_holds_it(tmp_path: Path) -> None:
    import subprocess
    import sys
    import time

    path = _database(tmp_path, rows=1)
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sqlite3, sys, time; c = sqlite3.connect(sys.argv[1]); "
        "c.execute('SELECT 1 FROM graphs').fetchall(); print('open', flush=True); "
        "time.sleep(30)"), str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        time.sleep(0.1)
        judged = health.judge(sqlite3.OperationalError("database is locked"), path)
    finally:
        holder.kill()
        holder.wait()
    assert judged.kind == health.LOCKED
    if os.path.isdir("/proc"):
        assert f"pid {holder.pid}" in judged.fix_line
    assert "wait for it to finish, or stop it" in judged.fix_line
