"""Raw SQL in tests, on either backend: a test that sets a state up (or looks at it) by hand
writes SQLite's placeholders, and on PostgreSQL they are put in psycopg's form here. The library
never does this at run time: its statements are named queries (`store.queries`)."""

from __future__ import annotations

from typing import Any

from clavain.store.placeholders import to_psycopg


def _text(conn: Any, statement: str) -> str:
    return to_psycopg(statement) if getattr(conn, "dialect", "sqlite") != "sqlite" else statement


def run_sql(conn: Any, statement: str, params: Any = ()) -> Any:
    return conn.execute(_text(conn, statement), params)


def run_sql_many(conn: Any, statement: str, rows: Any) -> Any:
    return conn.executemany(_text(conn, statement), rows)
