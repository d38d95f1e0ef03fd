"""Claims on nodes: pick the next runnable node, lock it for a run, renew the lease.

A claim is one conditional UPDATE inside BEGIN IMMEDIATE, so two runners never hold one node.
Nodes whose ownership globs overlap (`ownership`) never run at the same time: a claim skips
(claim_next) or refuses (claim_node) a ready node whose ownership overlaps that of a node in
progress, checked in the same transaction. A node that owns nothing overlaps nothing, so while
the next node owns nothing (every graph that does not use ownership) the claim stays the one
UPDATE and never reads the running nodes.

A claim records the claimer's lease (`defaults.lockLeaseSeconds` where it was taken) and
renewing it keeps that lease: every machine judges the claim by it (`stale`, which also gives
back claims whose holder is gone).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from datetime import datetime
from typing import Any

from clavain import config as config_mod
from clavain.clock import now_iso
from clavain.errors import ClavainError
from clavain.processes import boot_id
from clavain.store.db import transaction
from clavain.store.graph_db import dialect, store_now
from clavain.workgraph.claim_columns import LOCK_SET
from clavain.workgraph.export import after_commit
from clavain.workgraph.graphs import Graph
from clavain.workgraph.node_view import NODE_JSON_POSTGRESQL
from clavain.workgraph.nodes import FenceError, fence_condition, get_node, record_event
from clavain.workgraph.ownership import first_conflict, ownership_overlaps

# The ready predicate (parameters :graph, :now) must match the partial index `nodes_ready` word
# for word; the loop offers nodes by it too.
READY_WHERE = """WHERE graph_id = :graph AND status = 'open' AND unmet_deps = 0
    AND lock_run_id IS NULL AND (blocked_until IS NULL OR blocked_until <= :now)
  ORDER BY rank, id"""
_READY = f"FROM nodes INDEXED BY nodes_ready\n  {READY_WHERE}"
_NEXT_ID_SQL = f"SELECT id {_READY} LIMIT 1"
_READY_OWNERSHIP_SQL = f"SELECT id, ownership_json {_READY}"

# An empty ownership list is always stored as '[]' (`nodes._dumps`); another spelling of it only
# costs the slow path. In-progress nodes that own something: while there are none, no claim can
# overlap.
_RUNNING_OWNERSHIP_SQL = """SELECT id, ownership_json FROM nodes
  WHERE graph_id = ? AND status = 'in_progress' AND ownership_json <> '[]'
  ORDER BY id"""


def _claim_sql(next_id: str, this_id: str) -> dict[str, str]:
    """The claim statements around one way of picking the next ready node and of taking a
    named one."""
    return {
        # Under BEGIN IMMEDIATE no other writer runs between the pick and the write; the
        # repeated conditions keep it safe even if called outside one.
        "next": f"""UPDATE nodes {LOCK_SET}
  WHERE graph_id = :graph AND id = ({next_id})
    AND status = 'open' AND unmet_deps = 0 AND lock_run_id IS NULL
  RETURNING id""",
        # The fast path: the next ready node owns nothing, so it overlaps nothing that runs.
        "next_unowned": f"""UPDATE nodes {LOCK_SET}
  WHERE graph_id = :graph AND id = ({next_id})
    AND status = 'open' AND unmet_deps = 0 AND lock_run_id IS NULL AND ownership_json = '[]'
  RETURNING id""",
        "one": f"""UPDATE nodes {LOCK_SET}
  WHERE graph_id = :graph AND id = {this_id} AND status = 'open' AND unmet_deps = 0
    AND lock_run_id IS NULL AND (blocked_until IS NULL OR blocked_until <= :now)
  RETURNING id""",
    }


_CLAIM_SQL = {
    "sqlite": _claim_sql(_NEXT_ID_SQL, ":id"),
    # Claimers on several machines run at once: each takes the first ready row nobody else is
    # taking (FOR UPDATE SKIP LOCKED) instead of queueing behind one write lock. A named node
    # another claimer is locking is skipped too, never waited for: a claimer holding the
    # ownership lock must not wait on a row another claimer holds (a deadlock).
    "postgresql": _claim_sql(f"SELECT id FROM nodes {READY_WHERE} LIMIT 1 "
                             "FOR UPDATE SKIP LOCKED",
                             "(SELECT id FROM nodes WHERE graph_id = :graph AND id = :id "
                             "FOR UPDATE SKIP LOCKED)"),
}
_READY_OWNERSHIP = {"sqlite": _READY_OWNERSHIP_SQL,
                    "postgresql": f"SELECT id, ownership_json FROM nodes {READY_WHERE}"}

# The common claim on a server in one round trip instead of three: lock the next unowned ready
# node, record the claim's event and return the node's JSON in one statement (PostgreSQL runs
# data-changing CTEs; SQLite takes the same steps one by one under its one write lock).
_PG_CLAIM_NEXT_UNOWNED = (
    "WITH claimed AS ("
    + _CLAIM_SQL["postgresql"]["next_unowned"].replace("RETURNING id", "RETURNING *")
    + "), noted AS (INSERT INTO events (graph_id, node_id, from_status, to_status, run_id, "
      "at, note) SELECT graph_id, id, 'open', 'in_progress', :run_id, :now, 'claimed' "
      f"FROM claimed) SELECT {NODE_JSON_POSTGRESQL} FROM claimed n")


def this_host(conn: Any = None) -> str:
    """Who holds a lock, for telling a dead local holder by its pid: the host name, and on a
    shared store also the boot id, so two machines with one host name (cloned VMs) never take
    each other's live pids for dead ones."""
    name = socket.gethostname()
    if conn is None or dialect(conn) == "sqlite":
        return name
    return f"{name}/{boot_id()[:8]}" if boot_id() else name


def select_next(g: Graph, *, now: datetime | None = None) -> str | None:
    """The id of the next runnable node, without claiming it: the one a claim would take."""
    at = now_iso(now or store_now(g.conn))
    row = g.conn.execute(_READY_OWNERSHIP[dialect(g.conn)] + " LIMIT 1",
                         {"graph": g.id, "now": at}).fetchone()
    if row is None or not _globs(row[1]):
        return row[0] if row else None
    running = running_ownership(g)
    return _first_clear(g, running, at) if running else row[0]


def claim_next(g: Graph, *, run_id: str, pid: int | None = None, host: str | None = None,
               now: datetime | None = None, lease_seconds: float | None = None
               ) -> dict[str, Any] | None:
    """Atomically lock the next runnable node for `run_id`; None when nothing is runnable.
    `lease_seconds`: the claim's lease (default: this project's `defaults.lockLeaseSeconds`)."""
    return _claim(g, _lock_next, {}, run_id=run_id, pid=pid, host=host, now=now,
                  lease_seconds=lease_seconds)


def claim_node(g: Graph, node_id: str, *, run_id: str, pid: int | None = None,
               host: str | None = None, now: datetime | None = None,
               lease_seconds: float | None = None) -> dict[str, Any] | None:
    """Lock one given node; None when it is not runnable (claimed, blocked, waiting on deps, or
    its ownership overlaps a node in progress)."""
    return _claim(g, _lock_one, {"id": node_id}, run_id=run_id, pid=pid, host=host, now=now,
                  lease_seconds=lease_seconds)


def lease_of(cfg: dict[str, Any]) -> float:
    """The lease a claim taken under `cfg` carries."""
    return float(config_mod.get(cfg, "defaults.lockLeaseSeconds", 3600))


def lease_ms(seconds: float) -> int:
    """A lease as stored with the claim: whole milliseconds, at most about 146,000 years."""
    return int(min(max(seconds, 0.001), 2 ** 62 / 1000) * 1000)


_Lock = Callable[[Graph, dict[str, Any]], str | None]  # picks and locks one node, SQL only


def _claim(g: Graph, lock: _Lock, extra: dict[str, Any], *, run_id: str, pid: int | None,
           host: str | None, now: datetime | None, lease_seconds: float | None
           ) -> dict[str, Any] | None:
    if not run_id:
        raise ClavainError("a claim needs a run id")
    if lease_seconds is None:
        lease_seconds = lease_of(config_mod.load(g.state.config))
    at = now_iso(now or store_now(g.conn))
    params = {"graph": g.id, "run_id": run_id, "now": at, "pid": pid,
              "host": host or this_host(g.conn), "lease_ms": lease_ms(lease_seconds), **extra}
    with transaction(g.conn, exclusive=False):
        if lock is _lock_next and dialect(g.conn) == "postgresql":
            row = g.conn.execute(_PG_CLAIM_NEXT_UNOWNED, params).fetchone()
            if row is not None:
                return json.loads(row[0])
            lock = _lock_next_owned  # the next ready node owns something
        node_id = lock(g, params)
        if node_id is None:
            return None
        record_event(g, node_id, "open", "in_progress", at=at, run_id=run_id, note="claimed")
        return get_node(g, node_id)


def _lock_next(g: Graph, params: dict[str, Any]) -> str | None:
    """Lock the first ready node clear of every running node's ownership. SQL only."""
    node_id = _locked(g, _CLAIM_SQL[dialect(g.conn)]["next_unowned"], params)
    return node_id if node_id is not None else _lock_next_owned(g, params)


def _lock_next_owned(g: Graph, params: dict[str, Any]) -> str | None:
    """`_lock_next` once the next ready node owns something. SQL only."""
    sql = _CLAIM_SQL[dialect(g.conn)]
    _hold_ownership(g)
    running = running_ownership(g)
    if not running:
        return _locked(g, sql["next"], params)
    # One writer at a time on SQLite: the first clear node is the one.
    for node_id in _clear_nodes(g, running, params["now"],
                                first_only=dialect(g.conn) == "sqlite"):
        locked = _locked(g, sql["one"], {**params, "id": node_id})
        if locked is not None:  # else another claimer is taking it: the next clear one
            return locked
    return None


def _lock_one(g: Graph, params: dict[str, Any]) -> str | None:
    """Lock the node `params["id"]` unless its ownership overlaps a running node's. SQL only."""
    owned = _owned_by(g, params["id"])
    if owned:
        _hold_ownership(g)
        if ownership_overlaps(owned, _every_glob(running_ownership(g))):
            return None
    return _locked(g, _CLAIM_SQL[dialect(g.conn)]["one"], params)


def _hold_ownership(g: Graph) -> None:
    """On a shared server, claims that compare ownership globs with the running nodes take
    turns per graph (SQLite's claim already holds the one write lock): two machines must not
    both see a glob free and both take it."""
    if dialect(g.conn) != "sqlite":
        g.conn.execute("SELECT pg_advisory_xact_lock(hashtext('clavain-ownership:' || ?))",
                       (g.id,))


def _locked(g: Graph, sql: str, params: dict[str, Any]) -> str | None:
    rows = g.conn.execute(sql, params).fetchall()
    return rows[0][0] if rows else None


# ---------------------------------------------------------------- ownership exclusion

def _globs(text: str | None) -> list[str]:
    """A stored ownership list; anything but a list of strings owns nothing."""
    value = json.loads(text or "[]")
    return [glob for glob in value if isinstance(glob, str)] if isinstance(value, list) else []


def _every_glob(running: dict[str, list[str]]) -> list[str]:
    return [glob for globs in running.values() for glob in globs]


def running_ownership(g: Graph) -> dict[str, list[str]]:
    """{node id: its globs} for every in-progress node of the graph that owns something."""
    rows = g.conn.execute(_RUNNING_OWNERSHIP_SQL, (g.id,)).fetchall()
    return {row[0]: _globs(row[1]) for row in rows}


def _owned_by(g: Graph, node_id: str) -> list[str]:
    row = g.conn.execute("SELECT ownership_json FROM nodes WHERE graph_id = ? AND id = ?",
                         (g.id, node_id)).fetchone()
    return _globs(row[0]) if row else []


def _first_clear(g: Graph, running: dict[str, list[str]], at: str) -> str | None:
    """The first ready node, in claim order, whose ownership overlaps no running node's."""
    found = _clear_nodes(g, running, at, first_only=True)
    return found[0] if found else None


def _clear_nodes(g: Graph, running: dict[str, list[str]], at: str, *,
                 first_only: bool) -> list[str]:
    """Ready nodes, in claim order, whose ownership overlaps no running node's: the first only,
    or (a claimer on a shared server, where another machine may be taking the first) all."""
    busy = _every_glob(running)
    cursor = g.conn.execute(_READY_OWNERSHIP[dialect(g.conn)], {"graph": g.id, "now": at})
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
    ready = g.conn.execute(_READY_OWNERSHIP[dialect(g.conn)],
                           {"graph": g.id, "now": now_iso(now or store_now(g.conn))})
    for node_id, text in ready.fetchall():
        conflict = first_conflict(_globs(text), running)
        if conflict is not None:
            waits.append((node_id, *conflict))
    return waits


def claim_named(g: Graph, node_id: str, *, run_id: str, pid: int | None = None,
                now: datetime | None = None) -> dict[str, Any]:
    """Claim one node by name for `run_id` (a loop's agent picking its item), or say why not:
    held by another run, not ready (dependencies, backoff, finished), or its files are owned by
    a running node. Claiming a node the run already holds returns it."""
    node = get_node(g, node_id)
    if node is None:
        raise ClavainError(f"unknown node {node_id!r} in graph {g.id!r}")
    if node["lock_run_id"] == run_id:
        return node
    claimed = claim_node(g, node_id, run_id=run_id, pid=pid, now=now)
    if claimed is not None:
        after_commit(g)
        return claimed
    node = get_node(g, node_id) or node
    if node["lock_run_id"]:
        why = f"run {node['lock_run_id']!r} holds it"
    elif node["status"] != "open":
        why = f"it is {node['status']}"
    elif node["unmet_deps"]:
        why = f"{node['unmet_deps']} of its dependencies are not done"
    elif node["blocked_until"]:
        why = f"it waits for its retry backoff until {node['blocked_until']}"
    else:
        why = "a running node owns some of its files"
    raise ClavainError(f"node {node_id!r} cannot be claimed now: {why}")


def heartbeat(g: Graph, node_id: str, *, run_id: str, snapshot: bool = False,
              now: datetime | None = None, fence: int | None = None) -> dict[str, Any]:
    """Renew the lease of a node `run_id` holds (under claim generation `fence`, when given);
    an error names who holds it otherwise. With `snapshot`, the snapshot follows."""
    at = now_iso(now or store_now(g.conn))
    fenced, params = fence_condition(fence)
    with transaction(g.conn, exclusive=False):
        renewed = g.conn.execute(
            "UPDATE nodes SET lock_renewed_at = ? WHERE graph_id = ? AND id = ? "
            f"AND lock_run_id = ?{fenced} RETURNING id",
            (at, g.id, node_id, run_id, *params)).fetchall()
        if not renewed:
            node = get_node(g, node_id)
            if node is None:
                raise ClavainError(f"unknown node {node_id!r}")
            holder = node["lock_run_id"]
            if holder == run_id:
                raise FenceError(node, fence)
            raise ClavainError(
                f"node {node_id!r} is not held by run {run_id!r} "
                + (f"(run {holder!r} holds it)" if holder else f"(it is {node['status']}, "
                   "not claimed: its lease ran out or it finished)"))
        node = get_node(g, node_id)
    if snapshot:
        after_commit(g)
    return node
