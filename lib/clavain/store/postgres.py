"""The PostgreSQL side of the workgraph store (`store.contract`): a connection to a shared server
through psycopg 3 that runs each named query's PostgreSQL text as it was loaded
(`store.queries`), rows read by name or position like `sqlite3.Row`.

Scheduling, results, claims, escalation and KV are one code path on both backends; what differs
is in the named queries and in this class's attributes (`dialect`, `shared`). Writers behave as
under SQLite's BEGIN IMMEDIATE (one writer at a time, here per database through a
transaction-scoped advisory lock), except claims, which lock only the row they take (`FOR UPDATE
SKIP LOCKED`) so supervisors on several machines claim in parallel.

A lost connection (a server restart, a dropped socket) is reopened before the next statement
that starts a transaction or runs on its own; a statement inside a transaction that lost its
connection fails (the adapter keeps its own record of the open transaction: it never lets the
rest of one run piecemeal on a new connection), and since the server rolled that transaction
back, nothing of it was applied. `graph_db.reconnecting` then runs the whole transaction again.
psycopg is imported here only: the default SQLite install never loads it.
"""

from __future__ import annotations

import contextlib
import time
from datetime import datetime, timedelta
from typing import Any

from clavain.errors import ClavainError

DIALECT = "postgresql"
MIGRATIONS_PACKAGE_DIR = "migrations_postgresql"
# Every writer holds this transaction-scoped lock, like SQLite's one write lock per file: the
# library's read-then-write transactions (results, escalation, scaffolding) stay serialised.
# Claims hold it shared: many at once, none beside an exclusive writer.
WRITER_LOCK_KEY = 0x636C6176  # "clav"
NOTIFY_CHANNEL = "clavain_wake"
RECONNECT_SECONDS = 30.0
CLOCK_SYNC_SECONDS = 10.0
IDLE_IN_TRANSACTION = "60s"
# A peer that vanished (no FIN: a machine asleep, a cable out) is noticed in about 30 s rather
# than after the kernel's two hours.
DEAD_PEER_SETTINGS = {"keepalives": 1, "keepalives_idle": 15, "keepalives_interval": 5,
                      "keepalives_count": 3, "tcp_user_timeout": 30_000}
# Deadlock detected, serialization failure: the server rolled the transaction back and says
# running it again is the cure.
RETRY_SQLSTATES = ("40P01", "40001")
# Server time in the stored form (`clock.now_iso`): with several machines, the server's clock
# decides when a lease ran out or a backoff ended.
SERVER_NOW_SQL = ("SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC', "
                  "'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')")

def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise ClavainError("the workgraph is on PostgreSQL but its driver is not installed: "
                           "pip install 'clavain[postgres]' (from a checkout: pip install -e "
                           "'.[postgres]'; psycopg 3) into the Python that runs Clavain"
                           ) from None
    return psycopg


class Row(tuple):
    """A result row read by position or by column name, like `sqlite3.Row`."""

    def __new__(cls, values: Any, names: dict[str, int]) -> Row:
        row = super().__new__(cls, values)
        row._names = names
        return row

    def __getitem__(self, key: Any) -> Any:  # type: ignore[override]
        if isinstance(key, str):
            try:
                return tuple.__getitem__(self, self._names[key])
            except KeyError:
                raise IndexError(f"no such column: {key}") from None
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._names)


def _row_factory(cursor: Any) -> Any:
    names = {column.name: index for index, column in enumerate(cursor.description or ())}
    return lambda values: Row(values, names)


class PgConnection:
    """What the workgraph library needs of a connection, on PostgreSQL: `execute` returning a
    cursor, `in_transaction`, `begin`, `close`; plus the server clock and ready notifications."""

    dialect = DIALECT
    shared = True  # several machines write it at once (graph_db.is_shared)

    def __init__(self, url: str, *, connect_timeout: float = 10.0) -> None:
        self.url = url
        self.connect_timeout = connect_timeout
        self._listening = False
        self._clock: tuple[float, datetime] | None = None  # (monotonic, server time) read
        self._in_transaction = False  # ours, not the socket's: a lost one stays lost
        self._raw = self._open()

    # ------------------------------------------------------------ connection

    def _open(self) -> Any:
        psycopg = _psycopg()
        try:
            raw = psycopg.connect(self.url, autocommit=True, row_factory=_row_factory,
                                  connect_timeout=max(1, int(self.connect_timeout)),
                                  application_name="clavain", **DEAD_PEER_SETTINGS)
        except psycopg.OperationalError as exc:
            raise StoreUnavailable(describe_connect_error(self.url, exc),
                                   transient=connect_error_transient(exc)) from None
        except psycopg.ProgrammingError as exc:  # a URL psycopg cannot parse
            raise ClavainError(f"store URL {redact(self.url)} is not a PostgreSQL URL "
                               f"({exc}); expected postgresql://user@host:port/dbname") from None
        _numbers_as_python(raw, psycopg)
        # A client that stops mid-transaction (a laptop closed) must not hold the writer lock
        # for the whole team: the server ends its transaction after this long.
        raw.execute(f"SET idle_in_transaction_session_timeout = '{IDLE_IN_TRANSACTION}'")
        if self._listening:
            raw.execute(f"LISTEN {NOTIFY_CHANNEL}")
        return raw

    def _reopen(self) -> None:
        """A fresh connection after the server went away, retried for RECONNECT_SECONDS."""
        with contextlib.suppress(Exception):  # it is broken already
            self._raw.close()
        deadline = time.monotonic() + RECONNECT_SECONDS
        delay = 0.1
        while True:
            try:
                self._raw = self._open()
                return
            except StoreUnavailable:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 2.0)

    def _broken(self) -> bool:
        return bool(self._raw.closed or self._raw.broken)

    @property
    def in_transaction(self) -> bool:
        return self._in_transaction

    def lost(self, exc: BaseException) -> bool:
        """Whether `exc` means the transaction it cut off may simply run again: the connection
        went away (a server restart, a dropped socket), or the server ended it as a deadlock
        victim or a serialization failure. Either way nothing of it was applied."""
        psycopg = _psycopg()
        if isinstance(exc, psycopg.OperationalError) and self._broken():
            return True
        return isinstance(exc, psycopg.Error) and getattr(exc, "sqlstate", None) in \
            RETRY_SQLSTATES

    def execute(self, statement: str, params: Any = ()) -> Any:
        """Run `statement` as psycopg takes it (`%s`, `%(name)s`): a named query's PostgreSQL
        text (`store.queries`), never rewritten here."""
        params = _storable(params)
        word = statement.lstrip()[:8].upper()
        if word.startswith("BEGIN"):
            self._start()
            self._in_transaction = True
            return self._raw.execute(statement)
        if word.startswith(("COMMIT", "ROLLBACK")):
            self._in_transaction = False  # ended, or lost with the connection: either way
            if word.startswith("ROLLBACK") and self._broken():
                return None  # the server already rolled it back
            return self._raw.execute(statement)
        if self._in_transaction:
            if self._broken():
                self._in_transaction = False
                raise _psycopg().OperationalError("the connection to the workgraph store was "
                                                  "lost inside a transaction")
            return self._raw.execute(statement, params if params else None)
        self._start()
        try:
            return self._raw.execute(statement, params if params else None)
        except _psycopg().OperationalError:
            if not self._broken():
                raise
            # A statement on its own (autocommit) on a connection that was gone: the library
            # writes inside transactions, so this is a read, safe to run once more on a new
            # connection.
            self._reopen()
            return self._raw.execute(statement, params if params else None)

    def _start(self) -> None:
        if self._broken():
            self._reopen()

    def executemany(self, statement: str, rows: Any) -> None:
        if self._in_transaction and self._broken():
            self._in_transaction = False
            raise _psycopg().OperationalError("the connection to the workgraph store was lost "
                                              "inside a transaction")
        with self._raw.cursor() as cursor:
            cursor.executemany(statement, [_storable(row) for row in rows])

    def begin(self, *, exclusive: bool) -> None:
        """BEGIN, then the writer lock: exclusive, like SQLite's BEGIN IMMEDIATE, or shared for
        claims and heartbeats, which run side by side (each locks only its own row) but never
        beside an exclusive writer's read-then-write. A connection lost before it is reopened
        here: no work is lost."""
        lock = "pg_advisory_xact_lock" if exclusive else "pg_advisory_xact_lock_shared"
        for attempt in (1, 2):
            self._start()
            try:
                # One round trip (two statements, no parameters: the simple protocol).
                self._raw.execute(f"BEGIN; SELECT {lock}({WRITER_LOCK_KEY})".encode())
                self._in_transaction = True
                return
            except _psycopg().Error:
                if not self._broken():
                    # Refused without losing the connection (a lock or statement timeout, a
                    # cancel): end the aborted transaction so the connection stays usable.
                    with contextlib.suppress(_psycopg().Error):
                        self._raw.execute("ROLLBACK")
                    raise
                if attempt == 2:
                    raise

    def close(self) -> None:
        self._raw.close()

    def raw_script(self, script: str) -> None:
        """A migration file as it is (no parameter translation: it has none)."""
        self._raw.execute(script.encode())

    def commit_or_rollback(self, commit: bool) -> None:
        self.execute("COMMIT" if commit else "ROLLBACK")

    # ------------------------------------------------------------ server facts

    def server_now(self) -> datetime:
        """The server's clock: read from the server every CLOCK_SYNC_SECONDS, and in between
        this machine's monotonic clock added to the last reading (one round trip less per
        claim; off by at most half a round trip, and never by this machine's wall clock)."""
        now = time.monotonic()
        if self._clock is None or now - self._clock[0] > CLOCK_SYNC_SECONDS:
            text = self.execute(SERVER_NOW_SQL).fetchone()[0]
            after = time.monotonic()
            server = datetime.fromisoformat(text.replace("Z", "+00:00"))
            self._clock = ((now + after) / 2, server)
            return server
        read_at, server = self._clock
        return server + timedelta(seconds=now - read_at)

    now = server_now  # the store's clock (store.contract)

    def server_version(self) -> str:
        return str(self.execute("SHOW server_version").fetchone()[0])

    # ------------------------------------------------------------ ready notifications

    def listen(self) -> None:
        if not self._listening:
            self.execute(f"LISTEN {NOTIFY_CHANNEL}")
            self._listening = True

    def wait_for_ready(self, graph_id: str, timeout: float) -> bool:
        """Block until a node of `graph_id` may have become ready or finished (a NOTIFY from
        the server's trigger) or `timeout` passes. True when woken by a notification."""
        self.listen()
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            try:
                for note in self._raw.notifies(timeout=left, stop_after=1):
                    if note.payload in (graph_id, ""):
                        return True
            except _psycopg().OperationalError:
                if not self._broken():
                    raise
                self._reopen()  # listens again; a wake lost meanwhile is what the poll is for
                return False


class StoreUnavailable(ClavainError):
    """The shared store cannot be reached (restarting, refused, unknown host, bad login).
    `transient`: waiting may help (a server restarting, refusing or silent), unlike a wrong
    password or database name."""

    def __init__(self, message: str, *, transient: bool = True) -> None:
        super().__init__(message)
        self.transient = transient


def connect_error_transient(exc: Exception) -> bool:
    text = str(exc)
    return not (("does not exist" in text and ("database" in text or "role" in text))
                or "password" in text or "authentication" in text)


def redact(url: str) -> str:
    """The URL with any password replaced, for messages and `doctor`."""
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return url
    creds, _, host = rest.rpartition("@")
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}{':***' if ':' in creds else ''}@{host}"


# What a server says while it restarts or is full: worth waiting for, not a wrong URL.
_RESTARTING = ("shutting down", "starting up", "in recovery mode", "not yet accepting",
               "too many clients", "terminating connection due to administrator command")


def describe_connect_error(url: str, exc: Exception) -> str:
    text = " ".join(str(exc).split())
    if any(words in text for words in _RESTARTING):
        fix = ("the server is restarting or busy; `clavain run` waits for it "
               "(store.outageWaitSeconds), other commands: try again in a moment")
    elif "does not exist" in text and "database" in text:
        fix = "create it (createdb) or fix the database name in the URL"
    elif "password" in text or "authentication" in text:
        fix = "check the user and password in the URL (or ~/.pgpass)"
    elif "refused" in text or "could not connect" in text or "timeout" in text:
        fix = "start the server or fix host and port in the URL"
    else:
        fix = "check the URL: postgresql://user@host:port/dbname"
    return f"cannot reach the workgraph store {redact(url)}: {text[:300]} — {fix}"


def _storable(params: Any) -> Any:
    """The parameters with any text the server would refuse (NUL, a lone surrogate) made
    storable as the library stores it on both backends (`textio.storable`): a text the library
    did not clean must not turn a write into a failed worker."""
    values = params.values() if isinstance(params, dict) else params
    if not any(isinstance(value, str) and ("\x00" in value or not value.isascii())
               for value in values):
        return params
    from clavain.textio import storable

    if isinstance(params, dict):
        return {key: storable(value) if isinstance(value, str) else value
                for key, value in params.items()}
    return type(params)(storable(value) if isinstance(value, str) else value
                        for value in params)


def _numbers_as_python(raw: Any, psycopg: Any) -> None:
    """numeric (sum, avg) as int or float, not Decimal; json as its text, which the library
    parses where it needs to, exactly as with SQLite."""
    from psycopg.adapt import Loader

    class NumberLoader(Loader):
        def load(self, data: Any) -> Any:
            text = bytes(data).decode()
            return int(text) if text.lstrip("-").isdigit() else float(text)

    class TextLoader(Loader):
        def load(self, data: Any) -> Any:
            return bytes(data).decode()

    raw.adapters.register_loader("numeric", NumberLoader)
    raw.adapters.register_loader("json", TextLoader)
    raw.adapters.register_loader("jsonb", TextLoader)
