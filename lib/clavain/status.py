"""`clavain status`: one screen of where the work stands — node counts, what runs now, what waits
and until when, what needs a person, what blocks, what runs next, and the verdicts needing
attention. Read-only: it creates nothing and releases no lock (`graph next` does that).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from clavain import config as config_mod
from clavain.clock import now_iso
from clavain.paths import StatePaths
from clavain.workgraph import deadlock, leases, schedule
from clavain.workgraph.nodes import get_node

# `replaced`: failed, then replaced by what its escalation added (it blocks nothing).
STATUS_ORDER = ("done", "in_progress", "open", "needs_human", "failed", "replaced")
SHOWN = 5


def _workgraph(conn: sqlite3.Connection, cfg: dict[str, Any]) -> dict[str, Any]:
    at = now_iso()
    counts = dict(conn.execute(
        "SELECT CASE WHEN superseded_by IS NOT NULL THEN 'replaced' ELSE status END, count(*) "
        "FROM nodes GROUP BY 1").fetchall())
    lease = float(config_mod.get(cfg, "defaults.lockLeaseSeconds", 3600))
    stale = {node_id: reason for node_id, _run, reason in
             leases.stale_locks(conn, lease_seconds=lease)}
    running = [{"id": r["id"], "run_id": r["lock_run_id"], "since": r["lock_started_at"],
                "stale": stale.get(r["id"])}
               for r in conn.execute("SELECT id, lock_run_id, lock_started_at FROM nodes "
                                     "WHERE status = 'in_progress' ORDER BY lock_started_at, id")]
    waiting = [{"id": r["id"], "until": r["blocked_until"], "attempts": r["attempts"]}
               for r in conn.execute("SELECT id, blocked_until, attempts FROM nodes "
                                     "WHERE status = 'open' AND blocked_until > ? "
                                     "ORDER BY blocked_until, id", (at,))]
    humans = [{"id": r["id"], "question": r["question"]}
              for r in conn.execute("SELECT id, json_extract(human_question_json, '$.question') "
                                    "AS question FROM nodes WHERE status = 'needs_human' "
                                    "ORDER BY id")]
    blocked = sorted(deadlock.blockers(conn, cfg).values(), key=lambda b: b["id"])
    ready = get_node(conn, leases.select_next(conn) or "")
    upcoming = ({"node": ready["id"], "title": ready["title"], "attempts": ready["attempts"],
                 "last_error": _last_error(conn, ready["id"]) if ready["attempts"] else None}
                if ready else {"node": None, **schedule.idle_reason(conn, cfg=cfg)})
    return {"nodes": sum(counts.values()),
            "counts": {s: counts.get(s, 0) for s in STATUS_ORDER},
            "running": running, "waiting": waiting, "needs_human": humans,
            "blocked": blocked, "next": upcoming}


def _last_error(conn: sqlite3.Connection, node_id: str) -> str | None:
    row = conn.execute("SELECT value_text FROM kv_latest WHERE node_id = ? AND key = "
                       "'err.summary'", (node_id,)).fetchone()
    return row["value_text"] if row else None


def collect(conn: sqlite3.Connection, state: StatePaths) -> dict[str, Any]:
    """Everything `clavain status` shows, as data."""
    from clavain.verdicts import files, summary

    cfg = config_mod.load(state.config)
    found = files.parse_all(state.verdicts)
    return {"workgraph": _workgraph(conn, cfg),
            "verdicts": {"counts": summary.count_by_status(found),
                         "attention": summary.get_attention(found)}}


def _clip(text: str, limit: int = 100) -> str:
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= limit else one_line[: limit - 1] + "…"


def _more(items: list[Any]) -> str:
    return f" (+{len(items) - SHOWN} more)" if len(items) > SHOWN else ""


def render(report: dict[str, Any]) -> str:
    """The one screen for people."""
    graph, verdicts = report["workgraph"], report["verdicts"]
    lines = []
    if graph["nodes"]:
        counts = ", ".join(f"{n} {s.replace('_', ' ')}" for s, n in graph["counts"].items() if n)
        lines.append(f"Workgraph  {graph['nodes']} node(s): {counts}")
    else:
        lines.append("Workgraph  no nodes yet (clavain graph import PLAN.json)")
    for item in graph["running"][:SHOWN]:
        stale = (f" — stale: {item['stale']}; `clavain graph next` releases it" if item["stale"]
                 else "")
        lines.append(f"Running    {item['id']} (run {item['run_id']}, since {item['since']})"
                     f"{stale}")
    if graph["running"]:
        lines[-1] += _more(graph["running"])
    for item in graph["waiting"][:SHOWN]:
        lines.append(f"Waiting    {item['id']} until {item['until']} "
                     f"(retry after {item['attempts']} failed attempt(s))")
    for item in graph["needs_human"][:SHOWN]:
        lines.append(f"Needs you  {item['id']}: {item['question'] or '?'} "
                     f"(clavain graph answer {item['id']} --answer TEXT)")
    for item in graph["blocked"][:SHOWN]:
        if item["status"] == "failed":
            error = f"; error: {_clip(item['error'])}" if item["error"] else ""
            lines.append(f"Blocked    {item['id']}: {item['reason']}{error} ({item['fix']})")
    upcoming = graph["next"]
    if upcoming["node"]:
        title = f" — {upcoming['title']}" if upcoming["title"] else ""
        retry = (f" (after {upcoming['attempts']} failed attempt(s); last error: "
                 f"{_clip(upcoming['last_error'] or '?')})" if upcoming["attempts"] else "")
        lines.append(f"Next       {upcoming['node']}{title}{retry}")
    elif graph["nodes"]:
        lines.append(f"Next       nothing to start: {upcoming['message']}")
    counts = ", ".join(f"{n} {s}" for s, n in verdicts["counts"].items())
    lines.append(f"Verdicts   {counts or 'none yet'}")
    for item in verdicts["attention"][:SHOWN]:
        detail = f" → {item['detail_path']}" if item["detail_path"] else ""
        lines.append(f"  {item['status']} {item['agent']}: {item['summary']}{detail}")
    return "\n".join(lines)
