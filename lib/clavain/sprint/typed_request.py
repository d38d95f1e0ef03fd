"""What the user typed after `/clavain:sprint`, carried to `clavain sprint start` with no shell in
between.

The host substitutes a command's `$ARGUMENTS` into its `!` command text, which bash then parses:
any quoting can be broken by what the user types (a line equal to a heredoc's delimiter ends it
and the rest runs as shell). So the request never goes there. The UserPromptSubmit hook, which
Claude Code runs before it expands the command (observed on 2.1.330) and which receives the raw
prompt as JSON, records the arguments for its session; the command's `!` line runs `clavain
sprint start --from-prompt`, which takes that record for `$CLAUDE_CODE_SESSION_ID` (the same
session id, in the `!` command's environment) and deletes it. `/clavain:loop` is carried the
same way (`kind="loop"`, `clavain loop session-start --from-prompt`). Stdlib only (a hook writes
it).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from clavain.errors import ClavainError
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
# anywhere in the state folder but there, so a record here is what the hook wrote.
TYPED_FOLDER = "typed"


def _path(state: StatePaths, session_id: object, kind: str = "sprint") -> Path:
    return state.root / TYPED_FOLDER / f"{kind}-request-{checked_session_id(session_id)}.txt"


def record(state: StatePaths, session_id: object, arguments: str, kind: str = "sprint") -> None:
    """Keep the arguments for the session's `clavain sprint start --from-prompt` (or `clavain
    loop session-start --from-prompt` with kind="loop")."""
    from clavain.fsutil import real_folder, write_atomic

    path = _path(state, session_id, kind)
    real_folder(state.root, path.parent)
    write_atomic(path, arguments[:MAX_CHARS], inside=state.root)


def take(state: StatePaths, session_id: str | None = None, kind: str = "sprint") -> str:
    """The arguments recorded for this session (read once: the record is deleted)."""
    return take_record(state, session_id, kind)["arguments"]


def take_record(state: StatePaths, session_id: str | None = None, kind: str = "sprint"
                ) -> dict[str, Any]:
    """`take`, with what `clavain.authority` needs to trust it and records of a person's
    decision made this way: {"arguments", "session_id", "prompt" (as typed), "recorded_at"
    (when the record was written: it must be before the command taking it began)}."""
    from clavain.authority import session_id as host_session

    # The host's session (what it gave the command, not what `X=… clavain` says): a command
    # takes only its own session's record.
    session_id = session_id or host_session()
    if not session_id:
        raise ClavainError(f"--from-prompt reads what the UserPromptSubmit hook recorded for "
                           f"${SESSION_VARIABLE}, which is not set: outside Claude Code pass the "
                           "request as arguments or on stdin (--stdin)")
    path = _path(state, session_id, kind)
    raw, recorded_at = _read_once(path)
    if raw is None:
        raise ClavainError(f"no request recorded for session {session_id} ({path}): the "
                           f"plugin's UserPromptSubmit hook did not run; type /clavain:{kind} "
                           f"again, or run `clavain {_CLI[kind]} TEXT` yourself")
    with contextlib.suppress(OSError):  # read once; a leftover is only stale
        os.unlink(path)
    from clavain.textio import BadText, decode

    try:
        arguments = decode(raw, str(path))
    except BadText as exc:
        raise ClavainError(str(exc)) from None
    return {"arguments": arguments, "session_id": session_id, "recorded_at": recorded_at,
            "prompt": f"{COMMANDS[kind]} {arguments}".strip()}


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
        return read_up_to(fd, MAX_CHARS * 4 + 16), recorded_at
    except OSError:
        return None, None
    finally:
        os.close(fd)
