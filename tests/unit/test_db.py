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


def test_a_failed_commit_leaves_no_open_transaction(tmp_path: Path) -> None:
    """COMMIT can fail (a deferred foreign key); the connection must not stay inside the
    transaction holding the write lock, or every later `transaction` fails."""
    conn = db.connect(tmp_path / "state.sqlite")
    with pytest.raises(sqlite3.IntegrityError), db.transaction(conn):
        conn.execute("PRAGMA defer_foreign_keys = ON")
        conn.execute("INSERT INTO nodes (id, type, parent_id, created_at, updated_at) "
                     "VALUES ('a', 'task', 'ghost', 'now', 'now')")
    assert not conn.in_transaction
    assert conn.execute("SELECT count(*) FROM nodes").fetchone()[0] == 0
    with db.transaction(conn):
        conn.execute("INSERT INTO meta (key, value) VALUES ('ok', '1')")
    assert conn.execute("SELECT value FROM meta WHERE key = 'ok'").fetchone()[0] == "1"


def test_rollback_keeps_the_original_error_when_sqlite_already_rolled_back(
        tmp_path: Path) -> None:
    conn = db.connect(tmp_path / "state.sqlite")
    with pytest.raises(RuntimeError, match="original"), db.transaction(conn):
        conn.execute("ROLLBACK")  # what SQLite does by itself on SQLITE_FULL, IOERR, …
        raise RuntimeError("original")
    assert not conn.in_transaction


def test_deleting_a_done_dependency_keeps_unmet_deps_right(tmp_path: Path) -> None:
    conn = db.connect(tmp_path / "state.sqlite")
    rows = [("a", "done"), ("b", "open"), ("x", "open")]
    conn.executemany("INSERT INTO nodes (id, type, status, created_at, updated_at) "
                     "VALUES (?, 'task', ?, 'now', 'now')", rows)
    conn.executemany("INSERT INTO deps (node_id, depends_on_id) VALUES ('x', ?)", [("a",), ("b",)])
    unmet = lambda: conn.execute(  # noqa: E731
        "SELECT unmet_deps FROM nodes WHERE id = 'x'").fetchone()[0]
    assert unmet() == 1
    conn.execute("DELETE FROM nodes WHERE id = 'a'")  # satisfied edge: no change
    assert unmet() == 1
    conn.execute("DELETE FROM nodes WHERE id = 'b'")  # the unmet edge goes away
    assert unmet() == 0


def test_a_version_1_database_migrates_its_json_to_the_current_shape(tmp_path: Path) -> None:
    """Databases written before 0002 keep their nodes: camelCase JSON becomes snake_case, a
    node's question moves to its new column, scaffolded verify nodes learn which task they
    check."""
    path = tmp_path / "old.sqlite"
    old = sqlite3.connect(path, isolation_level=None)
    sql = (Path(db.MIGRATIONS_DIR) / "0001_workgraph.sql").read_text()
    for statement in db._statements(sql):
        old.execute(statement)
    old.execute("PRAGMA user_version = 1")
    at = "2026-01-01T00:00:00.000Z"
    old.execute("INSERT INTO nodes (id, type, retry_policy_json, checkpoint_json, created_at, "
                "updated_at) VALUES ('t', 'task', '{\"maxAttempts\": 4}', "
                "'{\"question\": \"Which?\", \"runId\": \"r1\", \"askedAt\": \"x\"}', ?, ?)",
                (at, at))
    old.execute("INSERT INTO nodes (id, type, inputs_json, created_at, updated_at) VALUES "
                "('verify-t', 'verify', '[{\"nodeId\": \"t\", \"key\": \"out.summary\", "
                "\"as\": \"taskSummary\"}, {\"nodeId\": \"__run__\", \"key\": \"ctx.a\"}]', ?, ?)",
                (at, at))
    old.close()
    conn = db.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == db.latest_version()
    from clavain.workgraph import nodes

    task = nodes.get_node(conn, "t")
    assert task["retry_policy"] == {"max_attempts": 4}
    assert task["human_question"]["question"] == "Which?"
    assert task["human_question"]["run_id"] == "r1"
    assert (task["escalations"], task["superseded_by"], task["lock_renewed_at"]) == (0, None, None)
    check = nodes.get_node(conn, "verify-t")
    assert check["inputs"] == [{"node_id": "t", "key": "out.summary", "as": "taskSummary"},
                               {"node_id": "__run__", "key": "ctx.a"}]
    assert check["verifies"] == "t"


def test_open_reads_no_migration_file_when_current(tmp_path: Path, monkeypatch) -> None:
    import builtins

    path = tmp_path / "state.sqlite"
    db.connect(path).close()
    opened = []
    original = builtins.open

    def counting(file, *args, **kwargs):
        opened.append(str(file))
        return original(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", counting)
    db.connect(path).close()
    assert not [name for name in opened if name.endswith(".sql")]
