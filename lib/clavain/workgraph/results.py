"""Apply a runner's result to its node: status change, retry with backoff, new nodes, auto KV keys
and, on permanent failure, one escalation node — all in one transaction, or nothing.
"""

from __future__ import annotations

import json
import re
import sqlite3
from datetime import datetime
from typing import Any

from clavain import config as config_mod
from clavain.clock import later_iso, now_iso
from clavain.errors import ClavainError
from clavain.paths import StatePaths
from clavain.store.db import transaction
from clavain.workgraph.graph import get_node, insert_nodes, record_event, require_node

ESCALATION_PREFIX = "plan-escalate-"
APPLICABLE = ("open", "in_progress")

_RESULT_BLOCK = re.compile(r"<result>(.*?)</result>", re.DOTALL)
_FENCE = re.compile(r"^```[A-Za-z]*\s*\n(.*)\n```\s*$", re.DOTALL)


# ---------------------------------------------------------------- parsing

def extract_result_json(text: str) -> Any:
    """The JSON inside the last `<result>…</result>` (agents often echo the template's example
    first), else the whole text; a ```json fence around it is tolerated."""
    blocks = _RESULT_BLOCK.findall(text)
    body = (blocks[-1] if blocks else text).strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    if not body:
        raise ClavainError("the result is empty; expected <result>{...}</result> or a JSON object")
    try:
        return json.loads(body)
    except ValueError as exc:
        where = "inside <result>…</result>" if blocks else "(no <result>…</result> block found)"
        raise ClavainError(f"the result is not valid JSON {where}: {exc}") from None


def parse_result(result: dict[str, Any] | str) -> Any:
    """A validated `RunnerResult` from a dict or from runner output text."""
    from pydantic import ValidationError

    from clavain.models.node import RunnerResult

    raw = extract_result_json(result) if isinstance(result, str) else result
    if not isinstance(raw, dict):
        raise ClavainError("the result must be a JSON object with status and summary")
    try:
        return RunnerResult.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "result"
        raise ClavainError(f"result field {where}: {err['msg']}") from None


# ---------------------------------------------------------------- transitions

def backoff_seconds(cfg: dict[str, Any], attempts: int) -> float:
    """Doubling per failed attempt from defaults.retryBackoffSeconds, capped."""
    base = float(config_mod.get(cfg, "defaults.retryBackoffSeconds", 30))
    cap = float(config_mod.get(cfg, "defaults.retryBackoffMaxSeconds", 900))
    return min(cap, base * 2 ** max(0, attempts - 1))


def next_state(node: dict[str, Any], status: str, cfg: dict[str, Any],
               now: datetime | None) -> dict[str, Any]:
    """Column values after a result with `status`; pure, so retry policy is easy to test."""
    at = now_iso(now)
    if status == "success":
        return {"status": "done", "attempts": node["attempts"], "blocked_until": None,
                "completed_at": at}
    if status == "checkpoint":
        return {"status": "needs_human", "attempts": node["attempts"], "blocked_until": None,
                "completed_at": None}
    attempts = node["attempts"] + 1
    limit = int((node.get("retryPolicy") or {}).get("maxAttempts")
                or config_mod.get(cfg, "defaults.maxAttempts", 3))
    if attempts >= limit:
        return {"status": "failed", "attempts": attempts, "blocked_until": None,
                "completed_at": at}
    return {"status": "open", "attempts": attempts,
            "blocked_until": later_iso(backoff_seconds(cfg, attempts), now), "completed_at": None}


def _checkpoint(node: dict[str, Any], result: Any, run_id: str | None, at: str) -> str | None:
    if result.status != "checkpoint":
        return json.dumps(node["checkpoint"]) if node["checkpoint"] is not None else None
    return json.dumps({"question": result.question or result.summary, "summary": result.summary,
                       "runId": run_id, "askedAt": at})


def _auto_kv(result: Any, stdout_path: str | None, result_path: str | None) -> dict[str, str]:
    """The keys escalation and downstream packets rely on, so agents need not write them."""
    values = {"out.summary": result.summary}
    if stdout_path:
        values["out.last_stdout_path"] = str(stdout_path)
    if result_path:
        values["out.last_result_path"] = str(result_path)
    if result.status in ("fail", "checkpoint"):
        values["err.summary"] = result.summary or (result.errors[0] if result.errors else "")
    return values


def escalation_spec(node: dict[str, Any]) -> Any:
    """The planner node that takes over a node that failed for good."""
    from clavain.models.node import NodeInput, NodeSpec

    failed = node["id"]
    inputs = [NodeInput.model_validate({"nodeId": failed, "key": key, "as": alias})
              for key, alias in (("err.summary", "failure"), ("out.last_stdout_path", "stdout"),
                                 ("out.last_result_path", "result"))]
    # model_construct: the id may exceed the user-facing id length; everything else is literal.
    return NodeSpec.model_construct(
        id=f"{ESCALATION_PREFIX}{failed}", type="plan",
        title=f"Escalation: {failed} failed after {node['attempts']} attempts",
        dependsOn=[failed], parent=node["parentId"], runner=None, inputs=inputs, ownership=[],
        acceptance=[
            "either add nodes that fix the failure (next.addNodes),",
            "or checkpoint a question for a human,",
            f"or reopen {failed} with a new approach (`clavain graph reset {failed}`)",
        ],
        verify=[], retryPolicy=None,
    )


def escalate(conn: sqlite3.Connection, cfg: dict[str, Any], node: dict[str, Any], *,
             at: str, run_id: str | None) -> str | None:
    """Create `plan-escalate-<id>` once. Escalations themselves are not escalated again, so a
    failing planner cannot grow an endless chain; that surfaces as a deadlock instead."""
    if node["id"].startswith(ESCALATION_PREFIX):
        return None
    spec = escalation_spec(node)
    if conn.execute("SELECT 1 FROM nodes WHERE id = ?", (spec.id,)).fetchone():
        return None
    insert_nodes(conn, cfg, [spec], at=at, run_id=run_id,
                 dep_kind={(spec.id, node["id"]): "settled"}, note=f"escalation of {node['id']}")
    return spec.id


# ---------------------------------------------------------------- apply

def apply_result(conn: sqlite3.Connection, state: StatePaths, node_id: str,
                 result: dict[str, Any] | str, *, run_id: str | None = None,
                 stdout_path: str | None = None, result_path: str | None = None,
                 now: datetime | None = None) -> dict[str, Any]:
    """Record a runner's result for `node_id`. Returns {node, from, to, added, escalation, …}."""
    from clavain.workgraph import kv
    from clavain.workgraph.export import write_snapshot

    parsed = parse_result(result)
    cfg = config_mod.load(state.config)
    at = now_iso(now)
    with transaction(conn):
        node = require_node(conn, node_id)
        _check_applicable(node, run_id)
        from_status = node["status"]
        added = []
        if parsed.next and parsed.next.addNodes:
            fresh = _not_yet_added(conn, node_id, parsed.next.addNodes)
            if fresh:
                added = insert_nodes(conn, cfg, fresh, parent_id=node_id, at=at, run_id=run_id)
        after = next_state(node, parsed.status, cfg, now)
        conn.execute(
            "UPDATE nodes SET status = :status, attempts = :attempts, "
            "blocked_until = :blocked_until, completed_at = :completed_at, checkpoint_json = :cp, "
            "lock_run_id = NULL, lock_started_at = NULL, lock_pid = NULL, lock_host = NULL, "
            "updated_at = :at WHERE id = :id",
            {**after, "cp": _checkpoint(node, parsed, run_id, at), "at": at, "id": node_id})
        record_event(conn, node_id, from_status, after["status"], at=at,
                     run_id=run_id or node["lockRunId"], note=f"{parsed.status}: "
                     f"{parsed.summary[:200]}")
        attempt = node["attempts"] + 1
        for key, value in _auto_kv(parsed, stdout_path, result_path).items():
            kv.write(conn, state, node_id, key, value, run_id=run_id, attempt=attempt, cfg=cfg)
        escalation = None
        if after["status"] == "failed":
            escalation = escalate(conn, cfg, {**node, "attempts": after["attempts"]}, at=at,
                                  run_id=run_id)
        node = get_node(conn, node_id)
    write_snapshot(conn, state)
    return {"node": node_id, "from": from_status, "to": after["status"],
            "result": parsed.status, "attempts": node["attempts"],
            "blockedUntil": node["blockedUntil"], "added": added, "escalation": escalation,
            "question": (node["checkpoint"] or {}).get("question")
            if after["status"] == "needs_human" else None}


def _not_yet_added(conn: sqlite3.Connection, node_id: str, specs: list[Any]) -> list[Any]:
    """A retried node often proposes the same follow-up nodes again: those it already added
    (same id, same parent) are kept as they are, so the retry's result can still be recorded.
    The same id under another parent is still a duplicate and rejected."""
    children = {row[0] for row in conn.execute("SELECT id FROM nodes WHERE parent_id = ?",
                                               (node_id,))}
    return [spec for spec in specs if spec.id not in children]


def _check_applicable(node: dict[str, Any], run_id: str | None) -> None:
    if node["status"] not in APPLICABLE:
        raise ClavainError(f"node {node['id']!r} is {node['status']}; only an open or "
                           f"in_progress node takes a result (`clavain graph reset` reopens it)")
    holder = node["lockRunId"]
    if run_id and holder and holder != run_id:
        raise ClavainError(f"node {node['id']!r} is claimed by run {holder!r}, not {run_id!r}")
