"""Connection, transactions and `PRAGMA user_version` migrations for `.clavain/state.sqlite`.

Conventions (docs/ARCHITECTURE.md): autocommit connection (`isolation_level=None`), WAL,
`foreign_keys=ON`, a generous `busy_timeout`, every writer inside `BEGIN IMMEDIATE` so lock
waits happen up front (where busy_timeout applies) instead of failing mid-transaction.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

BUSY_TIMEOUT_MS = 30_000
# Package data beside this module (not importlib.resources: ~25 ms of imports on every hook).
MIGRATIONS_DIR = Path(__file__).parent / "migrations"


def _migration_files() -> list[tuple[int, str]]:
    """(version, file name) for every `NNNN_name.sql`, in order; names only, no file read."""
    found = []
    for name in os.listdir(MIGRATIONS_DIR):
        if name.endswith(".sql"):
            found.append((int(name.split("_", 1)[0]), name))
    found.sort()
    return found


def latest_version() -> int:
    files = _migration_files()
    return files[-1][0] if files else 0


def _statements(script: str) -> Iterator[str]:
    """Split a migration into statements so they can run inside one explicit transaction
    (`executescript` would commit behind our back)."""
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            statement = pending.strip()
            if statement and statement != ";":
                yield statement
            pending = ""
    if pending.strip():
        yield pending.strip()


def migrate(conn: sqlite3.Connection) -> int:
    """Bring the schema to the newest version; safe when several processes race to do it.
    Migration files are read only when the database is behind."""
    current = conn.execute("PRAGMA user_version").fetchone()[0]
    for version, name in _migration_files():
        if current >= version:
            continue
        sql = (MIGRATIONS_DIR / name).read_text(encoding="utf-8")
        with transaction(conn):
            # Re-check under the write lock: another process may have migrated meanwhile.
            current = conn.execute("PRAGMA user_version").fetchone()[0]
            if current >= version:
                continue
            for statement in _statements(sql):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {int(version)}")
            current = version
    return current


def connect(path: Path | str, *, migrate_schema: bool = True) -> sqlite3.Connection:
    """Open (creating if needed) the state database with Clavain's pragmas applied."""
    db_path = Path(path)
    db_path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(db_path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    if migrate_schema:
        migrate(conn)
    return conn


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """`BEGIN IMMEDIATE` … `COMMIT`, rolled back whole on any exception."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        # Inside the try: a failed COMMIT (a deferred foreign key) leaves the transaction open,
        # and a long-lived process would keep the write lock forever.
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:  # SQLite may have rolled back already (SQLITE_FULL, IOERR…)
            conn.execute("ROLLBACK")
        raise


def schema_version(path: Path | str) -> int | None:
    """The schema version of an existing database file, without creating or migrating it."""
    db_path = Path(path)
    if not db_path.exists():
        return None
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        return conn.execute("PRAGMA user_version").fetchone()[0]
    finally:
        conn.close()
