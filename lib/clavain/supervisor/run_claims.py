"""The claims one supervised run holds, checked against the workers it has: a claim no worker of
the run holds any more (its worker ended without giving it back — the store was away, or a bug)
is given back unspent, so no claim outlives its worker and the run never waits on itself.

The supervisor asks after every finished worker (that node), whenever it would wait on "nodes
in progress" (all of them), and when it ends (all of them, and the report says exactly what
could and could not be given back).
"""

from __future__ import annotations

from typing import Any

from clavain.clock import now_iso
from clavain.store.db import transaction
from clavain.store.graph_db import reconnecting
from clavain.workgraph.graphs import Graph
from clavain.workgraph.nodes import release_claim

_HELD = "SELECT id, lock_generation FROM nodes WHERE graph_id = ? AND lock_run_id = ?"


def held(g: Graph, run_id: str, node_id: str | None = None) -> dict[str, int]:
    """{node id: claim generation} of what `run_id` holds in the graph (or of `node_id`)."""
    if node_id is None:
        rows = g.conn.execute(_HELD + " ORDER BY id", (g.id, run_id)).fetchall()
    else:
        rows = g.conn.execute(_HELD + " AND id = ?", (g.id, run_id, node_id)).fetchall()
    return {row[0]: row[1] for row in rows}


def give_back_orphans(g: Graph, run_id: str, working: set[str], *, why: str,
                      node_id: str | None = None) -> list[str]:
    """Give back, unspent and under each claim's fence, every claim of `run_id` (or only
    `node_id`'s) whose node no worker in `working` holds. Returns the node ids given back."""

    def give_back() -> list[str]:
        orphans = {node: fence for node, fence in held(g, run_id, node_id).items()
                   if node not in working}
        if not orphans:
            return []
        released = []
        with transaction(g.conn):
            at = now_iso()
            for node, fence in orphans.items():
                if release_claim(g, node, run_id, at=at, why=why, fence=fence):
                    released.append(node)
        return released

    return reconnecting(g.conn, give_back)


def describe_end(given_back: list[str], still_held: list[str], problem: str | None) -> str:
    """The last words about the run's claims: only what happened."""
    parts = []
    if given_back:
        parts.append(f"gave back {', '.join(given_back)} (no attempt spent)")
    if still_held:
        parts.append(f"could not give back {', '.join(still_held)} ({problem}); the next "
                     "`clavain run` gives them back")
    return "; ".join(parts) or "no claim was left"


def settle_at_end(g: Graph, run_id: str, *, why: str) -> dict[str, Any]:
    """Give back whatever the run still holds as it ends (no worker is left): the node ids
    given back, those still held (the store did not answer), and the problem."""
    try:
        given_back = give_back_orphans(g, run_id, set(), why=why)
    except Exception as exc:
        try:
            still = sorted(held(g, run_id))
        except Exception:
            still = ["(unknown: the store did not answer)"]
        problem = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
        return {"given_back": [], "still_held": still, "problem": problem}
    return {"given_back": given_back, "still_held": [], "problem": None}
