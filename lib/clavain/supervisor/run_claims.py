"""Giving back the claims one run holds: the one way the supervisor, its crash recovery and the
loop hand nodes back in bulk.

A supervised run checks its claims against the workers it has: a claim no worker of the run
holds any more (its worker ended without giving it back — the store was away, or a bug) is
given back unspent, so no claim outlives its worker and the run never waits on itself. It asks
after every finished worker (that node), whenever it would wait on "nodes in progress" (all of
them), and when it ends (all of them but those a worker still holds; the report says exactly
what could and could not be given back). Recovery after a supervisor's crash gives back its
claims as crashes (`stale.give_back_crashed`: no attempt, one more crash).
"""

from __future__ import annotations

from typing import Any

from clavain.clock import now_iso
from clavain.paths import StatePaths
from clavain.store.db import transaction
from clavain.store.graph_db import reconnecting, store_now
from clavain.workgraph.graphs import Graph
from clavain.workgraph.nodes import get_node, release_claim

_HELD = "SELECT id FROM nodes WHERE graph_id = ? AND lock_run_id = ?"


def held(g: Graph, run_id: str, node_id: str | None = None) -> list[str]:
    """What `run_id` holds in the graph (or whether it holds `node_id`)."""
    if node_id is None:
        return [row[0] for row in g.conn.execute(_HELD + " ORDER BY id", (g.id, run_id))]
    return [row[0] for row in g.conn.execute(_HELD + " AND id = ?", (g.id, run_id, node_id))]


def give_back(state: StatePaths, conn: Any, run_id: str, graph_id: str, *, why: str,
              keep: set[str] | None = None, only: str | None = None,
              crashed: bool = False) -> list[str]:
    """Give back every node `run_id` holds in `graph_id` (only `only`, when given; never those
    in `keep`, which a worker or a runner still holds), no attempt spent; `crashed`: its
    supervisor died, which counts against each node's crash limit. One transaction, run again
    if a server connection drops under it. Returns the node ids given back."""
    from clavain import config as config_mod
    from clavain.workgraph.stale import give_back_crashed

    g = Graph(conn, graph_id, state)
    cfg = config_mod.load(state.config) if crashed else {}

    def give() -> list[str]:
        nodes = [node for node in held(g, run_id, only) if node not in (keep or ())]
        if not nodes:
            return []
        now = store_now(conn)
        at = now_iso(now)
        released = []
        with transaction(conn):
            for node_id in nodes:
                if crashed:
                    node = get_node(g, node_id)
                    gone = node is not None and give_back_crashed(g, cfg, node, why=why, at=at,
                                                                  now=now)
                else:
                    gone = release_claim(g, node_id, run_id, at=at, why=why)
                if gone:
                    released.append(node_id)
        return released

    return reconnecting(conn, give)


def describe_end(given_back: list[str], still_held: list[str], problem: str | None) -> str:
    """The last words about the run's claims: only what happened."""
    parts = []
    if given_back:
        parts.append(f"gave back {', '.join(given_back)} (no attempt spent)")
    if still_held:
        parts.append(f"could not give back {', '.join(still_held)} ({problem}); a later run "
                     "gives them back once it finds this one gone (a crash: no attempt spent)")
    return "; ".join(parts)


def settle_at_end(state: StatePaths, g: Graph, run_id: str, *, why: str, working: set[str]
                  ) -> dict[str, Any]:
    """Give back what the run still holds as it ends, but the nodes a worker still holds
    (`working`: it outlived the stop's grace; the next run's recovery sees to it): the node
    ids given back, those still held because the store did not answer, and the problem."""
    try:
        given_back = give_back(state, g.conn, run_id, g.id, why=why, keep=working)
    except Exception as exc:
        try:
            still = [node for node in held(g, run_id) if node not in working]
        except Exception:
            still = ["(unknown: the store did not answer)"]
        problem = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
        return {"given_back": [], "still_held": still, "problem": problem}
    return {"given_back": given_back, "still_held": [], "problem": None}
