"""`clavain status`: one screen of where the work stands — node counts, what runs now, what waits
and until when, what needs a person, what blocks, what runs next, and the verdicts needing
attention. Read-only: it creates nothing and releases no lock (`graph next` does that).
"""

from __future__ import annotations

from typing import Any

from clavain import config as config_mod
from clavain.clock import now_iso
from clavain.store import queries
from clavain.textio import clip
from clavain.workgraph import deadlock, schedule
from clavain.workgraph.claim_pick import select_next
from clavain.workgraph.claims import lease_of
from clavain.workgraph.graphs import Graph
from clavain.workgraph.nodes import get_node
from clavain.workgraph.stale import stale_locks
from clavain.workgraph.statuses import NodeStatus

# `replaced`: failed, then replaced by what its escalation added (it blocks nothing).
STATUS_ORDER = ("done", "in_progress", "open", "needs_human", "failed", "replaced", "cancelled")
SHOWN = 5


def _workgraph(g: Graph, cfg: dict[str, Any]) -> dict[str, Any]:
    at = now_iso()
    conn = g.conn
    counts = dict(queries.run(conn, "status.counts", (g.id,)).fetchall())
    stale = {node_id: reason for node_id, _run, reason in
             stale_locks(g, lease_seconds=lease_of(cfg))}
    running = [{"id": r["id"], "run_id": r["lock_run_id"], "since": r["lock_started_at"],
                "stale": stale.get(r["id"])}
               for r in queries.run(conn, "status.running", (g.id,))]
    waiting = [{"id": r["id"], "until": r["blocked_until"], "attempts": r["attempts"]}
               for r in queries.run(conn, "status.waiting", (g.id, at))]
    humans = [{"id": r["id"], "question": r["question"]}
              for r in queries.run(conn, "status.needs_human", (g.id,))]
    blocked = sorted(deadlock.blockers(g, cfg).values(), key=lambda b: b["id"])
    ready = get_node(g, select_next(g) or "")
    upcoming = ({"node": ready["id"], "title": ready["title"], "attempts": ready["attempts"],
                 "last_error": _last_error(g, ready["id"]) if ready["attempts"] else None}
                if ready else {"node": None, **schedule.idle_reason(g, cfg=cfg)})
    return {"graph_id": g.id, "nodes": sum(counts.values()),
            "counts": {s: counts.get(s, 0) for s in STATUS_ORDER},
            "running": running, "waiting": waiting, "needs_human": humans,
            "blocked": blocked, "next": upcoming}


def _last_error(g: Graph, node_id: str) -> str | None:
    row = queries.run(g.conn, "status.last_error", (g.id, node_id)).fetchone()
    return row["value_text"] if row else None


def collect(g: Graph, active: dict[str, Any] | None,
            sprint_problem: str | None = None) -> dict[str, Any]:
    """Everything `clavain status` shows, as data: the active sprint (its step, place in the
    route and what its gate still waits for) or what is wrong with its checkpoint, its
    workgraph, the verdicts."""
    from clavain.verdicts import files, summary

    state = g.state
    cfg = config_mod.load(state.config)
    found = files.parse_all(state.verdicts)
    return {"sprint": _sprint(g, active), "sprint_problem": sprint_problem,
            "workgraph": _workgraph(g, cfg),
            "verdicts": {"counts": summary.count_by_status(found),
                         "attention": summary.get_attention(found)}}


def _sprint(g: Graph, active: dict[str, Any] | None) -> dict[str, Any] | None:
    if active is None:
        return None
    from clavain.sprint import gates

    step = active["current_step"]
    return {"sprint_id": active["sprint_id"], "description": active["description"],
            "step": step, "position": active["route"].index(step) + 1 if step else None,
            "route": active["route"], "completed_steps": active["completed_steps"],
            "gate": gates.problems(g, active, step) if step else [],
            "waivers": active.get("waivers", [])}


def _more(items: list[Any]) -> str:
    return f" (+{len(items) - SHOWN} more)" if len(items) > SHOWN else ""


def render(report: dict[str, Any]) -> str:
    """The one screen for people."""
    graph, verdicts = report["workgraph"], report["verdicts"]
    lines = _sprint_lines(report["sprint"])
    if report.get("sprint_problem"):
        lines.append(f"Sprint     {clip(report['sprint_problem'], 300)}")
    if graph["nodes"]:
        counts = ", ".join(f"{n} {s.replace('_', ' ')}" for s, n in graph["counts"].items() if n)
        lines.append(f"Workgraph  {graph['graph_id']}: {graph['nodes']} node(s): {counts}")
    else:
        how = ("record the plan: `clavain sprint done plan --plan PATH`" if report["sprint"]
               else "clavain graph import PLAN.json")
        lines.append(f"Workgraph  {graph['graph_id']}: no nodes yet ({how})")
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
    for step in next_steps(report):
        lines.append(_step_line(step))
    counts = ", ".join(f"{n} {s}" for s, n in verdicts["counts"].items())
    lines.append(f"Verdicts   {counts or 'none yet'}")
    for item in verdicts["attention"][:SHOWN]:
        detail = f" → {item['detail_path']}" if item["detail_path"] else ""
        lines.append(f"  {item['status']} {item['agent']}: {item['summary']}{detail}")
    return "\n".join(lines)


def next_steps(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The "Needs you", "Blocked" and "Next" lines as data (the HTML page draws them too, so
    they are worded once): each a `label`, its `node` (None for "nothing to start"), `text`
    (the question, the reason, the title or why nothing starts), `error`, and `command`, the
    exact command that unblocks it (None where there is none to run). At most SHOWN of each."""
    graph = report["workgraph"]
    steps = [{"label": "Needs you", "node": item["id"], "text": item["question"] or "?",
              "error": None, "command": f"clavain graph answer {item['id']} --answer TEXT"}
             for item in graph["needs_human"][:SHOWN]]
    steps += [{"label": "Blocked", "node": item["id"], "text": item["reason"],
               "error": item["error"], "command": item["fix"]}
              for item in graph["blocked"][:SHOWN] if item["status"] == NodeStatus.FAILED]
    upcoming = graph["next"]
    if upcoming["node"]:
        steps.append({"label": "Next", "node": upcoming["node"], "text": upcoming["title"],
                      "attempts": upcoming["attempts"],
                      "error": upcoming["last_error"] or "?" if upcoming["attempts"] else None,
                      "command": None})
    elif graph["nodes"]:
        steps.append({"label": "Next", "node": None,
                      "text": f"nothing to start: {upcoming['message']}", "error": None,
                      "command": None})
    return steps


def _step_line(step: dict[str, Any]) -> str:
    if step["label"] == "Needs you":
        return f"Needs you  {step['node']}: {step['text']} ({step['command']})"
    if step["label"] == "Blocked":
        error = f"; error: {clip(step['error'], 100)}" if step["error"] else ""
        return f"Blocked    {step['node']}: {step['text']}{error} ({step['command']})"
    if step["node"] is None:
        return f"Next       {step['text']}"
    title = f" — {step['text']}" if step["text"] else ""
    retry = (f" (after {step['attempts']} failed attempt(s); last error: "
             f"{clip(step['error'], 100)})" if step["attempts"] else "")
    return f"Next       {step['node']}{title}{retry}"


def _sprint_lines(sprint: dict[str, Any] | None) -> list[str]:
    if sprint is None:
        return []
    lines = [f"Sprint     {sprint['sprint_id']}: {clip(sprint['description'], 80)}"]
    if sprint["step"] is None:
        lines.append("Step       every step done")
        return lines
    lines.append(f"Step       {sprint['step']} ({sprint['position']} of {len(sprint['route'])}: "
                 f"{' → '.join(sprint['route'])})")
    for problem in sprint["gate"][:SHOWN]:
        lines.append(f"Gate       {clip(problem, 160)}")
    if not sprint["gate"]:
        plan = " --plan PATH" if sprint["step"] == "plan" else ""
        lines.append(f"Gate       open: `clavain sprint done {sprint['step']}{plan}` records it")
    for waiver in sprint["waivers"][-SHOWN:]:
        lines.append(f"Waived     {waiver['step']}: {clip(waiver['reason'], 100)}")
    return lines
