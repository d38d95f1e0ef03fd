"""How a command opens the state database, in the three ways commands need."""

from __future__ import annotations

import sqlite3

from clavain.paths import StatePaths


def open_for_write() -> tuple[StatePaths, sqlite3.Connection]:
    """For commands that create work: `.clavain/` (and its .gitignore block) made if missing."""
    from clavain.project import ensure_state
    from clavain.store.db import connect

    state = ensure_state(StatePaths.discover())
    return state, connect(state.db)


def open_for_read() -> tuple[StatePaths, sqlite3.Connection]:
    """For commands that only look: no database yet reads as the empty graph, and creates
    nothing (no `.clavain/`, no `.gitignore`)."""
    from clavain.store.db import connect

    state = StatePaths.discover()
    return state, connect(state.db if state.db.exists() else ":memory:")


def open_existing() -> tuple[StatePaths, sqlite3.Connection]:
    """(state, connection), refusing rather than creating an empty database as a side effect of a
    read or of naming a node that cannot exist yet."""
    from clavain.errors import ClavainError
    from clavain.store.db import connect

    state = StatePaths.discover()
    if not state.db.exists():
        raise ClavainError(f"no workgraph yet ({state.db} is missing); "
                           "add nodes with `clavain graph add` or `clavain graph import`")
    return state, connect(state.db)
