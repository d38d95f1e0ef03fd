import multiprocessing
import sqlite3
from pathlib import Path

import pytest

from clavain.store import db


def test_connect_creates_and_migrates(tmp_path: Path) -> None:
    conn = db.connect(tmp_path / "s" / "state.sqlite")
    assert conn.execute("PRAGMA user_version").fetchone()[0] == db.latest_version() >= 1
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"meta", "nodes", "deps", "kv_latest", "kv_history", "events"} <= tables


def test_migrate_is_idempotent(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    db.connect(path).close()
    conn = db.connect(path)
    assert db.migrate(conn) == db.latest_version()
    assert db.schema_version(path) == db.latest_version()


def test_schema_version_of_missing_file_does_not_create_it(tmp_path: Path) -> None:
    assert db.schema_version(tmp_path / "none.sqlite") is None
    assert not (tmp_path / "none.sqlite").exists()


def test_transaction_rolls_back_whole(tmp_path: Path) -> None:
    conn = db.connect(tmp_path / "state.sqlite")
    with pytest.raises(RuntimeError), db.transaction(conn):
        conn.execute("INSERT INTO meta (key, value) VALUES ('a', '1')")
        raise RuntimeError("boom")
    assert conn.execute("SELECT COUNT(*) FROM meta WHERE key='a'").fetchone()[0] == 0
    with db.transaction(conn):
        conn.execute("INSERT INTO meta (key, value) VALUES ('a', '1')")
    assert conn.execute("SELECT value FROM meta WHERE key='a'").fetchone()[0] == "1"


def test_statement_splitter_keeps_semicolons_in_strings() -> None:
    script = ("CREATE TABLE t (a TEXT DEFAULT 'x;y');\n-- note; here\n"
              "INSERT INTO t VALUES ('1;2');\n")
    statements = list(db._statements(script))
    assert len(statements) == 2
    assert statements[1].endswith("('1;2');")


def _open(path: str) -> int:
    return db.connect(path).execute("PRAGMA user_version").fetchone()[0]


def test_concurrent_first_open_migrates_once(tmp_path: Path) -> None:
    path = str(tmp_path / "race.sqlite")
    with multiprocessing.get_context("spawn").Pool(6) as pool:
        versions = pool.map(_open, [path] * 12)
    assert set(versions) == {db.latest_version()}
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
