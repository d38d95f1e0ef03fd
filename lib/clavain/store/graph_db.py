"""Where a project's workgraph lives, and the few things that differ by backend.

The workgraph is in the project's own SQLite file (`.clavain/state.sqlite`, the default) or, for a
team, on a PostgreSQL server named by URL: `CLAVAIN_DB=postgresql://…` or `store.url` in
`.clavain/config.json`. Budgets and session state stay in the SQLite file either way (the hook
path never touches the network). Every workgraph front door opens its connection here; the
library above works on either connection (`store.postgres` explains how).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any, TypeVar

from clavain.errors import ClavainError
from clavain.locate import URL_SCHEMES
from clavain.paths import StatePaths

T = TypeVar("T")
PG_MIGRATIONS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                 "migrations_postgresql")
# Bookkeeping on the server, like SQLite's `PRAGMA user_version`: one row per applied file.
_VERSION_TABLE = ("CREATE TABLE IF NOT EXISTS clavain_schema ("
                  "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)")
_MIGRATE_LOCK = 0x6D696772  # "migr": one migrating client at a time


def is_url(value: str | None) -> bool:
    return bool(value) and value.startswith(URL_SCHEMES)  # type: ignore[union-attr]


def store_url(state: StatePaths) -> str | None:
    """The shared store's URL, or None for the project's SQLite file: CLAVAIN_DB when it is a
    URL (read by `StatePaths.discover`), else `store.url` in the config."""
    if state.store_url:
        check_url(state.store_url, "CLAVAIN_DB")
        return state.store_url
    from clavain import config as config_mod

    configured = config_mod.get(config_mod.load(state.config), "store.url")
    if configured and not is_url(configured):
        raise ClavainError(f"store.url in {state.config} is not a PostgreSQL URL "
                           "(postgresql://user@host:port/dbname); remove it to keep the "
                           "workgraph in the project's SQLite file")
    return configured or None


def check_url(value: str, source: str) -> None:
    if not is_url(value):
        from clavain.store.postgres import redact

        raise ClavainError(f"{source} {redact(value)!r} looks like a URL but not a PostgreSQL one "
                           "(postgresql://user@host:port/dbname); a file path names an SQLite "
                           "file instead")


def open_graph_db(state: StatePaths, *, migrate_schema: bool = True) -> Any:
    """A connection to the project's workgraph: the shared server when one is configured, else
    the project's SQLite file."""
    url = store_url(state)
    if url is None:
        from clavain.store.db import connect

        return connect(state.db, migrate_schema=migrate_schema)
    from clavain.store.postgres import PgConnection

    conn = PgConnection(url)
    if migrate_schema:
        migrate_postgresql(conn)
    return conn


def open_for_reading(state: StatePaths) -> Any:
    """The workgraph store for a command that only looks: the team's server when one is
    configured; no database yet reads as an empty one in memory (nothing is created); the
    project's file opened read-only (nothing migrated) when its folder cannot be written."""
    from clavain.store import db

    if store_url(state):
        return open_graph_db(state)
    if not state.db.exists():
        return db.connect(":memory:")
    folder = os.path.dirname(os.path.abspath(state.db))
    if os.access(folder, os.W_OK) and os.access(state.db, os.W_OK):
        return db.connect(state.db)
    conn = db.connect_readonly(state.db, immutable=True)
    have, want = conn.execute("PRAGMA user_version").fetchone()[0], db.latest_version()
    if have < want:
        conn.close()
        raise ClavainError(f"{state.db} is read-only and older than this Clavain (schema {have},"
                           f" needs {want}); run any write command once with write access")
    return conn


def dialect(conn: Any) -> str:
    """"sqlite" or "postgresql": the one question the library asks where SQL must differ."""
    return getattr(conn, "dialect", "sqlite")


def is_shared(conn: Any) -> bool:
    """Whether several machines may write this store at once (a server), which callers above
    the store ask instead of which backend it is: claimers then take rows side by side instead
    of one at a time, a holder is told apart by its machine's boot id as well as its pid, and
    others' progress arrives as notifications rather than by polling the file."""
    return bool(getattr(conn, "shared", False))


def store_now(conn: Any) -> datetime:
    """Now, by the store's clock: the server's on PostgreSQL (machines' clocks may disagree, a
    lease must not), this machine's for SQLite."""
    now = getattr(conn, "now", None)  # a bare sqlite3 connection (a test's) has no clock
    return now() if now is not None else datetime.now(timezone.utc)


RECONNECT_ATTEMPTS = 6


def reconnecting(conn: Any, action: Callable[[], T]) -> T:
    """Run `action` (one or more whole transactions on `conn`); on a shared server, run it
    again when the connection was lost under it (the server rolled the open transaction back,
    and the next one reconnects). A lost COMMIT acknowledgement is the one unknowable case: the
    retry then meets the state the commit left (a fenced apply is refused, never doubled)."""
    if dialect(conn) == "sqlite":
        return action()
    for attempt in range(RECONNECT_ATTEMPTS):
        try:
            return action()
        except Exception as exc:
            if attempt == RECONNECT_ATTEMPTS - 1 or not conn.lost(exc):
                raise
            time.sleep(min(0.25 * 2 ** attempt, 4.0))
    raise AssertionError("unreachable")


# ---------------------------------------------------------------- PostgreSQL schema

def pg_migration_files() -> list[tuple[int, str]]:
    found = [(int(name.split("_", 1)[0]), name) for name in os.listdir(PG_MIGRATIONS_DIR)
             if name.endswith(".sql")]
    return sorted(found)


def pg_latest_version() -> int:
    files = pg_migration_files()
    return files[-1][0] if files else 0


def pg_schema_version(conn: Any) -> int:
    exists = conn.execute("SELECT to_regclass('clavain_schema') IS NOT NULL").fetchone()[0]
    if not exists:
        return 0
    return int(conn.execute("SELECT coalesce(max(version), 0) FROM clavain_schema")
               .fetchone()[0])


def migrate_postgresql(conn: Any) -> int:
    """Bring the server's schema to the newest version, one file per transaction; several
    clients starting at once wait for one another (an advisory lock)."""
    current = pg_schema_version(conn)
    latest = pg_latest_version()
    if current >= latest:
        if current > latest:
            raise ClavainError(f"the workgraph store is at schema version {current}, newer than "
                               f"this Clavain's {latest}: upgrade Clavain on this machine")
        return current
    from clavain.clock import now_iso

    for version, name in pg_migration_files():
        with open(os.path.join(PG_MIGRATIONS_DIR, name), encoding="utf-8") as handle:
            script = handle.read()
        conn.begin(exclusive=False)
        try:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATE_LOCK,))
            conn.execute(_VERSION_TABLE)
            if pg_schema_version(conn) < version:
                conn.raw_script(script)
                conn.execute("INSERT INTO clavain_schema (version, name, applied_at) "
                             "VALUES (%s, %s, %s)", (version, name, now_iso()))
            conn.commit_or_rollback(True)
        except BaseException:
            conn.commit_or_rollback(False)
            raise
        current = version
    return current


def describe(state: StatePaths, conn: Any = None) -> dict[str, Any]:
    """What `clavain doctor` says about the store: backend, where, server and schema versions
    (on `conn` when one is open). Raises ClavainError (one line with the fix) when the store
    cannot be reached."""
    url = store_url(state)
    if url is None:
        return {"backend": "sqlite", "where": str(state.db),
                "default": state.db == state.root / "state.sqlite"}
    from clavain.store.postgres import PgConnection, redact

    server = conn or PgConnection(url, connect_timeout=5)
    try:
        return {"backend": "postgresql", "where": redact(url),
                "server_version": server.server_version(),
                "schema_version": pg_schema_version(server), "latest": pg_latest_version()}
    finally:
        if conn is None:
            server.close()


def graph_store_exists(state: StatePaths) -> bool:
    """Whether there is a workgraph to read without creating one: a shared server is configured,
    or the project's SQLite file exists."""
    return store_url(state) is not None or state.db.exists()


def open_store(target: str) -> Any:
    """A workgraph store named by the person: a PostgreSQL URL, else an SQLite file path (made
    and migrated when missing)."""
    from clavain.locate import looks_like_url

    if looks_like_url(target):
        check_url(target, "the target")
        from clavain.store.postgres import PgConnection

        conn = PgConnection(target)
        migrate_postgresql(conn)
        return conn
    from clavain.store.db import connect

    return connect(os.path.abspath(os.path.expanduser(target)))


def redact_target(target: str) -> str:
    if is_url(target):
        from clavain.store.postgres import redact

        return redact(target)
    return os.path.abspath(os.path.expanduser(target))


def same_store(a: Any, b: Any) -> bool:
    """Whether two connections reach the same data (a copy onto itself would empty it)."""
    if dialect(a) != dialect(b):
        return False
    if dialect(a) == "sqlite":
        def path(conn: Any) -> str:
            return os.path.realpath(conn.execute("PRAGMA database_list").fetchone()[2] or "")

        return path(a) == path(b)
    query = ("SELECT inet_server_addr()::text, inet_server_port(), current_database(), "
             "current_schema()")
    return tuple(a.execute(query).fetchone()) == tuple(b.execute(query).fetchone())
