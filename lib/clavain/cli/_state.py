"""How a command opens the state database and picks its workgraph, in the three ways commands
need. The graph is `clavain.current_graph.resolve`: `--graph`, else $CLAVAIN_GRAPH, else the
active sprint's, else the default graph. The connection is the project's SQLite file, or the
team's shared server when one is configured (`clavain.store.graph_db`)."""

from __future__ import annotations

import argparse
import sqlite3

from clavain.paths import StatePaths
from clavain.workgraph.graphs import Graph

GRAPH_HELP = ("the workgraph (default: $CLAVAIN_GRAPH, else the active sprint's, else "
              "`default`)")


def add_graph_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--graph", metavar="ID", help=GRAPH_HELP)


def _graph(state: StatePaths, conn: sqlite3.Connection, explicit: str | None,
           every: bool = False) -> Graph:
    """`every`: the command works on all graphs, so no current graph is chosen (and a damaged
    checkpoint, which only choosing one reads, does not stop it)."""
    from clavain.current_graph import resolve
    from clavain.workgraph.graphs import DEFAULT_GRAPH

    try:
        return Graph(conn, DEFAULT_GRAPH if every else resolve(state, explicit), state)
    except BaseException:
        conn.close()
        raise


def graph_for_write(explicit: str | None = None, *, every: bool = False) -> Graph:
    """For commands that create work: `.clavain/` (and its .gitignore block) made if missing."""
    from clavain.project import ensure_state
    from clavain.store.graph_db import open_graph_db

    state = ensure_state(StatePaths.discover())
    return _graph(state, open_graph_db(state), explicit, every)


def graph_for_read(explicit: str | None = None, *, every: bool = False) -> Graph:
    """For commands that only look: no database yet reads as the empty graph, and creates
    nothing (no `.clavain/`, no `.gitignore`); a read-only `.clavain/` is read as it is."""
    from clavain.store.graph_db import open_for_reading

    state = StatePaths.discover()
    return _graph(state, open_for_reading(state), explicit, every)


def existing_graph(explicit: str | None = None) -> Graph:
    """The graph, refusing rather than creating an empty database as a side effect of a read or
    of naming a node that cannot exist yet."""
    from clavain.errors import ClavainError
    from clavain.store.db import connect
    from clavain.store.graph_db import open_graph_db, store_url

    state = StatePaths.discover()
    if store_url(state):
        return _graph(state, open_graph_db(state), explicit)
    if not state.db.exists():
        raise ClavainError(f"no workgraph yet ({state.db} is missing); "
                           "add nodes with `clavain graph add` or `clavain graph import`")
    return _graph(state, connect(state.db), explicit)
