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
from clavain.workgraph.claim_columns import LOCK_CLEARED

if TYPE_CHECKING:  # annotations only: the `sqlite3` package costs `datetime` on hook paths
    import sqlite3

DEFAULT_GRAPH = "default"
KINDS = ("default", "sprint", "run")
CLOSED = ("shipped", "abandoned")
# Statuses a closed graph's unfinished nodes leave behind: they never run.
UNFINISHED = ("open", "in_progress", "needs_human")
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
    conn.execute("INSERT INTO graphs (id, kind, title, created_at) VALUES (?, ?, ?, ?) "
                 "ON CONFLICT (id) DO NOTHING", (graph_id, kind or kind_of(graph_id), title, at))
    status = conn.execute("SELECT status FROM graphs WHERE id = ?", (graph_id,)).fetchone()[0]
    if status in CLOSED:
        raise ClavainError(f"graph {graph_id!r} was {status}: its sprint is over and nothing is "
                           "added to it; start a new sprint, or use another graph (--graph)")


def get(conn: sqlite3.Connection, graph_id: str) -> dict[str, Any] | None:
    row = conn.execute("SELECT id, kind, status, title, created_at, closed_at FROM graphs "
                       "WHERE id = ?", (graph_id,)).fetchone()
    return dict(row) if row else None


def list_graphs(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """Every graph, oldest first, with its node counts by status."""
    rows = conn.execute(
        "SELECT g.id, g.kind, g.status, g.title, g.created_at, g.closed_at, "
        "(SELECT count(*) FROM nodes n WHERE n.graph_id = g.id) AS nodes, "
        "(SELECT count(*) FROM nodes n WHERE n.graph_id = g.id AND n.status = 'done') AS done "
        "FROM graphs g ORDER BY g.created_at, g.id").fetchall()
    return [dict(row) for row in rows]


def close(g: Graph, outcome: str, *, at: str, note: str) -> list[str]:
    """Mark the graph shipped or abandoned and cancel its unfinished nodes (an abandoned sprint's
    open work never runs, nor becomes another sprint's). Returns the cancelled ids. SQL only."""
    from clavain.workgraph.nodes import record_event

    if outcome not in CLOSED:
        raise ValueError(f"a graph closes as {' or '.join(CLOSED)}, not {outcome!r}")
    marks = ", ".join("?" * len(UNFINISHED))
    cancelled = g.conn.execute(
        f"SELECT id, status FROM nodes WHERE graph_id = ? AND status IN ({marks}) ORDER BY id",
        (g.id, *UNFINISHED)).fetchall()
    g.conn.execute(
        f"UPDATE nodes SET status = 'cancelled', {LOCK_CLEARED}, blocked_until = NULL, "
        f"updated_at = ? WHERE graph_id = ? AND status IN ({marks})", (at, g.id, *UNFINISHED))
    for row in cancelled:
        record_event(g, row["id"], row["status"], "cancelled", at=at, note=note)
    g.conn.execute("UPDATE graphs SET status = ?, closed_at = ? WHERE id = ?",
                   (outcome, at, g.id))
    return [row["id"] for row in cancelled]
