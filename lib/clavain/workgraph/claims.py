"""Claims on nodes, in one place: take one, renew its lease, give it back — one claim, or every
claim of a run. A claim is a value (`Claim`); its statements are the `claims` named queries;
which node a claim takes is `claim_pick`; when a claim is stale is `stale`.

A claim is one conditional UPDATE in a claim-only transaction (`exclusive=False`: on a server
claimers run side by side, each locking its own row; SQLite's BEGIN IMMEDIATE serialises them
anyway), so two runners never hold one node. It records the claimer's lease
(`defaults.lockLeaseSeconds` where it was taken) and a new generation (the fence); renewing
keeps the lease, so every machine judges the claim by it (`stale`).

How a claim ends (`statuses.ClaimReleaseReason`), decided here once:

- finished: its result was recorded (`transitions.record_result` clears the claim with the node's
  new status; not a give-back).
- given_back: handed back unspent — no attempt, no crash, no backoff; refused (a no-op) unless
  the run still holds it, and, when a fence is given, under that generation.
- crashed / stale: its holder died, or its lease ran out — no attempt spent, one more crash; at
  `defaults.maxCrashes` the node fails with the reason instead (a node that kills its holder
  every time must not run forever). No backoff either way.

Transactions: a give-back of one claim (`give_back`) or of a run's claims (`give_back_run`) is
one exclusive transaction, run again when a server connection dropped under it; `release` is
the SQL step inside a caller's transaction (`results.apply_result`, `stale`). The callers and
what each passes, as it was in eight places before:

- a worker's runner stopped, rate-limited or unusable (`worker_claims.release`): given_back
  under the claim's fence, waiting out a store that does not answer (the worker's bounded
  wait); a failing worker (`worker_claims.give_back`): the same, one try, never raising.
- the supervisor unclaiming before its worker started (`supervise._unclaim`): given_back under
  the fence, one try, errors ignored (the run's reconciliation tries again).
- the shell verifier stopped (`verifier`): given_back under the fence it was handed, one try.
- the supervisor reconciling its claims with its workers, and the run's end
  (`give_back_run`, `settle_at_end`): given_back, no fence (the run's own claims).
- recovery after a supervisor died (`run_record.recover` → `give_back_run(crashed=True)`):
  crashed; stale claims (`stale.release_stale_locks`): stale, once their runner is stopped.
- a result whose dependency was reopened (`results.apply_result`): given_back in the result's
  transaction, no fence (the holder is checked first).
- a loop iteration that ended without a result (`loop.decide.release_leftovers`):
  `give_back_run`, given_back.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from clavain import config as config_mod
from clavain.clock import now_iso
from clavain.errors import ClavainError
from clavain.paths import StatePaths
from clavain.processes import boot_id
from clavain.store import queries
from clavain.store.db import transaction
from clavain.store.graph_db import is_shared, reconnecting, store_now
from clavain.workgraph import claim_pick
from clavain.workgraph.export import after_commit
from clavain.workgraph.graphs import Graph
from clavain.workgraph.nodes import FenceError, get_node, record_event
from clavain.workgraph.statuses import ClaimReleaseReason, NodeStatus
from clavain.workgraph.transitions import record_result, runner_died

Reason = ClaimReleaseReason
_CRASH = (Reason.CRASHED, Reason.STALE)
# The claimed event's statuses as plain text: bound on every claim, where an enum member costs
# the driver an adaptation lookup each time.
_OPEN, _IN_PROGRESS = NodeStatus.OPEN.value, NodeStatus.IN_PROGRESS.value


@dataclass(frozen=True)
class Claim:
    """One run's claim on one node: the node as it was taken, under generation `fence`. Reads
    as that node (`claim["id"]`), so code that needs only the node keeps reading it."""

    graph_id: str
    node_id: str
    run_id: str
    fence: int | None
    lease_ms: int | None
    node: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, node: dict[str, Any], run_id: str | None = None,
           graph_id: str | None = None) -> Claim:
        """The claim a node (as taken) carries; `run_id` and `graph_id` where the node dict
        may not say."""
        # Made on every claim: one update of the instance's fields instead of the frozen
        # __init__'s six guarded writes (a microsecond or two of a ~60 µs claim).
        claim = object.__new__(cls)
        claim.__dict__.update(graph_id=graph_id or node["graph_id"], node_id=node["id"],
                              run_id=run_id or node["lock_run_id"],
                              fence=node.get("lock_generation"),
                              lease_ms=node.get("lock_lease_ms"), node=node)
        return claim

    def __getitem__(self, key: str) -> Any:
        return self.node[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.node.get(key, default)


def lease_of(cfg: dict[str, Any]) -> float:
    """The lease a claim taken under `cfg` carries."""
    return float(config_mod.get(cfg, "defaults.lockLeaseSeconds", 3600))


def lease_ms(seconds: float) -> int:
    """A lease as stored with the claim: whole milliseconds, at most about 146,000 years."""
    return int(min(max(seconds, 0.001), 2 ** 62 / 1000) * 1000)


def this_host(conn: Any = None) -> str:
    """Who holds a lock, for telling a dead local holder by its pid: the host name, and on a
    shared store also the boot id, so two machines with one host name (cloned VMs) never take
    each other's live pids for dead ones."""
    name = socket.gethostname()
    if conn is None or not is_shared(conn):
        return name
    return f"{name}/{boot_id()[:8]}" if boot_id() else name


# ---------------------------------------------------------------- taking

def claim_next(g: Graph, *, run_id: str, pid: int | None = None, host: str | None = None,
               now: datetime | None = None, lease_seconds: float | None = None
               ) -> Claim | None:
    """Atomically lock the next runnable node for `run_id`; None when nothing is runnable.
    `lease_seconds`: the claim's lease (default: this project's `defaults.lockLeaseSeconds`)."""
    return _claim(g, None, run_id=run_id, pid=pid, host=host, now=now,
                  lease_seconds=lease_seconds)


def claim_node(g: Graph, node_id: str, *, run_id: str, pid: int | None = None,
               host: str | None = None, now: datetime | None = None,
               lease_seconds: float | None = None) -> Claim | None:
    """Lock one given node; None when it is not runnable (claimed, blocked, waiting on deps, or
    its ownership overlaps a node in progress)."""
    return _claim(g, node_id, run_id=run_id, pid=pid, host=host, now=now,
                  lease_seconds=lease_seconds)


def _claim(g: Graph, node_id: str | None, *, run_id: str, pid: int | None, host: str | None,
           now: datetime | None, lease_seconds: float | None) -> Claim | None:
    if not run_id:
        raise ClavainError("a claim needs a run id")
    if lease_seconds is None:
        lease_seconds = lease_of(config_mod.load(g.state.config))
    at = now_iso(now or store_now(g.conn))
    params = {"graph": g.id, "run_id": run_id, "now": at, "pid": pid,
              "host": host or this_host(g.conn), "lease_ms": lease_ms(lease_seconds)}
    node = _take(g, node_id, params)
    return Claim.of(node) if node is not None else None  # made after COMMIT: the lock is free


def _take(g: Graph, node_id: str | None, params: dict[str, Any]) -> dict[str, Any] | None:
    """The claim's one transaction: lock the node, record its event; the node as taken."""
    with transaction(g.conn, exclusive=False):
        if node_id is not None:
            taken = claim_pick.lock_one(g, {**params, "id": node_id})
        elif is_shared(g.conn):  # a round trip costs: claim, event and node in one
            row = queries.run(g.conn, "claims.next_unowned_taken", params).fetchone()
            if row is not None:
                return json.loads(row[0])
            taken = claim_pick.lock_next_owned(g, params)  # the next ready node owns something
        else:
            taken = claim_pick.lock_next(g, params)
        if taken is None:
            return None
        record_event(g, taken, _OPEN, _IN_PROGRESS, at=params["now"], run_id=params["run_id"],
                     note="claimed")
        return get_node(g, taken)


def claim_named(g: Graph, node_id: str, *, run_id: str, pid: int | None = None,
                now: datetime | None = None) -> Claim:
    """Claim one node by name for `run_id` (a loop's agent picking its item), or say why not:
    held by another run, not ready (dependencies, backoff, finished), or its files are owned by
    a running node. Claiming a node the run already holds returns it."""
    node = get_node(g, node_id)
    if node is None:
        raise ClavainError(f"unknown node {node_id!r} in graph {g.id!r}")
    if node["lock_run_id"] == run_id:
        return Claim.of(node)
    claimed = claim_node(g, node_id, run_id=run_id, pid=pid, now=now)
    if claimed is not None:
        after_commit(g)
        return claimed
    node = get_node(g, node_id) or node
    if node["lock_run_id"]:
        why = f"run {node['lock_run_id']!r} holds it"
    elif node["status"] != NodeStatus.OPEN:
        why = f"it is {node['status']}"
    elif node["unmet_deps"]:
        why = f"{node['unmet_deps']} of its dependencies are not done"
    elif node["blocked_until"]:
        why = f"it waits for its retry backoff until {node['blocked_until']}"
    else:
        why = "a running node owns some of its files"
    raise ClavainError(f"node {node_id!r} cannot be claimed now: {why}")


# ---------------------------------------------------------------- holding

def renew(g: Graph, node_id: str, *, run_id: str, snapshot: bool = False,
          now: datetime | None = None, fence: int | None = None) -> dict[str, Any]:
    """Renew the lease of a node `run_id` holds (under claim generation `fence`, when given);
    an error names who holds it otherwise. With `snapshot`, the snapshot follows."""
    at = now_iso(now or store_now(g.conn))
    with transaction(g.conn, exclusive=False):
        if fence is None:
            renewed = queries.run(g.conn, "claims.renew", (at, g.id, node_id, run_id))
        else:
            renewed = queries.run(g.conn, "claims.renew_fenced",
                                  (at, g.id, node_id, run_id, int(fence)))
        if not renewed.fetchall():
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


def note_runner(g: Graph, node_id: str, run_id: str, *, fence: int | None, pid: int,
                identity: str | None) -> bool:
    """Record the runner process group working `run_id`'s claim on `node_id` (under claim
    generation `fence`): a claimer on the same host stops it before the node is claimed again.
    SQL only; False when the claim is not the node's any more."""
    if fence is None:
        noted = queries.run(g.conn, "claims.note_runner", (pid, identity, g.id, node_id, run_id))
    else:
        noted = queries.run(g.conn, "claims.note_runner_fenced",
                            (pid, identity, g.id, node_id, run_id, int(fence)))
    return bool(noted.fetchall())


# ---------------------------------------------------------------- giving back

def release(g: Graph, node_id: str, run_id: str, *, reason: Reason, why: str, at: str,
            fence: int | None = None, cfg: dict[str, Any] | None = None,
            now: datetime | None = None) -> bool:
    """End `run_id`'s claim on `node_id` by `reason`'s rule (module docstring): given_back
    spends nothing; crashed and stale count a crash, and fail the node at the crash limit
    (`cfg`: the limit's config, loaded when not given). SQL only: the caller holds the
    transaction. False when the run held nothing (or, with `fence`, not under that
    generation)."""
    if reason not in (Reason.GIVEN_BACK, *_CRASH):
        raise ValueError(f"a claim is not released as {reason!r} (a result finishes it)")
    crashed = reason in _CRASH
    if crashed:
        node = get_node(g, node_id)
        if node is None or node["lock_run_id"] != run_id or (
                fence is not None and node["lock_generation"] != fence):
            return False
        cfg = cfg if cfg is not None else config_mod.load(g.state.config)
        if node["crashes"] + 1 >= int(config_mod.get(cfg, "defaults.maxCrashes", 5)):
            _fail_crashed(g, cfg, node, why=why, at=at, now=now or store_now(g.conn))
            return True
    params = {"graph": g.id, "id": node_id, "run_id": run_id, "crash": 1 if crashed else 0,
              "at": at}
    if fence is None:
        released = queries.run(g.conn, "claims.release", params).fetchall()
    else:
        released = queries.run(g.conn, "claims.release_fenced",
                               {**params, "fence": int(fence)}).fetchall()
    if released:
        spent = "a crash counted" if crashed else "no attempt spent"
        record_event(g, node_id, NodeStatus.IN_PROGRESS, NodeStatus.OPEN, at=at, run_id=run_id,
                     note=f"{why}; claim released, {spent}")
    return bool(released)


def _fail_crashed(g: Graph, cfg: dict[str, Any], node: dict[str, Any], *, why: str, at: str,
                  now: datetime) -> None:
    """The crash that reaches the limit: the node fails with the reason (and is handed to an
    escalation like any failure)."""

    run_id = node["lock_run_id"]
    queries.run(g.conn, "claims.count_crash", (g.id, node["id"]))
    reason = f"{why}; its holder crashed {node['crashes'] + 1} times (defaults.maxCrashes)"
    record_result(g, cfg, {**node, "crashes": node["crashes"] + 1},
                  runner_died(run_id, reason), run_id=run_id, at=at, now=now,
                  event_note=f"failed: {reason}", give_up=True)


def give_back(g: Graph, claim: Claim, *, why: str,
              wait: Callable[[Callable[[], bool]], bool] | None = None) -> bool:
    """Give one claim back unspent in a transaction of its own, under its fence (a no-op once
    it is not the node's claim any more). `wait`: how to wait out a store that does not answer
    (a worker's bounded wait); by default one try, run again only when a server connection
    dropped under it. Whether it was given back."""
    def give() -> bool:
        with transaction(g.conn):
            return release(g, claim.node_id, claim.run_id, reason=Reason.GIVEN_BACK, why=why,
                           at=now_iso(), fence=claim.fence)

    return wait(give) if wait is not None else reconnecting(g.conn, give)


def held(g: Graph, run_id: str, node_id: str | None = None) -> list[str]:
    """What `run_id` holds in the graph (or whether it holds `node_id`)."""
    if node_id is None:
        return [row[0] for row in queries.run(g.conn, "claims.held", (g.id, run_id))]
    return [row[0] for row in queries.run(g.conn, "claims.held_node", (g.id, run_id, node_id))]


def give_back_run(state: StatePaths, conn: Any, run_id: str, graph_id: str, *, why: str,
                  keep: set[str] | None = None, only: str | None = None,
                  crashed: bool = False) -> list[str]:
    """Give back every node `run_id` holds in `graph_id` (only `only`, when given; never those
    in `keep`, which a worker or a runner still holds), no attempt spent; `crashed`: its
    supervisor died, which counts against each node's crash limit. One transaction, run again
    if a server connection drops under it. Returns the node ids given back."""
    g = Graph(conn, graph_id, state)
    cfg = config_mod.load(state.config) if crashed else None
    reason = Reason.CRASHED if crashed else Reason.GIVEN_BACK

    def give() -> list[str]:
        nodes = [node for node in held(g, run_id, only) if node not in (keep or ())]
        if not nodes:
            return []
        now = store_now(conn)
        at = now_iso(now)
        with transaction(conn):
            return [node_id for node_id in nodes
                    if release(g, node_id, run_id, reason=reason, why=why, at=at, cfg=cfg,
                               now=now)]

    return reconnecting(conn, give)


def settle_at_end(state: StatePaths, g: Graph, run_id: str, *, why: str, working: set[str]
                  ) -> dict[str, Any]:
    """Give back what a supervised run still holds as it ends, but the nodes a worker still
    holds (`working`: it outlived the stop's grace; the next run's recovery sees to it): the
    node ids given back, those still held because the store did not answer, and the problem."""
    try:
        given_back = give_back_run(state, g.conn, run_id, g.id, why=why, keep=working)
    except Exception as exc:
        try:
            still = [node for node in held(g, run_id) if node not in working]
        except Exception:
            still = ["(unknown: the store did not answer)"]
        problem = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
        return {"given_back": [], "still_held": still, "problem": problem}
    return {"given_back": given_back, "still_held": [], "problem": None}


def describe_end(given_back: list[str], still_held: list[str], problem: str | None) -> str:
    """The last words about a run's claims: only what happened."""
    parts = []
    if given_back:
        parts.append(f"gave back {', '.join(given_back)} (no attempt spent)")
    if still_held:
        parts.append(f"could not give back {', '.join(still_held)} ({problem}); a later run "
                     "gives them back once it finds this one gone (a crash: no attempt spent)")
    return "; ".join(parts)
