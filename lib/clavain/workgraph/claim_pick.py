"""Which node a claim takes: the next ready one whose ownership overlaps no running node's
(`ownership`), and the ownership waits that explain why a ready node is not taken.

Nodes whose ownership globs overlap never run at the same time: a claim skips (claim next) or
refuses (claim named) a ready node whose ownership overlaps that of a node in progress, checked
in the claim's own transaction. A node that owns nothing overlaps nothing, so while the next
node owns nothing (every graph that does not use ownership) the claim stays one UPDATE and
never reads the running nodes. SQL only, inside the claim's transaction (`claims`); the
statements are the `claims` named queries.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from clavain.clock import now_iso
from clavain.store import queries
from clavain.store.graph_db import is_shared, store_now
from clavain.workgraph.graphs import Graph
from clavain.workgraph.ownership import first_conflict, ownership_overlaps


def select_next(g: Graph, *, now: datetime | None = None) -> str | None:
    """The id of the next runnable node, without claiming it: the one a claim would take."""
    at = now_iso(now or store_now(g.conn))
    row = queries.run(g.conn, "claims.first_ready_ownership",
                      {"graph": g.id, "now": at}).fetchone()
    if row is None or not _globs(row[1]):
        return row[0] if row else None
    running = running_ownership(g)
    return _first_clear(g, running, at) if running else row[0]


def lock_next(g: Graph, params: dict[str, Any]) -> str | None:
    """Lock the first ready node clear of every running node's ownership; its id."""
    node_id = _locked(g, "claims.next_unowned", params)
    return node_id if node_id is not None else lock_next_owned(g, params)


def lock_next_owned(g: Graph, params: dict[str, Any]) -> str | None:
    """`lock_next` once the next ready node owns something."""
    queries.run(g.conn, "claims.hold_ownership", (g.id,))
    running = running_ownership(g)
    if not running:
        return _locked(g, "claims.next", params)
    # One writer at a time on a file: the first clear node is the one. On a server another
    # machine may be taking it: then the next clear one.
    for node_id in _clear_nodes(g, running, params["now"], first_only=not is_shared(g.conn)):
        locked = _locked(g, "claims.one", {**params, "id": node_id})
        if locked is not None:  # else another claimer is taking it: the next clear one
            return locked
    return None


def lock_one(g: Graph, params: dict[str, Any]) -> str | None:
    """Lock the node `params["id"]` unless its ownership overlaps a running node's."""
    row = queries.run(g.conn, "claims.owned_by", (g.id, params["id"])).fetchone()
    owned = _globs(row[0]) if row else []
    if owned:
        queries.run(g.conn, "claims.hold_ownership", (g.id,))
        if ownership_overlaps(owned, _every_glob(running_ownership(g))):
            return None
    return _locked(g, "claims.one", params)


def _locked(g: Graph, name: str, params: dict[str, Any]) -> str | None:
    rows = queries.run(g.conn, name, params).fetchall()
    return rows[0][0] if rows else None


def _globs(text: str | None) -> list[str]:
    """A stored ownership list; anything but a list of strings owns nothing."""
    value = json.loads(text or "[]")
    return [glob for glob in value if isinstance(glob, str)] if isinstance(value, list) else []


def _every_glob(running: dict[str, list[str]]) -> list[str]:
    return [glob for globs in running.values() for glob in globs]


def running_ownership(g: Graph) -> dict[str, list[str]]:
    """{node id: its globs} for every in-progress node of the graph that owns something."""
    rows = queries.run(g.conn, "claims.running_ownership", (g.id,)).fetchall()
    return {row[0]: _globs(row[1]) for row in rows}


def _first_clear(g: Graph, running: dict[str, list[str]], at: str) -> str | None:
    """The first ready node, in claim order, whose ownership overlaps no running node's."""
    found = _clear_nodes(g, running, at, first_only=True)
    return found[0] if found else None


def _clear_nodes(g: Graph, running: dict[str, list[str]], at: str, *,
                 first_only: bool) -> list[str]:
    """Ready nodes, in claim order, whose ownership overlaps no running node's: the first only,
    or (a claimer on a shared server, where another machine may be taking the first) all."""
    busy = _every_glob(running)
    cursor = queries.run(g.conn, "claims.ready_ownership", {"graph": g.id, "now": at})
    found = []
    try:  # read lazily, and close before the caller writes
        for node_id, text in cursor:
            if not ownership_overlaps(_globs(text), busy):
                found.append(node_id)
                if first_only:
                    break
        return found
    finally:
        cursor.close()


def ownership_waits(g: Graph, *, now: datetime | None = None
                    ) -> list[tuple[str, str, str, str]]:
    """(ready node, running node, its glob, the running node's glob) for every ready node that
    waits only because its ownership overlaps a node in progress."""
    running = running_ownership(g)
    if not running:
        return []
    waits = []
    ready = queries.run(g.conn, "claims.ready_ownership",
                        {"graph": g.id, "now": now_iso(now or store_now(g.conn))})
    for node_id, text in ready.fetchall():
        conflict = first_conflict(_globs(text), running)
        if conflict is not None:
            waits.append((node_id, *conflict))
    return waits
