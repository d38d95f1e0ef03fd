"""`clavain db recover`: rebuild a damaged state database into a new file, keeping every row
SQLite can still read, and put it in place with the damaged file kept beside it.

The sqlite3 shell's `.recover` is not enough on its own: some versions stop at once on
Clavain's schema ("SQL logic error", 3.40.1) and a pipe into a new file then leaves an empty
database that the next command migrates into an empty graph — the data thrown away by the
advice. So the rebuild is done here, as `.dump` orders it: the tables first (their SQL as the
damaged file records it), then the rows, then the indexes, triggers and views, so no trigger
recounts rows that are copied with their counts. A table whose scan stops at a damaged page is
read row by row (by rowid, up to the largest seen or recorded), skipping only what is lost;
the dependency counts are then recomputed from the edges that survived.
"""

from __future__ import annotations

import os
import time
from typing import Any

from clavain.errors import ClavainError

# Past the last rowid found, how many absent rowids end the probe of a table whose scan
# stopped (its largest rowid could not be read either).
PROBE_PAST_LAST = 10_000


def recover(path: str) -> dict[str, Any]:
    """Rebuild `path` into `<path>.recovered`, check it, then move `path` (and its `-wal`) aside
    as `<path>.damaged-<stamp>` and the rebuilt file into its place. Returns {tables: {name:
    {copied, lost}}, kept: the damaged file's new name, integrity}."""
    from clavain.store import db, health

    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ClavainError(f"no state database at {path}: nothing to recover")
    if db._shm_in_use(path + "-shm"):
        raise ClavainError(f"another process has {path} open (its -shm is in use): stop every "
                           "Clavain process using it (a `clavain run`, a Claude Code session), "
                           "then run `clavain db recover` again")
    target = path + ".recovered"
    for leftover in (target, target + "-wal", target + "-shm", target + "-journal"):
        if os.path.exists(leftover):
            os.unlink(leftover)  # an earlier attempt's: rebuilt from the damaged file again
    source = db.connect_readonly(path, immutable=not os.path.exists(path + "-wal"))
    try:
        report = _rebuild(source, target)
    finally:
        source.close()
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    kept = f"{path}.damaged-{stamp}"
    os.replace(path, kept)
    for suffix in ("-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.replace(path + suffix, kept + suffix)
    os.replace(target, path)
    health.forget_damage(path)
    return {**report, "kept": kept, "path": path}


def _rebuild(source: Any, target: str) -> dict[str, Any]:
    from clavain.store.db import sqlite3

    schema = source.execute(
        "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE sql IS NOT NULL "
        "AND name NOT LIKE 'sqlite_%' ORDER BY rowid").fetchall()
    version = source.execute("PRAGMA user_version").fetchone()[0]
    out = sqlite3.connect(target, isolation_level=None)
    try:
        out.execute("PRAGMA foreign_keys = OFF")
        out.execute("BEGIN")
        tables = [row for row in schema if row[0] == "table"]
        for _, _, _, sql in tables:
            out.execute(sql)
        found = {}
        for _, name, _, _ in tables:
            found[name] = _copy(source, out, name)
        _copy_sequence(source, out)
        for kind, _, _, sql in schema:
            if kind != "table":
                out.execute(sql)
        if any(name == "deps" for _, name, _, _ in tables) and \
                any(name == "nodes" for _, name, _, _ in tables):
            out.execute(RECOUNT_UNMET_DEPS)
        out.execute(f"PRAGMA user_version = {int(version)}")
        out.execute("COMMIT")
        integrity = out.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        out.close()
    if integrity != "ok":
        raise ClavainError(f"the rebuilt file {target} does not check out ({integrity}); the "
                           "damaged file is untouched")
    return {"tables": found, "integrity": integrity}


# A node's unmet dependencies, from the edges that survived: a lost edge must not leave a node
# waiting for ever on a count no edge explains, and an edge to a node whose row was lost stays
# unmet (work whose prerequisite vanished does not run; the deadlock report names it).
RECOUNT_UNMET_DEPS = """
UPDATE nodes SET unmet_deps = (
  SELECT count(*) FROM deps e
    LEFT JOIN nodes d ON d.graph_id = e.graph_id AND d.id = e.depends_on_id
   WHERE e.graph_id = nodes.graph_id AND e.node_id = nodes.id
     AND NOT coalesce(d.status = 'done' OR (e.kind = 'settled' AND d.status = 'failed'), 0))
"""


def _copy(source: Any, out: Any, table: str) -> dict[str, int]:
    """Every readable row of `table`: a whole scan, else row by row past the damage."""
    from clavain.store.db import sqlite3

    quoted = '"' + table.replace('"', '""') + '"'
    columns = [row[1] for row in source.execute(f"PRAGMA table_info({quoted})")]
    insert = (f"INSERT OR IGNORE INTO {quoted} ({', '.join(_quote(c) for c in columns)}) "
              f"VALUES ({', '.join('?' * len(columns))})")
    select = f"SELECT {', '.join(_quote(c) for c in columns)} FROM {quoted}"
    rows: list[Any] = []
    try:
        rows = source.execute(select).fetchall()
    except sqlite3.DatabaseError:
        return _copy_by_rowid(source, out, quoted, select, insert)
    out.executemany(insert, rows)
    return {"copied": len(rows), "lost": 0}


def _copy_by_rowid(source: Any, out: Any, quoted: str, select: str,
                   insert: str) -> dict[str, int]:
    from clavain.store.db import sqlite3

    try:
        top = source.execute(f"SELECT max(rowid) FROM {quoted}").fetchone()[0]
    except sqlite3.DatabaseError:
        top = None
    copied = lost = 0
    rowid, last_found = 1, 0
    while (top is not None and rowid <= top) or \
            (top is None and rowid <= last_found + PROBE_PAST_LAST):
        try:
            row = source.execute(f"{select} WHERE rowid = ?", (rowid,)).fetchone()
        except sqlite3.DatabaseError:
            lost += 1
            row = None
        if row is not None:
            out.execute(insert, tuple(row))
            copied += 1
            last_found = rowid
        rowid += 1
    return {"copied": copied, "lost": lost}


def _copy_sequence(source: Any, out: Any) -> None:
    from clavain.store.db import sqlite3

    try:
        rows = source.execute("SELECT name, seq FROM sqlite_sequence").fetchall()
    except sqlite3.DatabaseError:
        return
    if rows and out.execute("SELECT 1 FROM sqlite_master WHERE name = 'sqlite_sequence'"
                            ).fetchone():
        out.execute("DELETE FROM sqlite_sequence")
        out.executemany("INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)",
                        [tuple(row) for row in rows])


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
