"""Which workgraph a command works on: the one it names (`--graph`), else `$CLAVAIN_GRAPH` (what a
runner inherits from its node), else the active sprint's, else the project's default graph.

Every front door asks this one function, so a person's `clavain graph next`, the executor's
`clavain graph apply` and the supervisor agree on the graph.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from clavain.paths import StatePaths


def resolve(state: StatePaths, explicit: str | None = None,
            env: Mapping[str, str] | None = None) -> str:
    from clavain.workgraph.graphs import DEFAULT_GRAPH, check_id

    if explicit:
        return check_id(explicit)
    inherited = (os.environ if env is None else env).get("CLAVAIN_GRAPH")
    if inherited:
        return check_id(inherited)
    return active_sprint_graph(state) or DEFAULT_GRAPH


def active_sprint_graph(state: StatePaths) -> str | None:
    """The active sprint's graph, or None without an active sprint. A damaged checkpoint is
    refused with the line that names it (the sprint commands set it aside)."""
    from clavain.sprint import checkpoint

    active = checkpoint.read(state)
    return checkpoint.graph_of(active) if active else None
