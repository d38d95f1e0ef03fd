"""Open work that can never run: nothing runnable, nothing in progress, nothing waiting out a
backoff, yet open nodes remain — because a dependency failed or waits on a human. Reports each
stuck node with the chain of dependencies down to the node that blocks it, and can reopen failed
blockers a bounded number of times (defaults.autoResetFailedMax).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from clavain import config as config_mod
from clavain.clock import now_iso
from clavain.paths import StatePaths
from clavain.store.db import transaction
from clavain.workgraph.graph import _snapshot, reopen

SHOWN_CHAINS = 20

# Edges from stuck open nodes to dependencies that do not yet satisfy them.
_UNMET_EDGES = """SELECT d.node_id, d.depends_on_id, dn.status
  FROM deps d JOIN nodes n ON n.id = d.node_id JOIN nodes dn ON dn.id = d.depends_on_id
  WHERE n.status = 'open' AND n.unmet_deps > 0
    AND NOT (dn.status = 'done' OR (d.kind = 'settled' AND dn.status = 'failed'))
  ORDER BY d.node_id, d.depends_on_id"""


def _is_live(conn: sqlite3.Connection) -> bool:
    """Something can still move without outside help: runnable now or later, or running."""
    return conn.execute(
        "SELECT 1 FROM nodes WHERE status = 'in_progress' "
        "OR (status = 'open' AND unmet_deps = 0) LIMIT 1").fetchone() is not None


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


def detect(conn: sqlite3.Connection) -> dict[str, Any] | None:
    """None when the graph can still progress (or is finished); else the report."""
    if _is_live(conn):
        return None
    edges = conn.execute(_UNMET_EDGES).fetchall()
    if not edges:
        return None
    unmet: dict[str, list[str]] = {}
    status: dict[str, str] = {}
    for row in edges:
        unmet.setdefault(row["node_id"], []).append(row["depends_on_id"])
        status.setdefault(row["depends_on_id"], row["status"])
    memo: dict[str, list[str]] = {}
    chains = [blocking_chain(n, unmet, memo) for n in sorted(unmet)]
    blockers = sorted({c[-1] for c in chains})
    return {
        "deadlocked": True,
        "stuck": len(chains),
        "blockers": [{"id": b, "status": status.get(b)} for b in blockers],
        "chains": [{"node": c[0], "chain": c, "blocker": c[-1], "blockerStatus": status.get(c[-1])}
                   for c in chains[:SHOWN_CHAINS]],
    }


def describe(report: dict[str, Any]) -> str:
    """One line for people."""
    first = report["chains"][0]
    blockers = ", ".join(f"{b['id']} ({b['status']})" for b in report["blockers"][:5])
    return (f"deadlock: {report['stuck']} open node(s) can never run; blocked by {blockers}; "
            f"e.g. {' -> '.join(first['chain'])}")


def auto_reset(conn: sqlite3.Connection, state: StatePaths | None,
               cfg: dict[str, Any] | None = None) -> list[str]:
    """Reopen failed blockers of a deadlock, each at most autoResetFailedMax times in total."""
    cfg = cfg or (config_mod.load(state.config) if state else config_mod.DEFAULTS)
    limit = int(config_mod.get(cfg, "defaults.autoResetFailedMax", 0))
    if limit <= 0:
        return []
    reopened = []
    at = now_iso()
    with transaction(conn):
        report = detect(conn)
        for blocker in (report or {}).get("blockers", []):
            if blocker["status"] != "failed":
                continue
            row = conn.execute("SELECT auto_resets FROM nodes WHERE id = ?",
                               (blocker["id"],)).fetchone()
            if row["auto_resets"] >= limit:
                continue
            reopen(conn, blocker["id"], "failed", at=at, auto=True,
                   note=f"auto-reset {row['auto_resets'] + 1}/{limit} to break a deadlock")
            reopened.append(blocker["id"])
    if reopened:
        _snapshot(conn, state)
    return reopened
