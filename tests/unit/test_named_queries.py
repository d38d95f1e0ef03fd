"""Named queries (`store.queries`): every group's files parse and check out on both backends,
a PostgreSQL block names only queries the SQLite file has, a query with nothing to run on a
backend returns an empty result, and what a call names must exist."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from clavain.store import queries
from clavain.store.db import connect


def test_every_group_loads_on_both_backends_and_each_query_has_text_somewhere() -> None:
    assert "store" in queries.groups()
    for group in queries.groups():
        for name in queries.names(group):
            texts = [queries.text(name, backend) for backend in queries.BACKENDS]
            assert any(texts), f"{name} runs nothing on any backend"
            assert "?" not in texts[1] and ":name" not in texts[1], (name, texts[1])


def test_every_sqlite_query_compiles_against_the_migrated_schema(tmp_path: Path) -> None:
    conn = connect(tmp_path / "state.sqlite")
    for group in queries.groups():
        for name in queries.names(group):
            statement = queries.text(name)
            if statement and not statement.upper().startswith("PRAGMA"):
                # EXPLAIN prepares the statement (tables, columns, syntax) without running it.
                conn.execute("EXPLAIN " + statement, _nulls(statement))


def _nulls(statement: str) -> dict[str, None] | tuple[None, ...]:
    import re

    named = re.findall(r"(?<!:):([A-Za-z_]\w*)", statement)
    if named:
        return dict.fromkeys(named)
    return (None,) * statement.count("?")


def test_parse_reads_names_descriptions_and_refuses_repeats() -> None:
    parsed = queries.parse("-- the group\n\n-- name: one\n-- what it does\nSELECT 1;\n"
                           "-- name: nothing\n-- name: two\nSELECT ?\n  FROM t\n")
    assert parsed == {"one": "SELECT 1", "nothing": "", "two": "SELECT ?\n  FROM t"}
    with pytest.raises(queries.QueryError, match="named twice"):
        queries.parse("-- name: a\nSELECT 1\n-- name: a\nSELECT 2\n")
    with pytest.raises(queries.QueryError, match="before the first"):
        queries.parse("SELECT 1\n-- name: a\nSELECT 2\n")
    with pytest.raises(queries.QueryError, match="not a query name"):
        queries.parse("-- name: a b\nSELECT 1\n")


def test_a_postgresql_block_must_name_a_query_of_the_sqlite_file(tmp_path: Path,
                                                               monkeypatch) -> None:
    (tmp_path / "sqlite").mkdir()
    (tmp_path / "postgresql").mkdir()
    (tmp_path / "sqlite" / "g.sql").write_text("-- name: a\nSELECT :x, '50%'\n")
    (tmp_path / "postgresql" / "g.sql").write_text("-- name: b\nSELECT 1\n")
    monkeypatch.setattr(queries, "QUERIES_DIR", str(tmp_path))
    monkeypatch.setattr(queries, "_loaded", {})
    with pytest.raises(queries.QueryError, match="does not: b"):
        queries.text("g.a", "postgresql")
    (tmp_path / "postgresql" / "g.sql").unlink()
    monkeypatch.setattr(queries, "_loaded", {})
    # No PostgreSQL block: the SQLite text in psycopg's placeholders, translated at load.
    assert queries.text("g.a", "postgresql") == "SELECT %(x)s, '50%%'"


def test_unknown_names_are_refused_and_an_empty_block_runs_nothing(tmp_path: Path) -> None:
    with pytest.raises(queries.QueryError, match="no query group"):
        queries.text("nowhere.at_all")
    with pytest.raises(queries.QueryError, match="no query 'missing'"):
        queries.text("store.missing")
    with pytest.raises(queries.QueryError, match=r"group\.query"):
        queries.text("plain")

    class Recorder:
        dialect = "postgresql"
        def __init__(self) -> None:
            self.ran: list[tuple[str, object]] = []

        def execute(self, statement: str, params: object) -> str:
            self.ran.append((statement, params))
            return "cursor"

    recorder = Recorder()
    assert queries.run(recorder, "store.defer_foreign_keys") == "cursor"
    assert recorder.ran == [("SET CONSTRAINTS ALL DEFERRED", ())]
    conn = sqlite3.connect(":memory:")
    assert queries.run(conn, "store.defer_foreign_keys").fetchall() == []


def test_the_copy_reads_and_writes_the_columns_transfer_names(tmp_path: Path) -> None:
    from clavain.store.transfer import COLUMNS

    conn = connect(tmp_path / "state.sqlite")
    for table, columns in COLUMNS.items():
        cursor = queries.run(conn, f"transfer.read_{table}", ("g",))
        assert tuple(d[0] for d in cursor.description) == columns, table
        insert = queries.text(f"transfer.insert_{table}")
        assert insert.count("?") == len(columns), table
        listed = insert[insert.index("(") + 1:insert.index(")")]
        assert tuple(c.strip() for c in listed.split(",")) == columns, table
