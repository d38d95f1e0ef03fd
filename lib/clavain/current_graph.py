"""Which workgraph a command works on: the one it names (`--graph`), else `$CLAVAIN_GRAPH` (what a
runner inherits from its node), else the active sprint's, else the project's default graph.

Every front door asks this one function, so a person's `clavain graph next`, the executor's
`clavain graph apply` and the supervisor agree on the graph.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from clavain.paths import StatePaths

if TYPE_CHECKING:
    from clavain.workgraph.graphs import Graph


def resolve(state: StatePaths, explicit: str | None = None) -> str:
    """The graph id; a damaged checkpoint is refused with the line that names it (the sprint
    commands set it aside)."""
    from clavain.sprint import checkpoint
    from clavain.workgraph.graphs import check_id

    if explicit:
        return check_id(explicit)
    inherited = os.environ.get("CLAVAIN_GRAPH")
    if inherited:
        return check_id(inherited)
    return checkpoint.graph_of(checkpoint.read(state))


def require_known(g: Graph, explicit: str | None) -> Graph:
    """`g` when it exists or was not named: a graph named with `--graph` (other than `default`)
    that the store does not hold is a typo, refused with the ids it does hold, never read as an
    empty graph. Commands that create a graph (`graph add`, `graph import`) do not ask."""
    from clavain.errors import ClavainError
    from clavain.workgraph.graphs import DEFAULT_GRAPH, get, list_graphs

    if not explicit or g.id == DEFAULT_GRAPH or get(g.conn, g.id) is not None:
        return g
    known = [row["id"] for row in list_graphs(g.conn)]
    shown = ", ".join(known[-8:]) + (" …" if len(known) > 8 else "")
    g.conn.close()
    raise ClavainError(f"no such graph {g.id!r} (known: {shown or 'none yet'}; "
                       "`clavain graph graphs` lists them)")
