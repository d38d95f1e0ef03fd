"""How a worker's claim ends: its result recorded under the claim's fence, or the node given
back unspent — and the store calls that wait out a store restarting (bounded by
`store.outageWaitSeconds`). A result the library refuses is a failed attempt with the refusal as
its reason; a result whose claim ran out and was taken again is not recorded at all; a store
fault goes up to `worker.run_node`, which gives the claim back."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from clavain.errors import ClavainError
from clavain.store import faults as store_faults
from clavain.store.graph_db import reconnecting
from clavain.supervisor.outcome import failure
from clavain.supervisor.process import ProcessOutcome
from clavain.workgraph import claims
from clavain.workgraph.graphs import Graph
from clavain.workgraph.nodes import FenceError
from clavain.workgraph.results import apply_result
from clavain.workgraph.statuses import NodeStatus

if TYPE_CHECKING:
    from clavain.supervisor.worker import RunContext

T = TypeVar("T")
OUTCOME_BY_STATUS = {"done": "done", "open": "retry", "failed": "failed",
                     "needs_human": "needs_human"}


def store(ctx: RunContext, g: Graph, action: Callable[[], T]) -> T:
    """Run whole transactions on the worker's connection, waiting out a store that is
    restarting or busy (bounded: `store.outageWaitSeconds`; not once the run is stopping)."""
    return store_faults.wait_out(lambda: reconnecting(g.conn, action),
                                 seconds=ctx.store_wait_seconds(), stopped=ctx.stop.is_set)


def record(ctx: RunContext, g: Graph, node: dict[str, Any], result: dict[str, Any],
            stdout_path: str | None, result_path: str | None) -> dict[str, Any]:
    """Apply the result under the claim's fence; one the library refuses (too many planned
    tasks, a bad addNodes) is a failed attempt with the refusal as its reason. A result whose
    claim ran out and was taken again is not recorded at all. A store fault is not a refusal:
    it goes up to `run_node`, which gives the claim back unspent."""
    node_id, fence, run_id = node["id"], node.get("lock_generation"), ctx.run_id

    def apply(outcome: dict[str, Any]) -> dict[str, Any]:
        return store(ctx, g, lambda: apply_result(
            g, node_id, outcome, run_id=run_id, stdout_path=stdout_path,
            result_path=result_path, fence=fence))

    try:
        applied = apply(result)
    except FenceError as exc:
        return {"outcome": "not_recorded", "summary": str(exc)}
    except ClavainError as exc:
        if store_faults.kind(exc) is not None:
            raise
        if result["status"] == "fail":
            return {"outcome": "not_recorded", "summary": str(exc)}
        try:
            applied = apply(failure(f"result refused: {exc}", str(exc)))
        except ClavainError as again:
            if store_faults.kind(again) is not None:
                raise
            return {"outcome": "not_recorded", "summary": str(again)}
        result = failure(f"result refused: {exc}")
    return {"outcome": OUTCOME_BY_STATUS.get(applied["to"], applied["to"]),
            "summary": result.get("summary", ""), "added": applied.get("added") or [],
            "escalation": applied.get("escalation"), **retry_fields(applied)}


def retry_fields(applied: dict[str, Any]) -> dict[str, Any]:
    """When a node sent back to open runs again (its back-off's end) and its attempt count:
    the run's line says when it retries, not how long the failed attempt took."""
    if applied.get("to") != NodeStatus.OPEN or not applied.get("blocked_until"):
        return {}
    return {"retry_at": applied["blocked_until"], "attempts": applied.get("attempts")}


def settle_verify(ctx: RunContext, g: Graph, node: dict[str, Any],
                   process: ProcessOutcome) -> dict[str, Any]:
    """`clavain verify` recorded (or, stopped, released) the node itself; read what it did. A
    verify that could not reach the store is given back unspent: the check did not fail."""
    free = {"tokens": 0, "cost_usd": 0.0}
    if process.stopped:
        release(ctx, g, node, "stopped by the supervisor")
        return {**free, "outcome": "released", "summary": "stopped by the supervisor"}
    try:
        report = json.loads(process.stdout)
    except ValueError:
        report = None
    if isinstance(report, dict) and report.get("applied"):
        to = report["apply"]["to"]
        return {**free, "outcome": OUTCOME_BY_STATUS.get(to, to),
                "summary": report["result"]["summary"], **retry_fields(report["apply"])}
    why = (report.get("error") if isinstance(report, dict) else None) or (
        f"the shell verifier exited {process.exit_code} without a report"
        + (" (timed out)" if process.timed_out else "") + f"; see {process.stderr_path}")
    fault = report.get("store") if isinstance(report, dict) else None
    if fault == store_faults.DAMAGED:
        raise store_faults.StoreDamaged(f"shell verifier: {why}")
    if fault == store_faults.UNAVAILABLE:
        release(ctx, g, node, f"shell verifier: {why}")
        return {**free, "outcome": "store_unavailable", "summary": f"shell verifier: {why}"}
    crashed = failure(f"shell verifier: {why}", str(why))
    try:
        applied = store(ctx, g, lambda: apply_result(
            g, node["id"], crashed, run_id=ctx.run_id, by_verifier=True,
            fence=node.get("lock_generation")))
    except ClavainError as exc:
        if store_faults.kind(exc) is not None:
            raise
        return {**free, "outcome": "not_recorded", "summary": f"{why}; {exc}"}
    return {**free, "outcome": OUTCOME_BY_STATUS.get(applied["to"], applied["to"]),
            "summary": crashed["summary"], **retry_fields(applied)}


def claim_lost(ctx: RunContext, g: Graph, node: dict[str, Any]) -> str | None:
    """Why this worker's claim is not the node's any more (nothing of its work may be merged
    or recorded), or None while it still holds it."""
    try:
        store(ctx, g, lambda: claims.renew(g, node["id"], run_id=ctx.run_id,
                                           fence=node.get("lock_generation")))
    except ClavainError as exc:
        if store_faults.kind(exc) is not None:
            raise
        return f"{exc}; its work was not merged"
    return None


def release(ctx: RunContext, g: Graph, node: dict[str, Any], why: str, *,
             wait: bool = True) -> None:
    """Give the claim back unspent, under its fence (a no-op once it is not this claim);
    `wait`: wait out a store that does not answer (else one try)."""
    claims.give_back(g, claims.Claim.of(node, ctx.run_id, g.id), why=why,
                     wait=(lambda give: store(ctx, g, give)) if wait else None)


def give_back(ctx: RunContext, conn: Any, node: dict[str, Any], why: str) -> str:
    """`release` for a worker that is failing, tried once (it may have waited for the store
    already): never raises. Returns `why`, plus the reason the claim is still held when even
    that failed (the supervisor gives it back later)."""
    if conn is None:
        return f"{why}; its claim is kept until the store answers (the run gives it back)"
    try:
        release(ctx, Graph(conn, ctx.graph_id, ctx.state), node, why, wait=False)
    except Exception as exc:
        return (f"{why}; its claim is kept until the store answers (the run gives it back): "
                f"{type(exc).__name__}: {exc}")
    return why
