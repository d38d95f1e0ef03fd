"""A project's workgraphs: the handle every workgraph function takes, and a graph's life.

A graph is a sprint's (its id is the sprint id, made when the sprint starts), the project's
default graph (work added with no sprint active) or a headless run's. Node ids are unique within
a graph; every statement is scoped to one graph, so a new sprint never sees another sprint's
open tasks. When a sprint ships or is abandoned its graph is closed: still nodes can be listed
(`clavain graph ls --all`), nothing new is added, and (abandoned) its open nodes are cancelled.
Which graph a command works on is `clavain.current_graph.resolve`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from clavain.errors import ClavainError
from clavain.paths import StatePaths
from clavain.store import queries
from clavain.workgraph.statuses import NodeStatus

if TYPE_CHECKING:  # annotations only: the `sqlite3` package costs `datetime` on hook paths
    import sqlite3

DEFAULT_GRAPH = "default"
KINDS = ("default", "sprint", "run")
CLOSED = ("shipped", "abandoned")
# A closed graph's nodes still UNFINISHED (`statuses`) are cancelled: they never run
# (`graphs.unfinished`, `graphs.cancel_unfinished`).
MAX_ID_CHARS = 100


class Graph:
    """One workgraph of one project: the connection, the graph every statement is scoped to, and
    the project's state paths (snapshot, artifacts, config). Immutable; a plain class with slots
    (no dataclasses on paths a hook may take)."""

    __slots__ = ("conn", "id", "state")

    def __init__(self, conn: sqlite3.Connection, graph_id: str, state: StatePaths) -> None:
        object.__setattr__(self, "conn", conn)
        object.__setattr__(self, "id", check_id(graph_id))
        object.__setattr__(self, "state", state)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Graph is immutable; build a new one")

    def __repr__(self) -> str:
        return f"Graph({self.id!r}, db={str(self.state.db)!r})"


def check_id(graph_id: object) -> str:
    """A graph id: 1-100 letters, digits and `._:-` (sprint ids, `default`, a run's name)."""
    if (not isinstance(graph_id, str) or not 0 < len(graph_id) <= MAX_ID_CHARS
            or not all(c.isascii() and (c.isalnum() or c in "._:-") for c in graph_id)):
        raise ClavainError(f"graph id {str(graph_id)[:60]!r} is not 1-{MAX_ID_CHARS} letters, "
                           "digits or ._:- (a sprint id, `default`, or a run's name)")
    return graph_id


def kind_of(graph_id: str) -> str:
    """The kind a graph gets when work is first added to it outside a sprint's start."""
    return "default" if graph_id == DEFAULT_GRAPH else "run"


def ensure(conn: sqlite3.Connection, graph_id: str, *, at: str, kind: str | None = None,
           title: str = "") -> None:
    """Make the graph's row if it is missing; refuse a closed graph (nothing is added to a
    finished sprint). SQL only: the caller holds the transaction."""
    queries.run(conn, "graphs.ensure", (graph_id, kind or kind_of(graph_id), title, at))
    status = queries.run(conn, "graphs.status", (graph_id,)).fetchone()[0]
    if status in CLOSED:
        raise ClavainError(f"graph {graph_id!r} was {status}: its sprint is over and nothing is "
                           "added to it; start a new sprint, or use another graph (--graph)")


def get(conn: sqlite3.Connection, graph_id: str) -> dict[str, Any] | None:
    row = queries.run(conn, "graphs.get", (graph_id,)).fetchone()
    return dict(row) if row else None


def list_graphs(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """Every graph, oldest first, with its node counts by status."""
    rows = queries.run(conn, "graphs.list").fetchall()
    return [dict(row) for row in rows]


def close(g: Graph, outcome: str, *, at: str, note: str) -> list[str]:
    """Mark the graph shipped or abandoned and cancel its unfinished nodes (an abandoned sprint's
    open work never runs, nor becomes another sprint's). Returns the cancelled ids. SQL only."""
    from clavain.workgraph.nodes import record_event

    if outcome not in CLOSED:
        raise ValueError(f"a graph closes as {' or '.join(CLOSED)}, not {outcome!r}")
    cancelled = queries.run(g.conn, "graphs.unfinished", (g.id,)).fetchall()
    queries.run(g.conn, "graphs.cancel_unfinished", (at, g.id))
    for row in cancelled:
        record_event(g, row["id"], row["status"], NodeStatus.CANCELLED, at=at, note=note)
    queries.run(g.conn, "graphs.close", (outcome, at, g.id))
    return [row["id"] for row in cancelled]
