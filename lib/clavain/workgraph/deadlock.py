"""Work that can never finish on its own: nothing runnable, nothing in progress, nothing waiting
out a backoff, yet open nodes remain (a dependency failed or waits on a person), or a node failed
for good with no escalation left to take it over. Reports every blocker — each failed node that
is neither superseded nor in the hands of a pending escalation, each node waiting on a person —
and each stuck node with the chain of dependencies down to its blocker; can reopen failed
blockers a bounded number of times (defaults.autoResetFailedMax).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from clavain import config as config_mod
from clavain.clock import now_iso
from clavain.store import queries
from clavain.store.db import transaction
from clavain.textio import clip
from clavain.workgraph.escalation import ESCALATION_PREFIX, close_pending
from clavain.workgraph.export import after_commit
from clavain.workgraph.graphs import CLOSED, Graph
from clavain.workgraph.graphs import get as get_graph
from clavain.workgraph.nodes import reopen
from clavain.workgraph.statuses import NodeStatus

SHOWN_CHAINS = 20

def _is_live(g: Graph) -> bool:
    """Something can still move without outside help: runnable now or later, or running."""
    return queries.run(g.conn, "deadlock.is_live", (g.id,)).fetchone() is not None


def blocking_chain(node_id: str, unmet: dict[str, list[str]],
                   memo: dict[str, list[str]]) -> list[str]:
    """`[node, dep, dep-of-dep, …, blocker]` following the first unmet dependency each step;
    `memo` shares the tails between stuck nodes so a wide graph costs one walk per node."""
    path, current, on_path = [], node_id, set()
    while current not in memo:
        deps = unmet.get(current)
        # Not a stuck node itself, so it is what blocks the others; or back on this path, so a
        # dependency cycle, which ends the chain (`a -> b -> a`) instead of looping forever.
        if not deps or current in on_path:
            memo[current] = [current]
            break
        path.append(current)
        on_path.add(current)
        current = deps[0]
    tail = memo[current]
    for step in reversed(path):
        tail = [step, *tail]
        memo[step] = tail
    return memo[node_id]


def _failed_reason(row: sqlite3.Row, limit: int) -> str:
    if row["id"].startswith(ESCALATION_PREFIX):
        return "an escalation that failed for good (escalations are not escalated)"
    used = f"{row['escalations']} of {limit} escalations used"
    if row["escalation_status"] is None:
        return ("failed for good; escalation is off (defaults.maxEscalations is 0)" if limit == 0
                else f"failed for good; not escalated ({used})")
    return (f"failed for good; its escalation is {row['escalation_status']} without replacing "
            f"it ({used})")


def blockers(g: Graph, cfg: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """Every node nothing will move without outside help, whether or not other work can still
    run: failed nodes neither replaced nor in the hands of a pending escalation, and nodes
    waiting on a person. Each with why, its error or question, and the command that unblocks
    it."""
    limit = int(config_mod.get(cfg or config_mod.DEFAULTS, "defaults.maxEscalations", 2))
    found: dict[str, dict[str, Any]] = {}
    for row in queries.run(g.conn, "deadlock.unresolved_failed", (g.id,)).fetchall():
        found[row["id"]] = {"id": row["id"], "status": NodeStatus.FAILED,
                            "reason": _failed_reason(row, limit), "error": row["error"],
                            "fix": f"clavain graph reset {row['id']}"}
    for row in queries.run(g.conn, "deadlock.waiting_on_people", (g.id,)).fetchall():
        found[row["id"]] = {"id": row["id"], "status": NodeStatus.NEEDS_HUMAN,
                            "reason": "waits for a person's answer", "error": row["question"],
                            "fix": f"clavain graph answer {row['id']} --answer TEXT"}
    return found


def detect(g: Graph, cfg: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """None when the graph can still progress (or is finished); else the report."""
    if _is_live(g):
        return None
    blockers_found = blockers(g, cfg)
    edges = queries.run(g.conn, "deadlock.unmet_edges", (g.id,)).fetchall()
    if not edges and not blockers_found:
        return None
    unmet: dict[str, list[str]] = {}
    status = {node_id: blocker["status"] for node_id, blocker in blockers_found.items()}
    for row in edges:
        unmet.setdefault(row["node_id"], []).append(row["depends_on_id"])
        status.setdefault(row["depends_on_id"], row["status"])
    memo: dict[str, list[str]] = {}
    chains = [blocking_chain(n, unmet, memo) for n in sorted(unmet)]
    for chain in chains:  # a blocker found only at a chain's end (a dependency cycle)
        blockers_found.setdefault(chain[-1], {"id": chain[-1], "status": status.get(chain[-1]),
                                              "reason": f"is {status.get(chain[-1])}",
                                              "error": None, "fix": None})
    return {
        "deadlocked": True,
        "stuck": len(chains),
        "blockers": [blockers_found[b] for b in sorted(blockers_found)],
        "chains": [{"node": c[0], "chain": c, "blocker": c[-1],
                    "blocker_status": status.get(c[-1])} for c in chains[:SHOWN_CHAINS]],
    }


def describe(report: dict[str, Any]) -> str:
    """One line for people: the blockers, why, and what unblocks the first."""
    shown = report["blockers"][:5]
    parts = []
    for blocker in shown:
        error = f"; error: {clip(blocker['error'])}" if blocker["error"] else ""
        parts.append(f"{blocker['id']} ({blocker['reason']}{error})")
    more = len(report["blockers"]) - len(shown)
    line = f"deadlock: blocked by {', '.join(parts)}" + (f" and {more} more" if more > 0 else "")
    if report["chains"]:
        first = report["chains"][0]
        line += (f"; {report['stuck']} open node(s) can never run, e.g. "
                 f"{' -> '.join(first['chain'])}")
    fix = next((b["fix"] for b in shown if b["fix"]), None)
    return line + (f"; to unblock: {fix}" if fix else "")


def auto_reset(g: Graph, cfg: dict[str, Any] | None = None) -> list[str]:
    """Reopen failed blockers of a deadlock, each at most autoResetFailedMax times in total."""
    cfg = cfg or config_mod.load(g.state.config)
    limit = int(config_mod.get(cfg, "defaults.autoResetFailedMax", 0))
    if limit <= 0 or (get_graph(g.conn, g.id) or {}).get("status") in CLOSED:
        return []  # a closed graph's work never runs again
    reopened = []
    at = now_iso()
    with transaction(g.conn):
        report = detect(g, cfg)
        for blocker in (report or {}).get("blockers", []):
            if blocker["status"] != NodeStatus.FAILED:
                continue
            row = queries.run(g.conn, "deadlock.auto_resets", (g.id, blocker["id"])).fetchone()
            if row["auto_resets"] >= limit:
                continue
            reopen(g, blocker["id"], NodeStatus.FAILED, at=at, auto=True,
                   note=f"auto-reset {row['auto_resets'] + 1}/{limit} to break a deadlock")
            close_pending(g, blocker["id"], at=at, why="was reopened to break a deadlock")
            reopened.append(blocker["id"])
    if reopened:
        after_commit(g, cfg)
    return reopened
