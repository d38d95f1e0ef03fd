"""What the work cost: at a glance (the ten costliest nodes, what failed and retried work
cost, the projected cost to finish) and in full (every budget against its cap, per model, the
denied calls, runner calls per role and per node — the long tables folded). The run's figure is
its budget ledger (`run_report.report_for`, `run_reserve.ledger_of`): one figure everywhere."""

from __future__ import annotations

from html import escape
from typing import Any

from clavain.page.attention import node_dollars
from clavain.page.sections import _section, _table

COSTLIEST = 10
FOLD_ROWS = 12  # a table longer than this is folded into a <details>


def glance(page: dict[str, Any]) -> str:
    """The cost at a glance, or nothing when no runner call cost anything."""
    spent = node_dollars(page)
    if not any(spent.values()):
        return ""
    wasted = sum(float(entry["cost_usd"]) for run in page["runs"]
                 for entry in run["timeline"] if entry["outcome"] != "done")
    total = sum(spent.values())
    cards = [("spent by runner calls", f"${total:.2f}"),
             ("on failed and retried calls", f"${wasted:.2f}")]
    projection = page.get("projection")
    if projection:
        cards.append((f"projected to finish ({projection['nodes']} nodes left, by "
                      f"{projection['source']})", f"${float(projection['cost_usd']):.2f}"))
    costliest = sorted(((node, dollars) for node, dollars in spent.items() if dollars > 0),
                       key=lambda item: (-item[1], item[0]))[:COSTLIEST]
    nodes = {str(n.get("id")): n for n in (page["graph"] or {}).get("nodes") or []}
    rows = [{"node": node, "status": nodes.get(node, {}).get("status"),
             "dollars": f"${dollars:.2f}", "share": f"{dollars / total:.0%}" if total else ""}
            for node, dollars in costliest]
    from clavain.page.sections import _cards

    return _section("cost", "Cost at a glance", _cards(cards),
                    f"<h3>The {len(rows)} costliest nodes</h3>",
                    _table(rows, ["node", "status", "dollars", "share"],
                           numeric=("dollars", "share"), css="costliest"))


def _folded(summary: str, table: str, count: int) -> str:
    if count <= FOLD_ROWS:
        return f"<h3>{escape(summary)}</h3>{table}"
    return f"<details><summary>{escape(summary)} ({count})</summary>{table}</details>"


def _meter(used: float, limit: float) -> str:
    share = used / limit if limit else 0.0
    level = "over" if share >= 1 else "high" if share >= 0.8 else ""
    marker = " — over the cap" if share >= 1 else " — near the cap" if share >= 0.8 else ""
    return (f'<span class="meter" title="{share:.0%}"><i class="{level}" '
            f'style="width:{min(share, 1) * 100:.1f}%"></i></span> {share:.0%}{marker}')


def budgets(page: dict[str, Any]) -> str:
    """Every budget against its cap and where the spend went; nothing when nothing counted."""
    from clavain.guards.budget import amount

    budget = page["budget"]
    body = []
    if budget is not None:
        rows = [{"budget": b["budget"], "used": amount(b["used"]), "limit": amount(b["limit"]),
                 "left": amount(max(b["limit"] - b["used"], 0)),
                 "spent": _meter(float(b["used"]), float(b["limit"]))}
                for b in budget["budgets"]]
        body += [f"<p>Budget run <code>{escape(str(budget['run']))}</code> "
                 f"({escape(str(budget.get('profile')))}/{escape(str(budget.get('scope')))})"
                 "</p>",
                 _table(rows, ["budget", "used", "limit", "left", "spent"],
                        numeric=("used", "limit", "left"), raw=("spent",), css="budgets")]
        models = [{"model": model, **figures} for model, figures in
                  (budget.get("models") or {}).items() if isinstance(figures, dict)]
        if models:
            body += ["<h3>Per model</h3>", _table(models, sorted({k for m in models for k in m},
                                                                  key=_model_column))]
        if budget.get("denied"):
            body += [_folded("Denied calls", _table(budget["denied"], sorted(
                {k for d in budget["denied"] for k in d})), len(budget["denied"]))]
    by_role, by_node = _spend_by(page, "role"), _spend_by(page, "node")
    if by_role:
        body += ["<h3>Runner calls per role</h3>",
                 _table(by_role, ["role", "calls", "tokens", "dollars", "seconds"],
                        numeric=("calls", "tokens", "dollars", "seconds"), css="per-role")]
    if by_node:
        body.append(_folded("Runner calls per node", _table(
            by_node, ["node", "calls", "tokens", "dollars", "seconds"],
            numeric=("calls", "tokens", "dollars", "seconds"), css="per-node"), len(by_node)))
    return _section("budgets", "Budgets", *body) if body else ""


def _model_column(name: str) -> tuple[int, str]:
    return (0 if name == "model" else 1, name)


def _spend_by(page: dict[str, Any], key: str) -> list[dict[str, Any]]:
    totals: dict[str, dict[str, Any]] = {}
    for run in page["runs"]:
        for entry in run["timeline"]:
            name = str(entry[key])
            row = totals.setdefault(name, {key: name, "calls": 0, "tokens": 0,
                                           "dollars": 0.0, "seconds": 0.0})
            row["calls"] += 1
            row["tokens"] += entry["tokens"]
            row["dollars"] += entry["cost_usd"]
            row["seconds"] += float(entry["end_epoch"]) - float(entry["start_epoch"])
    for row in totals.values():
        row["dollars"], row["seconds"] = f"${row['dollars']:.4f}", round(row["seconds"], 1)
    return sorted(totals.values(), key=lambda row: (-row["seconds"], row[key]))
