"""What a sprint cost and found: steps done of its route, gates a person waived, agents
dispatched, verdict counts and measured tokens, its budgets. The quality gates read the compact
verdict summary only; detail files are opened only for verdicts that need attention.

`sprint summary` shows the active sprint, else the last one that ended (`--sprint ID` any
archived one); `.clavain/runs/<sprint>/summary.json` and `report.md` are written when a sprint
ships or is abandoned.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from clavain.errors import ClavainError
from clavain.paths import StatePaths


def sprint_verdicts(state: StatePaths, active: dict[str, Any],
                    folder: Path | None = None) -> list[dict[str, Any]]:
    """The verdicts filed during this sprint: in `.clavain/verdicts/` while it runs (a sprint
    starts by archiving what was there), in its archive once it ended."""
    from clavain.verdicts.files import parse_all

    return [verdict for verdict in parse_all(folder or state.verdicts)
            if verdict.get("sprint_id") in (None, active["sprint_id"])]


def budget_report(state: StatePaths, sprint_id: str) -> dict[str, Any] | None:
    """The sprint's budget report (`clavain.guards.report`), or None when nothing was counted.
    A read-only state folder is reported as last measured (measuring writes)."""
    from clavain.guards.report import project_report

    writable = os.access(state.root, os.W_OK) and os.access(state.db, os.W_OK)
    try:
        return project_report(state, f"sprint:{sprint_id}", measure_now=writable)
    except ClavainError:
        return None


def summarize(state: StatePaths, sprint: dict[str, Any], budget: Any = None, *,
              verdicts_folder: Path | None = None) -> dict[str, Any]:
    """The sprint's summary; `budget` is its budget report when the caller has one already."""
    from clavain.verdicts.summary import count_by_status, total_tokens

    if verdicts_folder is None:
        from clavain.verdicts.backfill import measure_pending

        measure_pending(state)
    found = sprint_verdicts(state, sprint, verdicts_folder)
    budget = budget if budget is not None else budget_report(state, sprint["sprint_id"])
    return {"sprint_id": sprint["sprint_id"], "description": sprint["description"],
            "complexity": sprint["complexity"], "outcome": sprint.get("outcome", "active"),
            "steps_done": len([s for s in sprint["completed_steps"] if s in sprint["route"]]),
            "steps_total": len(sprint["route"]), "current_step": sprint["current_step"],
            "waived": [{"step": w["step"], "reason": w["reason"], "problems": w["problems"],
                        "decided_by": w.get("decided_by")}
                       for w in sprint.get("waivers", [])],
            "person_decisions": list(sprint.get("person_decisions", [])),
            **({"plan_lint": sprint["plan_lint"]} if sprint.get("plan_lint") else {}),
            "skipped": dict(sprint.get("skipped", {})),
            "agents_dispatched": len(found), "verdict_counts": count_by_status(found),
            "tokens_measured": total_tokens(found),
            "budgets": budget["budgets"] if budget else [],
            "cost_usd": budget["cost_usd"] if budget else None}


def render(summary: dict[str, Any]) -> str:
    from clavain.authority import describe

    counts = ", ".join(f"{n} {status}" for status, n in summary["verdict_counts"].items())
    outcome = "" if summary["outcome"] == "active" else f" ({summary['outcome']})"
    return "\n".join([
        f"Sprint {summary['sprint_id']}{outcome}: {summary['description'][:80]}",
        f"- Steps completed: {summary['steps_done']}/{summary['steps_total']}"
        + (f" (next: {summary['current_step']})" if summary["current_step"] else ""),
        *[f"- WAIVED {w['step']}: {w['reason']} (the gate said: {'; '.join(w['problems'])}; "
          f"by {describe(w.get('decided_by'))})" for w in summary["waived"]],
        *[f"- Decided by a person: {d['what']} ({describe(d['decided_by'])})"
          for d in summary.get("person_decisions", [])],
        *([_plan_lint_line(summary["plan_lint"])] if summary.get("plan_lint") else []),
        *([f"- Skipped: {_skipped(summary.get('skipped', {}))}"]
          if summary.get("skipped") else []),
        f"- Agents dispatched: {summary['agents_dispatched']}",
        f"- Verdicts: {counts or 'none yet'}",
        f"- Tokens (measured): {summary['tokens_measured']:,}",
        *([_budget_line(summary["budgets"])] if summary["budgets"] else []),
    ])


def _plan_lint_line(accepted: dict[str, Any]) -> str:
    """`- Plan lint ACCEPTED: 2 error(s) (task-a: verify 'true' always passes …; …): why (by
    …)`: the plan recorded with findings a person accepted, on one line."""
    from clavain.authority import describe

    errors = [f["message"] for f in accepted["accepted"] if f["severity"] == "error"]
    return (f"- Plan lint ACCEPTED: {len(errors)} error(s) ({'; '.join(errors)}): "
            f"{accepted['reason']} (by {describe(accepted.get('decided_by'))})")


def _skipped(skipped: dict[str, str]) -> str:
    """`brainstorm, strategy (complexity 2); plan (started at execute)`: steps by reason."""
    by_reason: dict[str, list[str]] = {}
    for step, why in skipped.items():
        by_reason.setdefault(why, []).append(step)
    return "; ".join(f"{', '.join(steps)} ({why})" for why, steps in by_reason.items())


def render_report(summary: dict[str, Any], budget: dict[str, Any] | None) -> str:
    """`runs/<sprint>/report.md`: the summary, every waived gate, then the budget report."""
    lines = [f"# Sprint {summary['sprint_id']} ({summary['outcome']})", "",
             summary["description"], "", "## Summary", "", render(summary), ""]
    if summary["waived"]:
        lines += ["## Waived gates", ""]
        lines += [f"- WAIVED {w['step']}: {w['reason']}\n  - the gate said: "
                  f"{'; '.join(w['problems'])}" for w in summary["waived"]]
        lines.append("")
    if budget is not None:
        from clavain.guards.report import render as render_budget

        lines += ["## Budgets", "", render_budget(budget)]
    return "\n".join(lines).rstrip() + "\n"


def _budget_line(budgets: list[dict[str, Any]]) -> str:
    from clavain.guards.budget import amount

    return "- Budgets: " + ", ".join(
        f"{b['budget']} {amount(b['used'])}/{amount(b['limit'])}" for b in budgets)


def for_sprint(state: StatePaths, sprint_id: str | None = None) -> dict[str, Any]:
    """The summary of `sprint_id`, else the active sprint's, else the last one that ended."""
    from clavain.sprint import checkpoint

    active = checkpoint.read(state)
    if active is not None and sprint_id in (None, active["sprint_id"]):
        return summarize(state, active)
    archived = _archived(state, sprint_id)
    saved = Path(archived).parent / "summary.json"
    if saved.is_file():
        return json.loads(saved.read_text(encoding="utf-8"))
    sprint = json.loads(Path(archived).read_text(encoding="utf-8"))
    return summarize(state, sprint, verdicts_folder=Path(archived).parent / "verdicts")


def _archived(state: StatePaths, sprint_id: str | None) -> str:
    """The archived checkpoint of `sprint_id`, or of the sprint that ended last."""
    if sprint_id is not None:
        path = state.runs / sprint_id / "checkpoint.json"
        if "/" in sprint_id or not path.is_file():
            raise ClavainError(f"no sprint {sprint_id!r} in {state.runs} (its archive holds "
                               "checkpoint.json)")
        return str(path)
    from clavain.sprint.checkpoint import last_archived

    found = last_archived(state)
    if found is None:
        from clavain import hints

        raise ClavainError(f"no active sprint and none finished yet; start one with "
                           f"{hints.start_sprint()}")
    return str(found[0])
