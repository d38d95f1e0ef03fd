"""What a sprint cost and found: steps done of its route, agents dispatched, verdict counts and
measured tokens. The quality gates read the compact verdict summary only; detail files are
opened only for verdicts that need attention."""

from __future__ import annotations

from typing import Any

from clavain.paths import StatePaths


def sprint_verdicts(state: StatePaths, active: dict[str, Any]) -> list[dict[str, Any]]:
    """The verdicts filed during this sprint. `.clavain/verdicts/` holds only those: a sprint
    starts by archiving what was there, and ends by archiving its own."""
    from clavain.verdicts.files import parse_all

    return [verdict for verdict in parse_all(state.verdicts)
            if verdict.get("sprint_id") in (None, active["sprint_id"])]


def budget_report(state: StatePaths, sprint_id: str) -> dict[str, Any] | None:
    """The sprint's budget report (`clavain.guards.report`), or None when nothing was counted."""
    from clavain.errors import ClavainError
    from clavain.guards.report import project_report

    try:
        return project_report(state, f"sprint:{sprint_id}")
    except ClavainError:
        return None


def summarize(state: StatePaths, active: dict[str, Any], budget: Any = None) -> dict[str, Any]:
    """The sprint's summary; `budget` is its budget report when the caller has one already."""
    from clavain.verdicts.summary import count_by_status, total_tokens

    found = sprint_verdicts(state, active)
    budget = budget if budget is not None else budget_report(state, active["sprint_id"])
    return {"sprint_id": active["sprint_id"], "description": active["description"],
            "complexity": active["complexity"],
            "steps_done": len([s for s in active["completed_steps"] if s in active["route"]]),
            "steps_total": len(active["route"]), "current_step": active["current_step"],
            "agents_dispatched": len(found), "verdict_counts": count_by_status(found),
            "tokens_measured": total_tokens(found),
            "budgets": budget["budgets"] if budget else [],
            "cost_usd": budget["cost_usd"] if budget else None}


def render(summary: dict[str, Any]) -> str:
    counts = ", ".join(f"{n} {status}" for status, n in summary["verdict_counts"].items())
    return "\n".join([
        f"Sprint {summary['sprint_id']}: {summary['description'][:80]}",
        f"- Steps completed: {summary['steps_done']}/{summary['steps_total']}"
        + (f" (next: {summary['current_step']})" if summary["current_step"] else ""),
        f"- Agents dispatched: {summary['agents_dispatched']}",
        f"- Verdicts: {counts or 'none yet'}",
        f"- Tokens (measured): {summary['tokens_measured']:,}",
        *([_budget_line(summary["budgets"])] if summary["budgets"] else []),
    ])


def _budget_line(budgets: list[dict[str, Any]]) -> str:
    from clavain.guards.budget import amount

    return "- Budgets: " + ", ".join(
        f"{b['budget']} {amount(b['used'])}/{amount(b['limit'])}" for b in budgets)

