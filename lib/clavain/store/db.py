"""Connection, transactions and `PRAGMA user_version` migrations for `.clavain/state.sqlite`.

Conventions (docs/ARCHITECTURE.md): autocommit connection (`isolation_level=None`), WAL,
`foreign_keys=ON`, a generous `busy_timeout`, every writer inside `BEGIN IMMEDIATE` so lock
waits happen up front (where busy_timeout applies) instead of failing mid-transaction.

This is on the path of hooks that run on every tool call, so it imports only `os` and the
SQLite driver (no pathlib, contextlib or importlib.resources: together ~25 ms) and reads
migration files only when the database is behind. The driver is the C module `_sqlite3` itself:
the `sqlite3` package around it adds `datetime` and the DB-API adapters (~1.5 ms per process)
for nothing Clavain uses; its classes and exceptions are the very same objects, so callers may
keep catching `sqlite3.DatabaseError`.
"""

from __future__ import annotations

import os

try:
    from clavain.lean_import import import_sqlite_driver

    sqlite3 = import_sqlite_driver()  # `_sqlite3` without all of `functools`
except ImportError:  # an interpreter that only ships the package
    import sqlite3  # type: ignore[no-redef]

BUSY_TIMEOUT_MS = 30_000
# Package data beside this module.
MIGRATIONS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "migrations")


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


def _statements(script: str) -> list[str]:
    """Split a migration into statements so they can run inside one explicit transaction
    (`executescript` would commit behind our back)."""
    statements, pending = [], ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            statement = pending.strip()
            if statement and statement != ";":
                statements.append(statement)
            pending = ""
    if pending.strip():
        statements.append(pending.strip())
    return statements


def migrate(conn: sqlite3.Connection) -> int:
    """Bring the schema to the newest version; safe when several processes race to do it.
    Migration files are read only when the database is behind."""
    current = conn.execute("PRAGMA user_version").fetchone()[0]
    for version, name in _migration_files():
        if current >= version:
            continue
        with open(os.path.join(MIGRATIONS_DIR, name), encoding="utf-8") as handle:
            sql = handle.read()
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


def busy_timeout() -> int:
    """How long a writer waits for another to finish: CLAVAIN_BUSY_TIMEOUT_MS, else 30 s."""
    try:
        return max(0, int(os.environ.get("CLAVAIN_BUSY_TIMEOUT_MS", BUSY_TIMEOUT_MS)))
    except ValueError:
        return BUSY_TIMEOUT_MS


# The files SQLite opens beside a database: each must be a regular file or missing too (a FIFO
# `-wal` hangs a read-only open as surely as a FIFO database).
SIDE_FILES = ("", "-wal", "-shm", "-journal")


def unsafe_database(path: str | os.PathLike[str]) -> str | None:
    """Why the database at `path` must not be opened (`fsutil.unsafe_file`: a symlink would be
    written through, a FIFO or a device would block the open), or None. Never blocks."""
    from clavain.fsutil import unsafe_file

    db_path = os.fspath(path)
    for suffix in SIDE_FILES:
        problem = unsafe_file(db_path + suffix)
        if problem is not None:
            return problem
    return None


def _refuse_unsafe(db_path: str) -> None:
    problem = unsafe_database(db_path) if db_path != ":memory:" else None
    if problem is not None:
        from clavain.fsutil import UnsafePathError

        raise UnsafePathError(problem)


class SqliteStore(sqlite3.Connection):
    """A connection to the project's SQLite file as the workgraph store (`store.contract`): the
    same few operations the PostgreSQL connection offers, answered for one file that one
    writer at a time holds."""

    dialect = "sqlite"  # the named queries' text it runs (store.queries)
    shared = False  # one machine, one writer at a time: claims take turns

    def begin(self, *, exclusive: bool = True) -> None:
        # One write lock per file: a claim takes it as every writer does.
        self.execute("BEGIN IMMEDIATE")

    def now(self) -> datetime:  # noqa: F821  (imported lazily: the hooks never ask)
        from datetime import datetime, timezone  # lazily: ~1 ms the hooks never need

        return datetime.now(timezone.utc)

    def lost(self, exc: BaseException) -> bool:
        """A local file never loses its connection mid-transaction: nothing to run again."""
        return False

    def wait_for_ready(self, graph_id: str, timeout: float) -> bool:
        """No notifications from a file: wait `timeout`, and say nobody woke us."""
        import time

        time.sleep(max(0.0, timeout))
        return False


# Set by a command (the CLI), never by a hook: the first read-write open of each database in
# such a process checks it page by page (`store.health.check_opened`, bounded in time) and
# refuses a damaged one before anything is written.
CHECK_ON_OPEN = False
_checked: set[str] = set()
# Written beside a database found damaged (`store.health.mark_damaged`): every later read-write
# open refuses it until the file is replaced. One stat on the hook path.
DAMAGE_MARKER = "-damage.json"


def connect(path: str | os.PathLike[str], *, migrate_schema: bool = True,
            busy_timeout_ms: int | None = None) -> sqlite3.Connection:
    """Open (creating if needed) the state database with Clavain's pragmas applied; a writer
    waits `busy_timeout_ms` (default: `busy_timeout()`) for another. UnsafePathError (an
    OSError) when `unsafe_database` refuses it; StoreDamaged when it was found damaged."""
    db_path = os.fspath(path)
    _refuse_unsafe(db_path)
    if db_path != ":memory:":
        if os.path.exists(db_path + DAMAGE_MARKER):
            from clavain.store.health import refuse_marked

            refuse_marked(db_path)
        os.makedirs(os.path.dirname(os.path.abspath(db_path)), exist_ok=True)
    busy_ms = busy_timeout() if busy_timeout_ms is None else max(0, int(busy_timeout_ms))
    conn = sqlite3.connect(db_path, isolation_level=None, timeout=busy_ms / 1000,
                           factory=SqliteStore)
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout = {busy_ms}")
    if CHECK_ON_OPEN and db_path != ":memory:" and db_path not in _checked:
        _checked.add(db_path)
        from clavain.store.health import check_opened

        check_opened(conn, db_path)
    _use_wal(conn, busy_ms)
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    if migrate_schema:
        migrate(conn)
    return conn


def _use_wal(conn: sqlite3.Connection, busy_ms: int) -> None:
    """WAL mode, once per database. Switching needs an exclusive lock and SQLite does not run
    the busy handler for it, so processes opening a new database together (two loops, parallel
    tool calls on a fresh project) would fail with "database is locked": retry until the busy
    timeout. A database already in WAL mode is only read (no lock at all)."""
    import time  # built in: free

    deadline = time.monotonic() + busy_ms / 1000
    while True:
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.005)


class transaction:  # lower case: used like the function it replaced, `with transaction(conn):`
    """`BEGIN IMMEDIATE` … `COMMIT`, rolled back whole on any exception. A class rather than a
    @contextmanager generator: contextlib is one more import on every hook.

    On a shared store (`store.postgres.PgConnection`) an `exclusive` transaction also waits for
    the one writer lock, as here; `exclusive=False` is for a claim, which locks only its row."""

    __slots__ = ("conn", "exclusive")

    def __init__(self, conn: sqlite3.Connection, *, exclusive: bool = True) -> None:
        self.conn = conn
        self.exclusive = exclusive

    def __enter__(self) -> sqlite3.Connection:
        begin = getattr(self.conn, "begin", None)
        if begin is None:
            self.conn.execute("BEGIN IMMEDIATE")
        else:
            begin(exclusive=self.exclusive)
        return self.conn

    def __exit__(self, exc_type: object, exc: object, tb: object) -> bool:
        if exc_type is None:
            try:
                self.conn.execute("COMMIT")
                return False
            except BaseException:
                # A failed COMMIT (a deferred foreign key) leaves the transaction open, and a
                # long-lived process would keep the write lock forever.
                self._rollback()
                raise
        self._rollback()
        return False

    def _rollback(self) -> None:
        if self.conn.in_transaction:  # SQLite may have rolled back already (FULL, IOERR…)
            self.conn.execute("ROLLBACK")


SHM_NOT_MADE = ("unable to open", "disk I/O error", "database or disk is full",
                "readonly database")


def connect_readonly(path: str | os.PathLike[str], *, timeout_ms: int = 1000,
                     immutable: bool = False) -> sqlite3.Connection:
    """Open an existing database for reading only: never created, migrated or switched to WAL,
    and a short wait for a writer (for what only shows the state, such as SessionStart).
    `immutable`: a database in a folder nobody may write. Without it, a WAL database whose
    `-shm` cannot be made (a read-only or full `.clavain/`) is read immutable too: no `-shm`
    means no connection has it open, so nothing can change under the read (frames left in a
    `-wal` by a crash are not seen then). UnsafePathError as `connect`."""
    db_path = os.fspath(path)
    _refuse_unsafe(db_path)
    conn = _open_readonly(db_path, timeout_ms, immutable)
    if immutable:
        return conn
    try:
        conn.execute("PRAGMA schema_version")  # the first read opens the -wal and the -shm
    except sqlite3.OperationalError as exc:
        conn.close()
        # Read-only: "unable to open" (or, the file itself read-only with no -shm, "attempt to
        # write a readonly database"); a full disk: the -shm cannot grow ("disk I/O error",
        # "database or disk is full"). Either way no whole -shm means nobody has it open.
        if not any(why in str(exc) for why in SHM_NOT_MADE) or not os.path.isfile(db_path) \
                or _shm_in_use(db_path + "-shm"):
            raise
        return _open_readonly(db_path, timeout_ms, True)
    return conn


# A connection in WAL mode maps the -shm's first region, 32 KiB: a shorter one (left by a write
# that ran out of disk) is held by nobody.
SHM_REGION_BYTES = 32768


def _shm_in_use(shm: str) -> bool:
    try:
        return os.lstat(shm).st_size >= SHM_REGION_BYTES
    except FileNotFoundError:
        return False


def _open_readonly(db_path: str, timeout_ms: int, immutable: bool) -> sqlite3.Connection:
    from pathlib import Path  # lazily: the hot path opens read-write

    uri = Path(db_path).absolute().as_uri() + "?mode=ro"  # '?' or '#' in a path quoted
    if immutable:
        uri += "&immutable=1"
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=timeout_ms / 1000,
                           factory=SqliteStore)
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout = {int(timeout_ms)}")
    return conn


def schema_version(path: str | os.PathLike[str]) -> int | None:
    """The schema version of an existing database file, without creating or migrating it."""
    db_path = os.fspath(path)
    if not os.path.exists(db_path):
        return None
    conn = connect_readonly(db_path, timeout_ms=busy_timeout())
    try:
        return conn.execute("PRAGMA user_version").fetchone()[0]
    finally:
        conn.close()


def integrity(path: str | os.PathLike[str], *, seconds: float = 5.0) -> tuple[str, str]:
    """("ok" | "damaged" | "unchecked", one line): SQLite's `integrity_check` of an existing
    database, read-only and stopped after `seconds` (a huge database is then "unchecked")."""
    import time

    try:
        conn = connect_readonly(path, timeout_ms=busy_timeout())
    except sqlite3.DatabaseError as exc:
        return "damaged", str(exc)
    deadline = time.monotonic() + seconds
    conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
    try:
        problems = [row[0] for row in conn.execute("PRAGMA integrity_check(5)")]
    except sqlite3.OperationalError as exc:
        if "interrupted" in str(exc):
            return "unchecked", f"not fully checked in {seconds:g} s"
        return "damaged", str(exc)
    except sqlite3.DatabaseError as exc:
        return "damaged", str(exc)
    finally:
        conn.close()
    if problems == ["ok"]:
        return "ok", "integrity ok"
    return "damaged", "; ".join(problems)[:300]
