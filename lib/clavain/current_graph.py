"""Which workgraph a command works on: the one it names (`--graph`), else `$CLAVAIN_GRAPH` (what a
runner inherits from its node), else the active sprint's, else the project's default graph.

Every front door asks this one function, so a person's `clavain graph next`, the executor's
`clavain graph apply` and the supervisor agree on the graph.
"""

from __future__ import annotations

import os

from clavain.paths import StatePaths


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
