import multiprocessing
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from clavain.store import db

REPO = Path(__file__).resolve().parents[2]


def test_connect_creates_and_migrates(tmp_path: Path) -> None:
    conn = db.connect(tmp_path / "s" / "state.sqlite")
    assert conn.execute("PRAGMA user_version").fetchone()[0] == db.latest_version() >= 1
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"meta", "graphs", "nodes", "deps", "kv_latest", "kv_history", "events"} <= tables
    # Work added with no sprint active goes to the default graph, there from the start.
    assert [tuple(row) for row in conn.execute("SELECT id, kind, status FROM graphs")] == [
        ("default", "default", "active")]


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
        conn.execute("INSERT INTO nodes (graph_id, id, type, parent_id, created_at, "
                     "updated_at) VALUES ('default', 'a', 'task', 'ghost', 'now', 'now')")
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
    conn.executemany("INSERT INTO nodes (graph_id, id, type, status, created_at, updated_at) "
                     "VALUES ('default', ?, 'task', ?, 'now', 'now')", rows)
    conn.executemany("INSERT INTO deps (graph_id, node_id, depends_on_id) "
                     "VALUES ('default', 'x', ?)", [("a",), ("b",)])
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
    from clavain.paths import StatePaths
    from clavain.workgraph import nodes
    from clavain.workgraph.graphs import DEFAULT_GRAPH, Graph

    g = Graph(conn, DEFAULT_GRAPH, StatePaths(tmp_path / ".clavain"))
    task = nodes.get_node(g, "t")
    assert task["graph_id"] == "default"
    assert task["retry_policy"] == {"max_attempts": 4}
    assert task["human_question"]["question"] == "Which?"
    assert task["human_question"]["run_id"] == "r1"
    assert (task["escalations"], task["superseded_by"], task["lock_renewed_at"]) == (0, None, None)
    check = nodes.get_node(g, "verify-t")
    assert check["inputs"] == [{"node_id": "t", "key": "out.summary", "as": "taskSummary"},
                               {"node_id": "__run__", "key": "ctx.a"}]
    assert check["verifies"] == "t"



def _database_at(path: Path, version: int) -> sqlite3.Connection:
    """A database built by migrations 0001..`version` only, as an older Clavain left it."""
    old = sqlite3.connect(path, isolation_level=None)
    old.row_factory = sqlite3.Row
    old.execute("PRAGMA foreign_keys = ON")
    for number, name in db._migration_files():
        if number <= version:
            for statement in db._statements((Path(db.MIGRATIONS_DIR) / name).read_text()):
                old.execute(statement)
    old.execute(f"PRAGMA user_version = {version}")
    return old


def _rows(conn: sqlite3.Connection, table: str, order: str) -> list[dict]:
    return [dict(row) for row in conn.execute(f"SELECT * FROM {table} ORDER BY {order}")]


def test_a_version_3_database_moves_into_the_default_graph(tmp_path: Path) -> None:
    """0004 rebuilds every table that names a node with a graph_id: a version-3 database's
    nodes, edges, kv values and history and events all land in the `default` graph unchanged,
    ids and counters included, and the rebuilt triggers and indexes work on them."""
    from clavain.paths import StatePaths
    from clavain.workgraph import claim_pick, kv, nodes
    from clavain.workgraph.graphs import DEFAULT_GRAPH, Graph

    path = tmp_path / "v3.sqlite"
    old = _database_at(path, 3)
    first, later = "2026-01-01T00:00:00.000Z", "2026-01-02T00:00:00.000Z"
    node_rows = [  # id, type, status, parent, created
        ("p", "plan", "done", None, first), ("t", "task", "done", "p", later),
        ("h", "task", "failed", "p", later), ("u", "task", "open", "p", later),
        ("v", "verify", "open", "p", later), ("q", "task", "needs_human", None, later),
        ("x", "task", "in_progress", None, later)]
    old.executemany("INSERT INTO nodes (id, type, status, parent_id, created_at, updated_at) "
                    "VALUES (?, ?, ?, ?, ?, ?)", [(*row, row[4]) for row in node_rows])
    old.execute("UPDATE nodes SET title = 'the task', attempts = 2, completed_at = ?, "
                "retry_policy_json = '{\"max_attempts\":4}', "
                "inputs_json = '[{\"node_id\":\"p\",\"key\":\"out.summary\"}]' "
                "WHERE id = 't'", (later,))
    old.execute("UPDATE nodes SET escalations = 1, auto_resets = 1, superseded_by = 'p' "
                "WHERE id = 'h'")
    old.execute("UPDATE nodes SET verifies = 'u', verify_json = '[\"pytest -q\"]' "
                "WHERE id = 'v'")
    old.execute("UPDATE nodes SET human_question_json = '{\"question\":\"Which?\"}' "
                "WHERE id = 'q'")
    old.execute("UPDATE nodes SET lock_run_id = 'r1', lock_pid = 42, lock_host = 'box', "
                "lock_started_at = ?, lock_renewed_at = ? WHERE id = 'x'", (later, later))
    old.executemany("INSERT INTO deps (node_id, depends_on_id, kind) VALUES (?, ?, ?)", [
        ("u", "t", "done"), ("u", "h", "settled"), ("v", "u", "done")])
    for n in range(1, 4):
        old.execute("INSERT INTO kv_history (node_id, key, value_text, run_id, attempt, "
                    "created_at) VALUES ('t', 'out.summary', ?, 'r0', ?, ?)",
                    (f"v{n}", n, later))
    old.execute("INSERT INTO kv_latest (node_id, key, value_text, fingerprint_json, run_id, "
                "attempt, updated_at) VALUES ('t', 'out.summary', 'v3', '{\"inputs\":\"abc\"}', "
                "'r0', 3, ?)", (later,))
    old.execute("INSERT INTO kv_latest (node_id, key, artifact_path, artifact_sha256, "
                "updated_at) VALUES ('__run__', 'ctx.big', 'artifacts/' || ?, ?, ?)",
                ("0" * 64, "0" * 64, later))
    old.executemany("INSERT INTO events (node_id, from_status, to_status, run_id, at, note) "
                    "VALUES (?, ?, ?, ?, ?, ?)", [
                        ("t", None, "open", None, first, "added"),
                        ("t", "open", "done", "r0", later, ""),
                        ("h", "in_progress", "failed", "r0", later, "broke")])
    old.execute("INSERT INTO meta (key, value) VALUES ('kept', 'yes')")
    old.execute("INSERT INTO budget_runs (run_key, started_at, updated_at, commands) "
                "VALUES ('session:s', ?, ?, 7)", (first, first))
    before = {"nodes": _rows(old, "nodes", "id"),
              "deps": _rows(old, "deps", "node_id, depends_on_id"),
              "kv_latest": _rows(old, "kv_latest", "node_id, key"),
              "kv_history": _rows(old, "kv_history", "id"),
              "events": _rows(old, "events", "id")}
    assert [(n["id"], n["unmet_deps"]) for n in before["nodes"] if n["unmet_deps"]] == [("v", 1)]
    old.close()

    conn = db.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == db.latest_version() >= 4
    assert [dict(row) for row in conn.execute("SELECT * FROM graphs")] == [
        {"id": "default", "kind": "default", "status": "active",
         "title": "work added with no sprint active", "created_at": first, "closed_at": None}]
    for table, rows in before.items():
        after = _rows(conn, table, "id" if table in ("nodes", "kv_history", "events") else
                      "node_id, depends_on_id" if table == "deps" else "node_id, key")
        assert {row.pop("graph_id") for row in after} == {"default"}, table
        if table == "nodes":  # later migrations' columns, at their defaults
            assert {row.pop("commands_json") for row in after} == {"[]"}
            assert {row.pop("lock_generation") for row in after} == {0}
            assert {row.pop("crashes") for row in after} == {0}
            for column in ("lock_lease_ms", "lock_runner_pid", "lock_runner_identity",
                           "origin_json"):
                assert {row.pop(column) for row in after} == {None}
        assert after == rows, table
    assert conn.execute("SELECT value FROM meta WHERE key = 'kept'").fetchone()[0] == "yes"
    assert conn.execute("SELECT commands FROM budget_runs").fetchone()[0] == 7
    # Nothing of the old tables is left; the schema is whole.
    names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    assert not [name for name in names if name.endswith("_v3")]
    assert {"deps_count_insert", "deps_count_delete", "nodes_delete_edges", "deps_count_status",
            "nodes_ready", "events_node", "kv_history_node_key"} <= names
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []

    # The graph API finds it all in the default graph.
    g = Graph(conn, DEFAULT_GRAPH, StatePaths(tmp_path / ".clavain"))
    task = nodes.get_node(g, "t")
    assert (task["graph_id"], task["retry_policy"], task["attempts"]) == (
        "default", {"max_attempts": 4}, 2)
    assert task["inputs"] == [{"node_id": "p", "key": "out.summary"}]
    assert nodes.get_node(g, "u")["depends_on"] == ["h", "t"]
    assert nodes.get_node(g, "q")["human_question"] == {"question": "Which?"}
    assert kv.get(g, "t", "out.summary")["fingerprint"] == {"inputs": "abc"}
    assert [e["value"] for e in kv.history(g, "t", "out.summary")] == ["v3", "v2", "v1"]
    assert [(e["node_id"], e["key"]) for e in kv.ls(g)] == [
        ("__run__", "ctx.big"), ("t", "out.summary")]
    assert claim_pick.select_next(g) == "u"  # the ready index: u's edges are satisfied, v waits
    # The rebuilt triggers keep counting on the migrated rows.
    conn.execute("UPDATE nodes SET status = 'done' WHERE graph_id = 'default' AND id = 'u'")
    assert nodes.get_node(g, "v")["unmet_deps"] == 0
    conn.execute("UPDATE nodes SET status = 'open' WHERE graph_id = 'default' AND id = 't'")
    assert nodes.get_node(g, "u")["unmet_deps"] == 1
    # New rows continue the old id sequences.
    nodes.record_event(g, "t", "done", "open", at=later, note="after")
    assert conn.execute("SELECT max(id) FROM events").fetchone()[0] == 4


def test_a_version_3_database_without_nodes_gets_a_default_graph(tmp_path: Path) -> None:
    path = tmp_path / "empty-v3.sqlite"
    _database_at(path, 3).close()
    conn = db.connect(path)
    [row] = conn.execute("SELECT id, kind, status, created_at FROM graphs").fetchall()
    assert tuple(row)[:3] == ("default", "default", "active")
    assert row["created_at"].endswith("Z")


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


def _open_fresh(path: str, results) -> None:  # a process opening the database at once
    try:
        db.connect(path).close()
        results.put("ok")
    except Exception as exc:  # the test reports whatever it was
        results.put(f"{type(exc).__name__}: {exc}")


def test_processes_opening_a_new_database_together_all_succeed(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    for round_ in range(6):  # switching to WAL once raced ("database is locked")
        path = str(tmp_path / f"fresh-{round_}.sqlite")
        results = context.Queue()
        workers = [context.Process(target=_open_fresh, args=(path, results)) for _ in range(4)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(60)
        assert [results.get(timeout=10) for _ in workers] == ["ok"] * 4


def test_the_driver_loads_without_functools_and_keeps_its_statement_cache() -> None:
    """Where nothing imported `functools` (a hook: `python -I -S`), the driver gets a stand-in
    holding only `lru_cache`: the connection still caches and evicts statements, the stand-in
    is gone afterwards and a later `import functools` is the real module."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "from clavain.store import db\n"
        "assert 'functools' not in sys.modules and 'collections' not in sys.modules\n"
        "conn = db.connect(sys.argv[2])\n"
        "conn.execute('CREATE TABLE IF NOT EXISTS t (n INTEGER)')\n"
        "for round_ in range(2):\n"
        "    for n in range(300):  # more distinct statements than the cache holds (128)\n"
        "        conn.execute(f'INSERT INTO t (n) VALUES ({n} + ?)', (round_,))\n"
        "total = conn.execute('SELECT count(*), sum(n) FROM t').fetchone()\n"
        "assert tuple(total) == (600, 2 * sum(range(300)) + 300), tuple(total)\n"
        "conn.close()\n"
        "import functools\n"
        "assert functools.reduce(lambda a, b: a + b, [1, 2]) == 3\n"
        "print('ok', db.sqlite3.__name__)\n")
    with tempfile.TemporaryDirectory() as folder:
        result = subprocess.run([sys.executable, "-I", "-S", "-c", code, str(REPO / "lib"),
                                 os.path.join(folder, "state.sqlite")],
                                capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["ok", "_sqlite3"]
