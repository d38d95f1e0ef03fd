"""A hook call's connection to the state database. A spawned hook opens and closes its own; the
resident hook server keeps one per database open across calls, because closing the last
connection checkpoints the WAL (~1 ms a call). Stdlib only; `sqlite3` is loaded on first use.
"""

from __future__ import annotations

import os

from clavain import hooks

# The resident server's open databases: path -> ((st_dev, st_ino), connection).
_databases: dict[str, tuple[tuple[int, int], object]] = {}


def open_database(path: str):
    """A connection to the state database at `path`, for one hook call; give it back with
    `close_database`. A spawned hook opens and closes its own. The resident server keeps one
    per database open across calls: closing the last connection checkpoints the WAL, ~1 ms a
    call. A database file replaced since (same path, other inode) gets a new connection."""
    from clavain.store import db

    if hooks.served_by != "resident":
        return db.connect(path)
    cached = _databases.pop(path, None)
    if cached is not None:
        try:
            info = os.stat(path)
            if cached[0] == (info.st_dev, info.st_ino):
                conn = cached[1]
                if conn.in_transaction:  # left open by a call that failed
                    conn.rollback()
                _databases[path] = cached
                return conn
        except Exception:
            pass
        cached[1].close()
    conn = db.connect(path)
    info = os.stat(path)
    _databases[path] = ((info.st_dev, info.st_ino), conn)
    return conn


def close_database(conn) -> None:
    if hooks.served_by != "resident":
        conn.close()


def forget_all() -> None:
    """Close the resident server's connections (after a failed call: start clean)."""
    while _databases:
        _, (_, conn) = _databases.popitem()
        try:  # noqa: SIM105 - contextlib is one more import on the spawned hook's path
            conn.close()
        except Exception:
            pass
