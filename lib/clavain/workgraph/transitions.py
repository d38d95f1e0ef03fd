"""A result's transition, as one node's columns, events, KV and follow-ups change: the next
state (retry with a doubling backoff, or failure at the attempt limit), the record of it, and
the result a runner that died without reporting leaves. Shared by the two ways a node ends
with a result: `results.apply_result` (a runner reported) and `claims.release` at the crash
limit (its holder died too often); below both, so neither imports the other.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from clavain import config as config_mod
from clavain.clock import later_iso, now_iso
from clavain.store import queries
from clavain.workgraph import escalation, kv
from clavain.workgraph.graphs import Graph
from clavain.workgraph.nodes import get_node, insert_nodes, record_event
from clavain.workgraph.scaffold import scaffold_in_transaction


def backoff_seconds(cfg: dict[str, Any], attempts: int) -> float:
    """Doubling per failed attempt from defaults.retryBackoffSeconds, capped."""
    base = float(config_mod.get(cfg, "defaults.retryBackoffSeconds", 30))
    cap = float(config_mod.get(cfg, "defaults.retryBackoffMaxSeconds", 900))
    return min(cap, base * 2 ** max(0, attempts - 1))


def next_state(node: dict[str, Any], status: str, cfg: dict[str, Any],
               now: datetime | None, *, give_up: bool = False) -> dict[str, Any]:
    """Column values after a result with `status`; pure, so retry policy is easy to test.
    `give_up`: a failure that ends the node now, whatever attempts are left (it crashed its
    holder too often)."""
    at = now_iso(now)
    if status == "success":
        return {"status": "done", "attempts": node["attempts"], "blocked_until": None,
                "completed_at": at}
    if status == "checkpoint":
        return {"status": "needs_human", "attempts": node["attempts"], "blocked_until": None,
                "completed_at": None}
    if give_up:
        return {"status": "failed", "attempts": node["attempts"], "blocked_until": None,
                "completed_at": at}
    attempts = node["attempts"] + 1
    limit = int((node.get("retry_policy") or {}).get("max_attempts")
                or config_mod.get(cfg, "defaults.maxAttempts", 3))
    if attempts >= limit:
        return {"status": "failed", "attempts": attempts, "blocked_until": None,
                "completed_at": at}
    return {"status": "open", "attempts": attempts,
            "blocked_until": later_iso(backoff_seconds(cfg, attempts), now), "completed_at": None}


def _human_question(node: dict[str, Any], result: Any, run_id: str | None,
                    at: str) -> str | None:
    if result.status != "checkpoint":
        kept = node["human_question"]
        return json.dumps(kept) if kept is not None else None
    return json.dumps({"question": result.question or result.summary, "summary": result.summary,
                       "run_id": run_id, "asked_at": at})


def _auto_kv(result: Any, stdout_path: str | None, result_path: str | None) -> dict[str, str]:
    """The keys escalation and downstream packets rely on, so agents need not write them."""
    values = {"out.summary": result.summary}
    if stdout_path:
        values["out.last_stdout_path"] = str(stdout_path)
    if result_path:
        values["out.last_result_path"] = str(result_path)
    if result.status in ("fail", "checkpoint"):
        error = result.summary or (result.errors[0] if result.errors else "")
        if error:
            values["err.summary"] = error
        if result.errors:  # every problem the runner named, for the escalation to read
            values["err.errors"] = "\n".join(result.errors)
    return values


def runner_died(run_id: str, reason: str) -> Any:
    """The result recorded for a runner that stopped holding a lock without reporting."""
    from clavain.models.node import RunnerResult

    summary = f"runner {run_id} stopped without a result: {reason}"
    return RunnerResult.model_construct(version=None, status="fail", summary=summary,
                                        errors=[summary], question=None, next=None)


def record_result(g: Graph, cfg: dict[str, Any], node: dict[str, Any], result: Any, *,
                  run_id: str | None, at: str, now: datetime | None,
                  stdout_path: str | None = None, result_path: str | None = None,
                  event_note: str | None = None, extra_kv: dict[str, str] | None = None,
                  give_up: bool = False) -> dict[str, Any]:
    """The transition for a parsed result. SQL only: the caller holds the transaction and has
    decided the result may be applied. `extra_kv` are keys the runner recorded besides the
    automatic ones (the shell verifier's tree), written with them. `give_up`: see
    `next_state`."""
    node_id = node["id"]
    added: list[str] = []
    if result.next and result.next.addNodes:
        fresh = _not_yet_added(g, node_id, result.next.addNodes)
        if fresh:
            added = insert_nodes(g, cfg, fresh, parent_id=node_id, at=at, run_id=run_id)
    after = next_state(node, result.status, cfg, now, give_up=give_up)
    queries.run(g.conn, "results.record", {
        **after, "question": _human_question(node, result, run_id, at), "at": at,
        "graph": g.id, "id": node_id})
    record_event(g, node_id, node["status"], after["status"], at=at,
                 run_id=run_id or node["lock_run_id"],
                 note=event_note or f"{result.status}: {result.summary[:200]}")
    attempt = node["attempts"] + 1
    values = {**_auto_kv(result, stdout_path, result_path), **(extra_kv or {})}
    for key, value in values.items():
        kv.write(g, node_id, key, value, run_id=run_id, attempt=attempt, cfg=cfg)
    handed = {"escalation": None, "action": "none"}
    if after["status"] == "failed":
        handed = escalation.hand_over(g, cfg, {**node, "attempts": after["attempts"]},
                                      at=at, run_id=run_id)
    replaced = None
    if after["status"] == "done":
        replaced = escalation.after_success(g, node, at=at, run_id=run_id)
    scaffolded = None
    if added and queries.run(g.conn, "results.any_task",
                             (g.id, json.dumps(added))).fetchone():
        # Added work is always verified: every task gets its verify node before integration.
        scaffolded = scaffold_in_transaction(g, cfg, at)
    stored = get_node(g, node_id)
    question = (stored["human_question"] or {}).get("question") \
        if after["status"] == "needs_human" else None
    return {"node": node_id, "from": node["status"], "to": after["status"],
            "result": result.status, "run_id": run_id, "attempts": stored["attempts"],
            "blocked_until": stored["blocked_until"], "added": added,
            "escalation": handed["escalation"], "escalation_action": handed["action"],
            "replaced": replaced, "scaffold": scaffolded, "question": question}


def _not_yet_added(g: Graph, node_id: str, specs: list[Any]) -> list[Any]:
    """A retried node often proposes the same follow-up nodes again: those it already added
    (same id, same parent) are kept as they are, so the retry's result can still be recorded.
    The same id under another parent is still a duplicate and rejected."""
    children = {row[0] for row in queries.run(g.conn, "results.children", (g.id, node_id))}
    return [spec for spec in specs if spec.id not in children]
