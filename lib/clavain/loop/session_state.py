"""Whether this session runs `/clavain:loop`: the one test every Stop pays, kept apart from the
loop itself so a session without a loop imports nothing but `os`."""

from __future__ import annotations

import os

LOOPS = "loops"


def state_file(root: str, session_id: object) -> str | None:
    """This session's loop state file when there is one: the cheap test every Stop pays. The
    id is validated (`typed_request.checked_session_id`) before the file is read."""
    if not isinstance(session_id, str) or not session_id or "/" in session_id \
            or "\\" in session_id:
        return None
    path = os.path.join(root, LOOPS, session_id + ".json")
    return path if os.path.exists(path) else None
