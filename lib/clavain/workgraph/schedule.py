"""What runs next: the one scheduling step the CLI (`graph next`), the verifier and the supervisor
all call, and the reason when nothing can run.

`next_node` gives back stale claims (a crash of their holder: no attempt spent), picks — and
with `claim` locks — the next runnable node, breaks a deadlock by the configured auto-reset
when nothing is runnable, and refreshes the snapshot when anything changed. It returns one envelope:
`{"node": {...}, "run_id": ..., ...}` or `{"node": None, "reason": code, "message": ..., ...}`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from clavain import config as config_mod
from clavain.clock import now_iso
from clavain.store import queries
from clavain.store.graph_db import store_now
from clavain.workgraph import claim_pick, claims, deadlock, stale
from clavain.workgraph.export import after_commit
from clavain.workgraph.graphs import Graph
from clavain.workgraph.nodes import get_node
from clavain.workgraph.runner_env import current_run_id
from clavain.workgraph.statuses import NodeStatus

# Why nothing is runnable, most actionable first (`idle_reason`).
REASONS = ("empty", "running", "ready", "backoff", "needs_human", "deadlock", "all_done")
SHOWN = 5


def next_node(g: Graph, *, claim: bool = False, run_id: str | None = None,
              pid: int | None = None, cfg: dict[str, Any] | None = None,
              now: datetime | None = None) -> dict[str, Any]:
    """One scheduling step (module docstring). `run_id` follows the one rule: explicit, else
    $CLAVAIN_RUN_ID, else a new id; it is only used (and returned) when claiming."""
    cfg = cfg if cfg is not None else config_mod.load(g.state.config)
    now = now or store_now(g.conn)  # the server's clock on a shared store
    released = stale.release_stale_locks(g, cfg=cfg, now=now)
    run_id = current_run_id(run_id) if claim else None

    def pick() -> dict[str, Any] | None:
        if claim:
            taken = claims.claim_next(g, run_id=run_id, pid=pid, now=now,
                                      lease_seconds=claims.lease_of(cfg))
            return taken.node if taken is not None else None
        found = claim_pick.select_next(g, now=now)
        return get_node(g, found) if found else None

    node = pick()
    reset: list[str] = []
    if node is None and deadlock.detect(g, cfg):
        reset = deadlock.auto_reset(g, cfg)
        node = pick() if reset else None
    if released or (node is not None and claim):
        after_commit(g, cfg)
    envelope: dict[str, Any] = {"node": node, "graph_id": g.id,
                                "run_id": run_id if node is not None else None,
                                "claimed": node is not None and claim, "released": released,
                                "reset": reset}
    if node is None:
        envelope.update(idle_reason(g, cfg=cfg, now=now))
    return envelope


def idle_reason(g: Graph, *, cfg: dict[str, Any] | None = None,
                now: datetime | None = None) -> dict[str, Any]:
    """Why no node is runnable now: {"reason": one of REASONS, "message": one line, ...}."""
    at = now_iso(now or store_now(g.conn))
    conn = g.conn
    counts = dict(queries.run(conn, "schedule.status_counts", (g.id,)).fetchall())
    if not counts:
        return {"reason": "empty", "message": f"the workgraph {g.id!r} has no nodes yet"}
    running = queries.run(conn, "schedule.running", (g.id,)).fetchall()
    if running:
        shown = ", ".join(f"{r['id']} (run {r['lock_run_id']})" for r in running[:SHOWN])
        message = f"{len(running)} node(s) in progress: {shown}"
        envelope: dict[str, Any] = {"reason": "running", "running": [r["id"] for r in running]}
        waits = claim_pick.ownership_waits(g, now=now)
        if waits:
            envelope["waiting_on_ownership"] = [wait[0] for wait in waits]
            message += "; " + describe_ownership_wait(waits)
        return {**envelope, "message": message}
    waiting = queries.run(conn, "schedule.backoff", (g.id, at)).fetchall()
    if waiting:
        first = waiting[0]
        return {"reason": "backoff", "until": first["blocked_until"],
                "waiting": [r["id"] for r in waiting],
                "message": f"{first['id']} waits for its retry backoff until "
                           f"{first['blocked_until']}"
                           + (f" ({len(waiting) - 1} more waiting)" if len(waiting) > 1 else "")}
    ready = queries.run(conn, "schedule.first_ready", (g.id, at)).fetchone()
    if ready is not None:
        # Given back by another runner (another machine) since the claim that found nothing:
        # never "all done" while a node can run.
        return {"reason": "ready", "node_id": ready["id"],
                "message": f"{ready['id']} became ready a moment ago; look again"}
    report = deadlock.detect(g, cfg)
    humans = queries.run(conn, "schedule.questions", (g.id,)).fetchall()
    failed = [b for b in (report or {}).get("blockers", [])
              if b["status"] == NodeStatus.FAILED]
    if humans and not failed:
        first = humans[0]
        return {"reason": "needs_human", "nodes": [r["id"] for r in humans],
                "questions": [{"id": r["id"], "question": r["q"]} for r in humans],
                "deadlock": report,
                "message": f"{first['id']} waits for a person's answer: {first['q'] or '?'} "
                           f"(clavain graph answer {first['id']} --answer TEXT)"}
    if report is not None:
        return {"reason": "deadlock", "deadlock": report, "message": deadlock.describe(report)}
    unfinished = queries.run(conn, "schedule.first_unfinished", (g.id,)).fetchone()
    if unfinished is not None:  # claimed or given back elsewhere while this looked: not done
        return {"reason": "ready", "node_id": unfinished["id"],
                "message": f"{unfinished['id']} changed a moment ago; look again"}
    return {"reason": "all_done", "message": f"all {sum(counts.values())} node(s) are finished"}


def describe_ownership_wait(waits: list[tuple[str, str, str, str]]) -> str:
    """The first wait as one clause ("task-b waits for task-a (both own src/**)"), then how
    many more: what a person needs to see why ready work is not starting."""
    node_id, holder, mine, theirs = waits[0]
    owns = f"both own {mine}" if mine == theirs else f"{mine} overlaps {theirs}"
    more = f" ({len(waits) - 1} more waiting on ownership)" if len(waits) > 1 else ""
    return f"{node_id} waits for {holder} ({owns}){more}"
