"""`clavain run --dry-run`: the nodes a run would start, who would run each (runner, model), and
what it would cost — LLM calls, tokens, dollars — against the run's budgets, before anything is
spent.

Tokens and dollars per call come from this project's measured history (the LLM calls recorded
in earlier runs' metrics, per role; the median, so one runaway call does not set the
expectation), else from `supervisor.projection` in config. A planner's tasks do not exist yet:
the plan says how many executor calls each planner may add (2-6), and the totals count none of
them.
"""

from __future__ import annotations

from typing import Any

from clavain import config as config_mod
from clavain.errors import ClavainError
from clavain.paths import StatePaths
from clavain.store.graph_db import graph_store_exists, open_graph_db
from clavain.supervisor import run_reserve
from clavain.supervisor.metrics import history
from clavain.supervisor.routes import CHECK_ROLES, check_override, route_for
from clavain.supervisor.run_budget import RunBudget, run_key
from clavain.supervisor.run_reserve import default_projection
from clavain.workgraph.graphs import Graph
from clavain.workgraph.nodes import list_nodes
from clavain.workgraph.results import PLANNER_MAX_TASKS
from clavain.workgraph.statuses import NodeStatus

PENDING = (NodeStatus.OPEN, NodeStatus.IN_PROGRESS)


def project(state: StatePaths, graph_id: str, *, runner_override: str | None = None,
            run_id: str = "dry-run") -> dict[str, Any]:
    cfg = config_mod.load(state.config)
    check_override(cfg, runner_override)
    if not graph_store_exists(state):
        raise ClavainError(f"no workgraph yet ({state.db} is missing)")
    conn = open_graph_db(state)
    try:
        g = Graph(conn, graph_id, state)
        measured = history(state, by_model=True)
        fallback = default_projection(cfg)
        rows = [_row(cfg, node, runner_override, measured, fallback)
                for node in _dispatch_order(list_nodes(g)) if node["status"] in PENDING]
        budget = RunBudget(state, run_id)
        limits = budget.limits
    finally:
        conn.close()
    reserve = reservation_plan(state, run_key(run_id), limits, rows)
    totals = {"nodes": len(rows), "llm_calls": sum(r["llm_calls"] for r in rows),
              "tokens": round(sum(r["tokens"] for r in rows)),
              "cost_usd": round(sum(r["cost_usd"] for r in rows), 4),
              "verify_without_llm": sum(1 for r in rows
                                        if r["role"] in CHECK_ROLES),
              "planners": sum(1 for r in rows if r["role"] in ("planner", "escalation"))}
    over = [key for key, limit in (("tokens", limits["maxTokens"]),
                                   ("cost_usd", limits["maxCostUsd"]))
            if limits["enabled"] and totals[key] > limit]
    return {"graph_id": graph_id, "nodes": rows, "totals": totals,
            "source": "history" if measured else "defaults",
            "budget": {"enabled": limits["enabled"], "max_tokens": limits["maxTokens"],
                       "max_cost_usd": limits["maxCostUsd"], "over": over},
            "planned_tasks_not_counted": totals["planners"] * PLANNER_MAX_TASKS,
            "reservation": reserve}


def reservation_plan(state: StatePaths, key: str, limits: dict[str, Any],
                     rows: list[dict[str, Any]]) -> dict[str, Any]:
    """How many pending nodes, in dispatch order, fit what the run has unreserved with their
    projected cost: the run starts nothing after the first that does not (`run_reserve`)."""
    now = run_reserve.status(state, key, limits)
    headroom = now["headroom"]
    fits, first_over = 0, None
    cumulative = {"tokens": 0.0, "cost_usd": 0.0}
    plan_rows = []
    for row in rows:
        for column in cumulative:
            cumulative[column] += row[column]
        fit = first_over is None and all(
            headroom[column] is None or cumulative[column] <= headroom[column] + 1e-9
            for column in cumulative)
        if fit:
            fits += 1
        elif first_over is None:
            first_over = row["id"]
        plan_rows.append({"id": row["id"], "role": row["role"], "model": row["model"],
                          "tokens": row["tokens"], "cost_usd": row["cost_usd"],
                          "cumulative_tokens": round(cumulative["tokens"]),
                          "cumulative_cost_usd": round(cumulative["cost_usd"], 4),
                          "fits": fit})
    return {"run": key, "headroom": headroom, "spent": now["spent"],
            "reserved": now["reserved"], "pending": len(rows), "fits": fits,
            "first_over": first_over, "nodes": plan_rows}


def _dispatch_order(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The order one worker would claim the nodes in: among those whose dependencies are done
    (or already ordered), the first by rank then id (`schedule.next_node`)."""
    by_id = {node["id"]: node for node in nodes}
    placed: set[str] = set()
    order: list[dict[str, Any]] = []
    waiting = sorted(nodes, key=lambda n: (n.get("rank") or 0, n["id"]))
    while waiting:
        ready = next((n for n in waiting if all(
            dep in placed or dep not in by_id or by_id[dep]["status"] not in PENDING
            for dep in n.get("depends_on") or [])), waiting[0])  # a cycle: take the first
        waiting.remove(ready)
        placed.add(ready["id"])
        order.append(ready)
    return order


def _row(cfg: dict[str, Any], node: dict[str, Any], runner_override: str | None,
         measured: dict[str, dict[str, float]], fallback: dict[str, float]) -> dict[str, Any]:
    route = route_for(cfg, node, runner_override=runner_override)
    per_call = (measured.get((route.role, route.model)) or measured.get(route.role, fallback)
                if route.llm else {"tokens": 0, "cost_usd": 0.0})
    calls = 1 if route.llm else 0
    return {"id": node["id"], "type": node["type"], "status": node["status"], **route.as_dict(),
            "llm_calls": calls, "tokens": calls * per_call["tokens"],
            "cost_usd": round(calls * per_call["cost_usd"], 4)}
