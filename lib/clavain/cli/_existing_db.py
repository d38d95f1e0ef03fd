"""Opening the state database for commands that only make sense once a workgraph exists."""

from __future__ import annotations

import sqlite3

from clavain.paths import StatePaths


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
