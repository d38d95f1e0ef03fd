"""A record of what a person typed is good once, for the turn that typed it.

The UserPromptSubmit hook writes the typed text to `.clavain/typed/<kind>-request-<session>.txt`
behind a header holding a one-time value (`os.urandom`), and keeps only the value's hash in the
state database (`typed_records`, migration 0011): the file cannot vouch for itself, since
anything that writes files can write one. The slash command's `!` line (`clavain …
--from-prompt`, `typed_request.take_record`) is honoured only when a pending row matches the
value, and marks it taken in the same short transaction: a second take is refused.

The turn: the host runs the `!` line right after UserPromptSubmit and before the model's first
tool call, and a `!` line fires no PreToolUse. So the PreToolUse hook voids every pending record
of its session at each tool call (`pending` + `void_session`; a subagent's calls carry the
parent's session): a record an agent writes in one call is gone by the call that would take it,
and one it writes and takes within a single call is younger than the command taking it
(`clavain.authority`). Each call pays one listdir (in the hook, before this module is even
imported); the database is opened only when a record is there.

Fail closed: the file goes first (nothing left to take), then the row. A void that cannot be
written denies the tool call that found the record (`guards.gate`), and a take also refuses a
record when the session has a tool call recorded after it (`budget_calls`): whatever was missed,
a record older than the session's last tool call is not the turn's. Stdlib only; only `os` and
`locate` are imported until a record is there.
"""

from __future__ import annotations

import os

from clavain.locate import TYPED_DIR_NAME as FOLDER  # the PreToolUse hook refuses writes there
from clavain.locate import typed_record

KINDS = ("sprint", "loop", "budget")  # the records `typed_request.COMMANDS` leaves
# The file: this header, the value (32 hex digits), a newline, then the text as typed.
HEADER = b"clavain-typed-once "
VALUE_BYTES = 16
VALUE_CHARS = VALUE_BYTES * 2
HEADER_BYTES = len(HEADER) + VALUE_CHARS + 1


class Refused(Exception):
    """A record that is not good (the message says why, in a few words)."""


file_name = typed_record


def value_hash(value: str) -> str:
    # `_blake2` directly: `hashlib` loads OpenSSL, milliseconds on a hook's path.
    from _blake2 import blake2b

    return blake2b(value.encode("ascii", "replace"), digest_size=16).hexdigest()


def with_value(value: str, text: str) -> str:
    """The record file's text: the header with `value`, then `text`."""
    return f"{HEADER.decode()}{value}\n{text}"


def split(raw: bytes) -> tuple[str | None, bytes]:
    """(the one-time value, the typed text's bytes) of a record file; the value is None when
    the file has no well-formed header (it was not the hook's)."""
    end = len(HEADER) + VALUE_CHARS
    value = raw[len(HEADER):end]
    if not raw.startswith(HEADER) or raw[end:end + 1] != b"\n" or len(value) != VALUE_CHARS \
            or any(c not in b"0123456789abcdef" for c in value):
        return None, raw
    return value.decode("ascii"), raw[end + 1:]


def add(conn, session_id: str, kind: str, prompt_id: str | None) -> str:
    """A new pending record's one-time value (kept only as its hash). A new prompt is a new
    turn: every record of the session still pending is void from here."""
    from clavain.clock import now_iso
    from clavain.store import queries
    from clavain.store.db import transaction

    value = os.urandom(VALUE_BYTES).hex()
    at = now_iso()
    with transaction(conn):
        queries.run(conn, "sprint_records.void_pending",
                    (at, "a later prompt was typed", session_id))
        queries.run(conn, "sprint_records.add_pending",
                    (session_id, kind, value_hash(value), prompt_id, at))
    return value


def take(conn, session_id: str, kind: str, value: str, written: float | None = None) -> dict:
    """Mark the record whose value is `value` taken and return its row (a dict); Refused when
    no pending row of the session and kind has that value, or a tool call of the session was
    recorded after it (then it is voided too) — after its row's time or the file's (`written`,
    its ctime: a forged row may say any time, the file's cannot be set back). One BEGIN
    IMMEDIATE: two takes cannot both find it pending."""
    from datetime import datetime, timezone

    from clavain.clock import now_iso
    from clavain.store import queries
    from clavain.store.db import transaction

    at = now_iso()
    file_at = now_iso(datetime.fromtimestamp(written, timezone.utc)) if written else ""
    refused = None
    with transaction(conn):
        row = queries.run(conn, "sprint_records.with_value",
                          (session_id, kind, value_hash(value))).fetchone()
        if row is None:
            raise Refused(_unmatched(conn, session_id, kind))
        if row["status"] != "pending":
            raise Refused(ended(row))
        later = _tool_call_since(conn, session_id, min(row["recorded_at"], file_at or "~"))
        if later is not None:
            refused = f"a tool call ({later}) of this session was recorded after it was typed"
            queries.run(conn, "sprint_records.void_one", (at, refused, row["id"]))
        else:
            queries.run(conn, "sprint_records.take_one",
                        (at, f"taken by pid {os.getpid()}", row["id"]))
    if refused is not None:  # raised after the commit: the void is kept
        raise Refused(f"it was voided: {refused}")
    return dict(zip(row.keys(), tuple(row), strict=True))


def ended(row) -> str:
    """Why a row that is no longer pending is refused, in words."""
    if row["status"] == "taken":
        return f"it was already taken at {row['ended_at']} ({row['why']}): a record is good once"
    return f"it was voided at {row['ended_at']}: {row['why']}"


def latest(conn, session_id: str, kind: str):
    """The session's newest record of `kind`, or None."""
    from clavain.store import queries

    return queries.run(conn, "sprint_records.latest", (session_id, kind)).fetchone()


def _unmatched(conn, session_id: str, kind: str) -> str:
    from clavain.store import queries

    pending = queries.run(conn, "sprint_records.has_pending", (session_id, kind)).fetchone()
    if pending is not None:
        return "its one-time value does not match the one the hook kept"
    return "the state database holds no record of it: the UserPromptSubmit hook did not write it"


def _tool_call_since(conn, session_id: str, recorded_at: str) -> str | None:
    """The tool of the session's newest counted call if it came after `recorded_at` (the void
    at that call should have ended the record: whatever kept it, it is not the turn's)."""
    from clavain.store import queries

    call = queries.run(conn, "sprint_records.last_tool_call", (session_id,)).fetchone()
    return f"{call['tool']} at {call['at']}" if call is not None and call["at"] > recorded_at \
        else None


def pending(root: str, session_id: str, names: list[str] | None) -> list[str]:
    """The names of the session's records among `names` (the typed folder's listing, which
    the hook made; None when the folder could not be listed: each kind is then looked for by
    name, since a record may still be opened there)."""
    folder = os.path.join(root, FOLDER)
    if names is None:
        names = [file_name(kind, session_id) for kind in KINDS
                 if os.path.lexists(os.path.join(folder, file_name(kind, session_id)))]
    suffix = typed_record("", session_id)
    return [name for name in names if name.endswith(suffix) and name[:-len(suffix)] in KINDS]


def void_session(root: str, database: str, session_id: str, names: list[str], tool: object,
                 busy_ms: int) -> tuple[str | None, list[str]]:
    """Void the session's records `names` (from `pending`) before a tool call runs: the files
    are removed first, then every pending row of the session is marked void. (why the rows
    could not be voided or None, files that could not be removed). With no database nothing
    can be pending, and none is created."""
    from clavain.clock import now_iso

    folder = os.path.join(root, FOLDER)
    stuck = []
    for name in names:
        try:
            os.unlink(os.path.join(folder, name))
        except FileNotFoundError:
            pass
        except OSError as exc:  # a take still needs a pending row, voided below
            stuck.append(f"{name} ({exc.strerror or exc})")
    if not os.path.lexists(database):
        return None, stuck
    called = f"a tool call ({tool if isinstance(tool, str) else '?'})"
    kinds = sorted({name[:-len(typed_record("", session_id))] for name in names})
    try:
        from clavain.store import db, queries

        conn = db.connect(database, busy_timeout_ms=busy_ms)
        try:
            at = now_iso()
            with db.transaction(conn):
                held = {row[0] for row in queries.run(conn, "sprint_records.pending_kinds",
                                                      (session_id,))}
                queries.run(conn, "sprint_records.void_pending",
                            (at, f"{called} came after it: a record is good only for the "
                                 "turn that typed it", session_id))
                for kind in kinds:  # named, so the take that finds no file says why
                    if kind not in held:
                        queries.run(conn, "sprint_records.add_void",
                                    (session_id, kind, at, at,
                                     "the UserPromptSubmit hook did not write it (no record "
                                     f"of it in the state database); removed at {called}"))
        finally:
            conn.close()
    except Exception as exc:  # locked, read-only, damaged, unsafe: the caller fails closed
        return f"{type(exc).__name__}: {exc}", stuck
    return None, stuck
