"""What the user typed after `/clavain:sprint`, carried to `clavain sprint start` with no shell in
between.

The host substitutes a command's `$ARGUMENTS` into its `!` command text, which bash then parses:
any quoting can be broken by what the user types (a line equal to a heredoc's delimiter ends it
and the rest runs as shell). So the request never goes there. The UserPromptSubmit hook, which
Claude Code runs before it expands the command (observed on 2.1.330) and which receives the raw
prompt as JSON, records the arguments for its session; the command's `!` line runs `clavain
sprint start --from-prompt`, which takes that record for `$CLAUDE_CODE_SESSION_ID` (the same
session id, in the `!` command's environment) and deletes it. `/clavain:loop` is carried the
same way (`kind="loop"`, `clavain loop session-start --from-prompt`). A record is good once, for
the turn that typed it: the hook keeps a one-time value's hash where the record cannot vouch
for itself, and the take must match it (`typed_once`). Stdlib only (a hook writes it).
"""

from __future__ import annotations

import os

from clavain.errors import ClavainError
from clavain.sprint import typed_once

TYPE_CHECKING = False
if TYPE_CHECKING:  # the UserPromptSubmit hook imports this: no `typing` or `pathlib` import
    from pathlib import Path
    from typing import Any

    from clavain.paths import StatePaths

COMMAND = "/clavain:sprint"
LOOP_COMMAND = "/clavain:loop"
BUDGET_COMMAND = "/clavain:budget"
# Each slash command whose arguments are recorded, by the kind of record it leaves.
COMMANDS = {"sprint": COMMAND, "loop": LOOP_COMMAND, "budget": BUDGET_COMMAND}
MAX_CHARS = 100_000
SESSION_VARIABLE = "CLAUDE_CODE_SESSION_ID"
_CLI = {"sprint": "sprint start", "loop": "loop session-start", "budget": "budget reset"}


def arguments_of(prompt: object, command: str = COMMAND) -> str | None:
    """The text after `command` (one separating space or newline dropped, the rest verbatim),
    or None when the prompt is not that command."""
    if not isinstance(prompt, str):
        return None
    text = prompt.lstrip()
    if not text.startswith(command):
        return None
    rest = text[len(command):]
    if rest and not rest[0].isspace():
        return None  # `/clavain:sprinter`, another command
    return rest[1:] if rest else ""


def checked_session_id(session_id: object) -> str:
    """`session_id` when it can name a file (ASCII letters, digits, `-`, `_`; 1-200 characters,
    as Claude Code's ids are), else ClavainError."""
    if not isinstance(session_id, str) or not session_id or len(session_id) > 200 or not all(
            c.isascii() and (c.isalnum() or c in "-_") for c in session_id):
        raise ClavainError(f"session id {str(session_id)[:60]!r} is not a Claude Code session id")
    return session_id


# Not in `scratch/` (the agent's to write): the PreToolUse hook refuses every tool's write
# anywhere in the state folder but there. What it cannot see (a script's own writes) is why a
# record also needs the one-time value only the hook's row knows (`typed_once`).
TYPED_FOLDER = typed_once.FOLDER
# How long the hook waits for another writer: well under UserPromptSubmit's 30 s timeout.
RECORD_BUSY_MS = 5000


def _path(state: StatePaths, session_id: object, kind: str = "sprint") -> Path:
    return state.root / TYPED_FOLDER / typed_once.file_name(kind, checked_session_id(session_id))


def _database(state: StatePaths, env: dict[str, str] | None = None) -> str:
    """The project's own database (budgets and these records live there, never on a shared
    server), named by the environment the host gave (`env`): the one the hooks use."""
    from clavain import locate

    return locate.db_file(str(state.root), env)


def record(state: StatePaths, session_id: object, arguments: str, kind: str = "sprint",
           prompt_id: object = None) -> None:
    """Keep the arguments for the session's `clavain sprint start --from-prompt` (or `clavain
    loop session-start --from-prompt` with kind="loop"), with a new one-time value whose hash
    the state database keeps (written first: a file without its row is never taken)."""
    record_in(str(state.root), session_id, arguments, kind, prompt_id)


def record_in(root: str, session_id: object, arguments: str, kind: str = "sprint",
              prompt_id: object = None) -> None:
    """`record` for the state folder `root`, as text: the UserPromptSubmit hook's way, with
    `os.path` only (`pathlib` and the `re` it imports cost the hook ~7 ms)."""
    from clavain import locate
    from clavain.fsutil import real_folder, write_atomic
    from clavain.store import db

    folder = os.path.join(root, TYPED_FOLDER)
    path = os.path.join(folder, typed_once.file_name(kind, checked_session_id(session_id)))
    conn = db.connect(locate.db_file(root), busy_timeout_ms=RECORD_BUSY_MS)  # as `_database`
    try:
        value = typed_once.add(conn, str(session_id), kind,
                               prompt_id[:200] if isinstance(prompt_id, str) else None)
    finally:
        conn.close()
    real_folder(root, folder)
    write_atomic(path, typed_once.with_value(value, arguments[:MAX_CHARS]), inside=root)


def take(state: StatePaths, session_id: str | None = None, kind: str = "sprint") -> str:
    """The arguments recorded for this session (read once: the record is deleted)."""
    return take_record(state, session_id, kind)["arguments"]


def take_record(state: StatePaths, session_id: str | None = None, kind: str = "sprint"
                ) -> dict[str, Any]:
    """`take`, with what `clavain.authority` needs to trust it and records of a person's
    decision made this way: {"arguments", "session_id", "prompt" (as typed), "prompt_id" (the
    host's), "recorded_at" (when the record was written: it must be before the command taking
    it began)}. Honoured once, for the turn that typed it (`typed_once`); anything else is one
    line naming the record, why, and what the person types instead."""
    from clavain.authority import host_environment

    # The host's session and database (what it gave the command, not what `X=… clavain`
    # says): a command takes only its own session's record, checked where the hooks keep it.
    env = host_environment()
    session_id = session_id or env.get(SESSION_VARIABLE) or None
    if not session_id:
        raise ClavainError(f"--from-prompt reads what the UserPromptSubmit hook recorded for "
                           f"${SESSION_VARIABLE}, which is not set: outside Claude Code pass the "
                           "request as arguments or on stdin (--stdin)")
    path = _path(state, session_id, kind)
    raw, recorded_at = _read_once(path)
    if raw is None:
        raise ClavainError(_missing(state, env, session_id, kind, path))
    try:  # noqa: SIM105 - read once; a leftover is only stale (no contextlib for the hook)
        os.unlink(path)
    except OSError:
        pass
    value, text = typed_once.split(raw)
    if value is None:
        raise ClavainError(_refused(path, kind, "it carries no one-time value: the "
                                    "UserPromptSubmit hook did not write it"))
    from clavain.textio import BadText, decode

    try:
        arguments = decode(text, str(path))
    except BadText as exc:
        raise ClavainError(str(exc)) from None
    row = _take_row(state, env, session_id, kind, value, path, recorded_at)
    return {"arguments": arguments, "session_id": session_id, "recorded_at": recorded_at,
            "prompt": f"{COMMANDS[kind]} {arguments}".strip(), "prompt_id": row["prompt_id"]}


def _take_row(state: StatePaths, env: dict[str, str], session_id: str, kind: str, value: str,
              path: Path, written: float | None) -> dict[str, Any]:
    from clavain.store import db

    try:
        conn = db.connect(_database(state, env))
        try:
            return typed_once.take(conn, session_id, kind, value, written)
        finally:
            conn.close()
    except typed_once.Refused as exc:
        raise ClavainError(_refused(path, kind, str(exc))) from None
    except (db.sqlite3.DatabaseError, OSError) as exc:  # never taken, so never honoured
        raise ClavainError(_refused(path, kind, f"the state database could not mark it taken "
                                    f"({exc})")) from None


def _refused(path: Path, kind: str, why: str) -> str:
    return (f"what was typed is a person's decision once, in the turn that typed it: the record "
            f"{path} is refused ({why}); the user types {COMMANDS[kind]} again, or runs "
            f"`clavain {_CLI[kind]} …` in a terminal")


def _missing(state: StatePaths, env: dict[str, str], session_id: str, kind: str,
             path: Path) -> str:
    """No record to take: why, when the state database says it ended (voided by a tool call,
    already taken), else that the hook did not run."""
    import contextlib

    from clavain.store import db

    ended = None
    with contextlib.suppress(db.sqlite3.DatabaseError, OSError):
        database = _database(state, env)
        if os.path.exists(database):
            conn = db.connect_readonly(database)
            try:
                row = typed_once.latest(conn, session_id, kind)
                if row is not None and row["status"] != "pending":
                    ended = typed_once.ended(row)
            finally:
                conn.close()
    if ended is not None:
        return _refused(path, kind, f"it is gone; {ended}")
    return (f"no request recorded for session {session_id} ({path}): the plugin's "
            f"UserPromptSubmit hook did not run; the user types {COMMANDS[kind]} again, or runs "
            f"`clavain {_CLI[kind]} TEXT` in a terminal")


def _read_once(path: Path) -> tuple[bytes | None, float | None]:
    """(the record's bytes, when it was written), both from the one descriptor read: ctime,
    which no one sets back by hand (`touch -d` moves mtime), of the very file whose text is
    taken — not of whatever was at the path a moment before. (None, None) when there is no
    regular file there."""
    from clavain.fsutil import open_regular, read_up_to

    try:
        fd = open_regular(path, os.O_RDONLY)
    except (OSError, ValueError):
        return None, None
    try:
        recorded_at = os.fstat(fd).st_ctime
        return read_up_to(fd, typed_once.HEADER_BYTES + MAX_CHARS * 4 + 16), recorded_at
    except OSError:
        return None, None
    finally:
        os.close(fd)
