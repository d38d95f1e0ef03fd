"""Connection, transactions and `PRAGMA user_version` migrations for `.clavain/state.sqlite`.

Conventions (docs/ARCHITECTURE.md): autocommit connection (`isolation_level=None`), WAL,
`foreign_keys=ON`, a generous `busy_timeout`, every writer inside `BEGIN IMMEDIATE` so lock
waits happen up front (where busy_timeout applies) instead of failing mid-transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

BUSY_TIMEOUT_MS = 30_000


def _migration_scripts() -> list[tuple[int, str, str]]:
    """(version, name, sql) for every `NNNN_name.sql` file, in order."""
    folder = resources.files("clavain.store") / "migrations"
    found = []
    for entry in folder.iterdir():
        name = entry.name
        if not name.endswith(".sql"):
            continue
        version = int(name.split("_", 1)[0])
        found.append((version, name, entry.read_text(encoding="utf-8")))
    found.sort()
    return found


def latest_version() -> int:
    scripts = _migration_scripts()
    return scripts[-1][0] if scripts else 0


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
    """Bring the schema to the newest version; safe when several processes race to do it."""
    for version, _name, sql in _migration_scripts():
        if conn.execute("PRAGMA user_version").fetchone()[0] >= version:
            continue
        with transaction(conn):
            # Re-check under the write lock: another process may have migrated meanwhile.
            if conn.execute("PRAGMA user_version").fetchone()[0] >= version:
                continue
            for statement in _statements(sql):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {int(version)}")
    return conn.execute("PRAGMA user_version").fetchone()[0]


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
