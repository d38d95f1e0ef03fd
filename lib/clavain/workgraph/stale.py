"""Claims whose holder is gone, and giving them back.

A claim is stale when its holder's pid is gone on this host, or when its lease ran out: the
claimer's own lease, recorded with the claim (`lock_lease_ms`) and renewed with it, against the
store's clock — so every machine judges one claim the same way, whatever its own
`lockLeaseSeconds` says (a claim from before leases were recorded is judged by the reader's).

Giving a stale claim back is a crash, not the node's failure (`claims.release`, reason stale):
no attempt is spent; the node's crash count goes up, and a node given back
`defaults.maxCrashes` times fails with the reason.

Never two runners on one node: before a claim is given back, the runner recorded with it
(`lock_runner_pid` + identity) is stopped and waited for when it runs on this host; if it
cannot be stopped the claim stays. A runner on another host cannot be reached: only the lease
decides there, and its late writes are refused by the claim's fence.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from clavain import config as config_mod
from clavain.clock import now_iso
from clavain.processes import pid_alive, stop_recorded_group
from clavain.store import queries
from clavain.store.db import transaction
from clavain.store.graph_db import store_now
from clavain.workgraph.claims import Reason, lease_of, release, this_host
from clavain.workgraph.graphs import Graph
from clavain.workgraph.nodes import get_node


def _moment(text: str | None) -> datetime | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None
    except ValueError:
        return None


def expires_at(row: Any, reader_lease_seconds: float) -> datetime | None:
    """When the claim's lease runs out: its last renewal plus the claimer's lease (the
    reader's for a claim that recorded none); None when no time was recorded."""
    renewed = _moment(row["lock_renewed_at"] or row["lock_started_at"])
    if renewed is None:
        return None
    lease_ms = row["lock_lease_ms"]
    seconds = lease_ms / 1000 if lease_ms is not None else reader_lease_seconds
    try:
        return renewed + timedelta(seconds=seconds)
    except OverflowError:  # a lease longer than the calendar: it never runs out
        return datetime.max.replace(tzinfo=renewed.tzinfo)


def stale_reason(row: Any, *, now: datetime, host: str, reader_lease_seconds: float
                 ) -> str | None:
    """Why a claim row is stale (its lease ran out, or its holder is gone on this host), or
    None while it is live."""
    expiry = expires_at(row, reader_lease_seconds)
    if expiry is None or expiry < now:
        renewed = row["lock_renewed_at"] or row["lock_started_at"]
        return f"lease expired (last renewed {renewed or 'never'})"
    if row["lock_host"] == host and row["lock_pid"] and not pid_alive(row["lock_pid"]):
        return f"lock holder pid {row['lock_pid']} is gone"
    return None


def stale_locks(g: Graph, *, lease_seconds: float, now: datetime | None = None,
                host: str | None = None) -> list[tuple[str, str, str]]:
    """(node id, run id, reason) of every stale claim; reads only. `lease_seconds` judges only
    claims that recorded no lease of their own."""
    return [(row["id"], row["lock_run_id"], reason)
            for row, reason in _stale_rows(g, lease_seconds, now, host)]


def _stale_rows(g: Graph, lease_seconds: float, now: datetime | None, host: str | None
                ) -> list[tuple[Any, str]]:
    now = now or store_now(g.conn)
    host = host or this_host(g.conn)
    found = []
    for row in queries.run(g.conn, "claims.locked", (g.id,)).fetchall():
        reason = stale_reason(row, now=now, host=host, reader_lease_seconds=lease_seconds)
        if reason is not None:
            found.append((row, reason))
    return found


def release_stale_locks(g: Graph, *, cfg: dict[str, Any] | None = None,
                        now: datetime | None = None, host: str | None = None) -> list[str]:
    """Give back every stale claim as a crash (module docstring), its runner on this host
    stopped first. Returns the node ids given back (or failed: crashed too often)."""
    cfg = cfg if cfg is not None else config_mod.load(g.state.config)
    lease = lease_of(cfg)
    host = host or this_host(g.conn)
    # Look first without the write lock: the common case is that nothing is stale.
    stale = _stale_rows(g, lease, now, host)
    if not stale:
        return []
    fences = {}
    for row, reason in stale:
        # Looked at again just before its runner is stopped: a holder that renewed meanwhile
        # keeps its runner and its claim.
        fresh = queries.run(g.conn, "claims.locked_node", (g.id, row["id"])).fetchone()
        if fresh is None or _claim_of(fresh) != _claim_of(row) or stale_reason(
                fresh, now=now or store_now(g.conn), host=host,
                reader_lease_seconds=lease) is None:
            continue
        stopped = _runner_stopped(fresh, host)
        if stopped is None:
            continue  # its runner still works on it: never two runners on one node
        fences[row["id"]] = (_claim_of(row), reason, stopped)
    if not fences:
        return []
    now = now or store_now(g.conn)
    released, at = [], now_iso(now)
    with transaction(g.conn):
        for node_id, (claim, reason, stopped) in fences.items():
            node = get_node(g, node_id)
            if node is None or _claim_of(node) != claim:
                continue  # finished or claimed again meanwhile
            if not stopped and stale_reason(node, now=now, host=host,
                                            reader_lease_seconds=lease) is None:
                continue  # renewed meanwhile, its runner untouched: still its holder's
            if release(g, node_id, claim[0], reason=Reason.STALE, fence=claim[1], cfg=cfg,
                       why=f"stale lock released: {reason}", at=at, now=now):
                released.append(node_id)
    return released


def _claim_of(row: Any) -> tuple[Any, Any]:
    return row["lock_run_id"], row["lock_generation"]


def _runner_stopped(row: Any, host: str) -> bool | None:
    """Stop the runner recorded with a stale claim when it runs on this host; None when it is
    still there. A runner on another host cannot be reached (only the lease decides)."""
    if row["lock_host"] != host or row["lock_runner_pid"] is None:
        return False
    return stop_recorded_group(row["lock_runner_pid"], row["lock_runner_identity"])

