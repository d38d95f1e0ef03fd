"""Claims on nodes: pick the next runnable node, lock it for a run, renew the lease, and release
locks whose runner is gone.

A claim is one conditional UPDATE inside BEGIN IMMEDIATE, so two runners never hold one node.
A lock is stale when its holder's pid is gone on this host or its lease ran out
(coalesce(lock_renewed_at, lock_started_at) older than defaults.lockLeaseSeconds). Releasing a
stale lock counts as a failed attempt of the node (with backoff, and escalation once attempts
run out): a runner that crashes every time must not retry forever.
"""

from __future__ import annotations

import os
import socket
import sqlite3
from datetime import datetime, timedelta, timezone
from typing import Any

from clavain import config as config_mod
from clavain.clock import now_iso
from clavain.errors import ClavainError
from clavain.store.db import transaction
from clavain.workgraph.export import after_commit
from clavain.workgraph.graphs import Graph
from clavain.workgraph.nodes import get_node, record_event
from clavain.workgraph.results import record_result, runner_died

# The ready predicate must match the partial index `nodes_ready` word for word.
_NEXT_ID_SQL = """SELECT id FROM nodes INDEXED BY nodes_ready
  WHERE graph_id = :graph AND status = 'open' AND unmet_deps = 0 AND lock_run_id IS NULL
    AND (blocked_until IS NULL OR blocked_until <= :now)
  ORDER BY rank, id LIMIT 1"""

_LOCK_SET = """SET status = 'in_progress', lock_run_id = :run_id, lock_started_at = :now,
      lock_renewed_at = :now, lock_pid = :pid, lock_host = :host, updated_at = :now"""

# Under BEGIN IMMEDIATE no other writer runs between the pick and the write; the repeated
# conditions keep it safe even if called outside one.
_CLAIM_NEXT_SQL = f"""UPDATE nodes {_LOCK_SET}
  WHERE graph_id = :graph AND id = ({_NEXT_ID_SQL})
    AND status = 'open' AND unmet_deps = 0 AND lock_run_id IS NULL
  RETURNING id"""

_CLAIM_ONE_SQL = f"""UPDATE nodes {_LOCK_SET}
  WHERE graph_id = :graph AND id = :id AND status = 'open' AND unmet_deps = 0
    AND lock_run_id IS NULL AND (blocked_until IS NULL OR blocked_until <= :now)
  RETURNING id"""


def this_host() -> str:
    return socket.gethostname()


def select_next(g: Graph, *, now: datetime | None = None) -> str | None:
    """The id of the next runnable node, without claiming it."""
    row = g.conn.execute(_NEXT_ID_SQL, {"graph": g.id, "now": now_iso(now)}).fetchone()
    return row[0] if row else None


def claim_next(g: Graph, *, run_id: str, pid: int | None = None, host: str | None = None,
               now: datetime | None = None) -> dict[str, Any] | None:
    """Atomically lock the next runnable node for `run_id`; None when nothing is runnable."""
    return _claim(g, _CLAIM_NEXT_SQL, {}, run_id=run_id, pid=pid, host=host, now=now)


def claim_node(g: Graph, node_id: str, *, run_id: str, pid: int | None = None,
               host: str | None = None, now: datetime | None = None) -> dict[str, Any] | None:
    """Lock one given node; None when it is not runnable (claimed, blocked, waiting on deps…)."""
    return _claim(g, _CLAIM_ONE_SQL, {"id": node_id}, run_id=run_id, pid=pid, host=host,
                  now=now)


def _claim(g: Graph, sql: str, extra: dict[str, Any], *, run_id: str, pid: int | None,
           host: str | None, now: datetime | None) -> dict[str, Any] | None:
    if not run_id:
        raise ClavainError("a claim needs a run id")
    at = now_iso(now)
    params = {"graph": g.id, "run_id": run_id, "now": at, "pid": pid,
              "host": host or this_host(), **extra}
    with transaction(g.conn):
        rows = g.conn.execute(sql, params).fetchall()
        if not rows:
            return None
        node_id = rows[0][0]
        record_event(g, node_id, "open", "in_progress", at=at, run_id=run_id, note="claimed")
        return get_node(g, node_id)


def heartbeat(g: Graph, node_id: str, *, run_id: str, snapshot: bool = False,
              now: datetime | None = None) -> dict[str, Any]:
    """Renew the lease of a node `run_id` holds; an error names who holds it otherwise. With
    `snapshot`, the snapshot follows."""
    at = now_iso(now)
    with transaction(g.conn):
        renewed = g.conn.execute(
            "UPDATE nodes SET lock_renewed_at = ? WHERE graph_id = ? AND id = ? "
            "AND lock_run_id = ? RETURNING id", (at, g.id, node_id, run_id)).fetchall()
        if not renewed:
            node = get_node(g, node_id)
            if node is None:
                raise ClavainError(f"unknown node {node_id!r}")
            holder = node["lock_run_id"]
            raise ClavainError(
                f"node {node_id!r} is not held by run {run_id!r} "
                + (f"(run {holder!r} holds it)" if holder else f"(it is {node['status']}, "
                   "not claimed: its lease ran out or it finished)"))
        node = get_node(g, node_id)
    if snapshot:
        after_commit(g)
    return node


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    except OverflowError:
        return False  # no such pid can exist
    return True


def _stale_reason(row: sqlite3.Row, cutoff: str, host: str) -> str | None:
    renewed = row["lock_renewed_at"] or row["lock_started_at"] or ""
    if renewed < cutoff:  # no time recorded: treat as expired
        return f"lease expired (last renewed {renewed or 'never'})"
    if row["lock_host"] == host and row["lock_pid"] and not pid_alive(row["lock_pid"]):
        return f"lock holder pid {row['lock_pid']} is gone"
    return None


_LOCKED = ("SELECT id, lock_run_id, lock_pid, lock_host, lock_started_at, lock_renewed_at "
           "FROM nodes WHERE graph_id = ? AND lock_run_id IS NOT NULL")


def stale_locks(g: Graph, *, lease_seconds: float, now: datetime | None = None,
                host: str | None = None) -> list[tuple[str, str, str]]:
    """(node id, run id, reason) of every stale lock; reads only."""
    at_dt = now or datetime.now(timezone.utc)
    try:
        cutoff = now_iso(at_dt - timedelta(seconds=lease_seconds))
    except OverflowError:  # a lease longer than the calendar: no lease ever expires
        cutoff = ""
    host = host or this_host()
    found = []
    for row in g.conn.execute(_LOCKED, (g.id,)).fetchall():
        reason = _stale_reason(row, cutoff, host)
        if reason is not None:
            found.append((row["id"], row["lock_run_id"], reason))
    return found


def release_stale_locks(g: Graph, *, cfg: dict[str, Any] | None = None,
                        now: datetime | None = None, host: str | None = None) -> list[str]:
    """Release every stale lock as a failed attempt of its node. Returns the node ids."""
    cfg = cfg if cfg is not None else config_mod.load(g.state.config)
    lease = float(config_mod.get(cfg, "defaults.lockLeaseSeconds", 3600))
    # Look first without the write lock: the common case is that nothing is stale.
    if not stale_locks(g, lease_seconds=lease, now=now, host=host):
        return []
    released, at = [], now_iso(now)
    with transaction(g.conn):
        for node_id, run_id, reason in stale_locks(g, lease_seconds=lease, now=now, host=host):
            node = get_node(g, node_id)
            if node is None or node["lock_run_id"] != run_id:
                continue
            record_result(g, cfg, node, runner_died(run_id, reason), run_id=run_id,
                          at=at, now=now, event_note=f"stale lock released: {reason}")
            released.append(node_id)
    return released
