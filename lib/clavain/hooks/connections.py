"""A hook call's connection to the state database. A spawned hook opens its own and closes it;
the resident hook server (`keep_open`) keeps one per database open across calls, because
closing the last connection checkpoints the WAL (~1 ms a call), and waits for a lock less
long, because its calls run one at a time. Stdlib only; `sqlite3` is loaded on first use.
"""

from __future__ import annotations

import os

# Set by the resident server: (busy timeout in ms) while it keeps connections open.
_keep_open_busy_ms: int | None = None
# The resident server's open databases: path -> ((st_dev, st_ino), connection).
_databases: dict[str, tuple[tuple[int, int], object]] = {}


def keep_open(*, busy_timeout_ms: int) -> None:
    global _keep_open_busy_ms
    _keep_open_busy_ms = busy_timeout_ms


def open_database(path: str):
    """A connection to the state database at `path` for one call; give it back with
    `close_database`. A kept connection is replaced when its file is gone or another file now
    has the path (another inode), and rolled back if a failed call left it in a transaction."""
    from clavain.store import db

    if _keep_open_busy_ms is None:
        return db.connect(path)
    cached = _databases.pop(path, None)
    if cached is not None:
        try:
            info = os.stat(path)
            if cached[0] == (info.st_dev, info.st_ino):
                conn = cached[1]
                if conn.in_transaction:
                    conn.rollback()
                _databases[path] = cached
                return conn
        except Exception:
            pass
        cached[1].close()
    conn = db.connect(path)
    conn.execute(f"PRAGMA busy_timeout = {int(_keep_open_busy_ms)}")
    info = os.stat(path)
    _databases[path] = ((info.st_dev, info.st_ino), conn)
    return conn


def close_database(conn) -> None:
    if _keep_open_busy_ms is None:
        conn.close()


def forget_all() -> None:
    """Close the kept connections (after a failed call: the next one starts clean)."""
    while _databases:
        _, (_, conn) = _databases.popitem()
        try:  # noqa: SIM105 - contextlib is one more import on the spawned hook's path
            conn.close()
        except Exception:
            pass
