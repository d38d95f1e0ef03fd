"""`clavain iterate`: the one prompt a fresh agent gets per loop iteration — every actionable item
(runnable workgraph nodes and failing project checks) with its priority, "pick ONE, finish it,
exit", the automation mode's rules and the status block to end with. With nothing actionable it
is the exit prompt: the agent confirms with `EXIT_SIGNAL: true` (the loop's dual exit gate).

The prompt is built from the files and the database as they are now, never from an earlier
agent's memory (context is a liability; the tree is the truth).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clavain import config as config_mod
from clavain.loop.checks import run_checks
from clavain.paths import StatePaths
from clavain.store import queries
from clavain.workgraph.graphs import Graph

EXIT_BEGIN = "---CLAVAIN_ITERATE---"
EXIT_END = "---END_CLAVAIN_ITERATE---"
PRIORITY_ORDER = {"high": 0, "medium": 1, "low": 2}
NODE_PRIORITY = {"verify": "high", "final_verify": "high", "task": "medium", "plan": "medium",
                 "epic": "medium", "integrate": "low"}
TAIL_CHARS = 800

RULES = {
    "auto": ["You may edit files and run commands for the item you picked.",
             "If you cannot finish it (missing access, a decision only a person can make), stop "
             "and report STATUS: BLOCKED with the reason in NEXT_RECOMMENDATION."],
    "ask": ["Change only the files the item names or its failing check points to.",
            "Anything wider (a new dependency, a config or API change): do not do it; report "
            "STATUS: BLOCKED with your question in NEXT_RECOMMENDATION."],
    "plan": ["Do not edit files or run commands that change them.",
             "Write the plan for the item you picked in NEXT_RECOMMENDATION (one line per step) "
             "and report STATUS: IN_PROGRESS."],
}

def runnable_nodes(g: Graph) -> list[dict[str, Any]]:
    import json

    items = []
    from clavain.clock import now_iso
    from clavain.store.graph_db import store_now

    for row in queries.run(g.conn, "schedule.runnable",
                           {"graph": g.id, "now": now_iso(store_now(g.conn))}):
        items.append({"id": row["id"], "kind": "node", "type": row["type"],
                      "priority": NODE_PRIORITY.get(row["type"], "medium"),
                      "title": row["title"] or row["type"],
                      "verify": json.loads(row["verify_json"]),
                      "ownership": json.loads(row["ownership_json"])})
    return items


def collect(state: StatePaths, graph_id: str | None, *, skip: frozenset[str] = frozenset(),
            log_dir: Path | None = None, stop: Any = None,
            deadline: float | None = None) -> dict[str, Any]:
    """{"items": actionable items, priority order; "checks": every check's outcome;
    "skipped": items left out because the run marked them BLOCKED}. `deadline`: the checks'
    total time (`checks.run_checks`)."""
    cfg = config_mod.load(state.config)
    configured = list(config_mod.get(cfg, "checks", []))
    seen: set[str] = set()
    for check in configured:
        if check["id"] in seen:
            from clavain.errors import ClavainError

            raise ClavainError(f"{state.config}: check id {check['id']!r} is used twice; "
                               "each check needs its own id")
        seen.add(check["id"])
    checks = run_checks(configured, project=state.project,
                        state_root=state.root, log_dir=log_dir or state.runs / "checks",
                        stop=stop, deadline=deadline)
    items = [{**c, "id": f"check:{c['id']}", "kind": "check",
              "title": c["description"] or c["command"]}
             for c in checks if not c["passed"]]
    from clavain.store.graph_db import graph_store_exists, open_graph_db

    if graph_id is not None and graph_store_exists(state):
        from clavain.sprint.headless_gate import refuse_before_execute

        refuse_before_execute(state, graph_id)  # a loop works a sprint's tasks at execute only
        conn = open_graph_db(state)
        try:
            items += runnable_nodes(Graph(conn, graph_id, state))
        finally:
            conn.close()
    items.sort(key=lambda item: PRIORITY_ORDER.get(item["priority"], 1))
    skipped = [item["id"] for item in items if item["id"] in skip]
    return {"items": [item for item in items if item["id"] not in skip], "checks": checks,
            "skipped": skipped}


def _item_lines(number: int, item: dict[str, Any], run_id: str | None) -> list[str]:
    head = f"{number}. [{item['priority'].upper()}] {item['id']} — {item['title']}"
    if item["kind"] == "check":
        how = "timed out" if item["timed_out"] else f"exited {item['exit_code']}"
        lines = [head, f"   Failing: `{item['command']}` {how}."]
        tail = (item.get("tail") or "").strip()[-TAIL_CHARS:]
        if tail:
            lines += ["   ```", *(f"   {line}" for line in tail.splitlines()), "   ```"]
        lines.append(f"   Done when `{item['command']}` passes.")
        return lines
    lines = [head.replace(f" {item['id']} ", f" {item['id']} ({item['type']}) ", 1)]
    if item["verify"]:
        lines.append("   Verify: " + "; ".join(f"`{v}`" for v in item["verify"]))
    if item["ownership"]:
        lines.append("   Owns: " + ", ".join(item["ownership"]))
    run = f" --run-id {run_id}" if run_id else ""
    if item["type"] in ("verify", "final_verify"):
        lines.append(f"   Do: `clavain verify {item['id']}{run}` (records the result itself).")
    else:
        claim = (f"Claim it first: `clavain graph claim {item['id']}{run}` (refused if another "
                 "run works on it). " if run_id else "")
        lines.append(f"   {claim}Context: `clavain graph packet {item['id']}`. When done: "
                     f"`echo '<result>{{\"status\":\"success\",\"summary\":\"…\"}}</result>' | "
                     f"clavain graph apply {item['id']}{run} --result -`")
    return lines


def build_prompt(items: list[dict[str, Any]], *, automation: str,
                 iteration: int | None = None, blocked: list[str] | None = None,
                 previous_error: str | None = None, run_id: str | None = None) -> str:
    from clavain.loop.status_block import template

    title = "# Clavain loop" + (f" — iteration {iteration}" if iteration else "")
    if previous_error:  # said once, so the next agent does not repeat it
        title += (f"\n\nThe last reply's status block was rejected: {previous_error[:300]}. "
                  "End this reply with a valid block (the template below).")
    if not items:
        return "\n".join([
            title, "", EXIT_BEGIN, "STATUS: ALL_PASS", "EXIT_SIGNAL: true", EXIT_END, "",
            "Every check passes and no workgraph node can run. If you agree the work is done, "
            "end with the status block below with EXIT_SIGNAL: true; if you know of work left, "
            "name it in NEXT_RECOMMENDATION with EXIT_SIGNAL: false.", "", template()])
    lines = [title, "", "Pick ONE item below — the one with the most impact — finish it, end "
             "your reply with the status block, and stop. Do not start a second item.", "",
             f"## Work ({len(items)} item{'s' if len(items) != 1 else ''})", ""]
    for number, item in enumerate(items, start=1):
        lines += _item_lines(number, item, run_id)
    if blocked:
        lines += ["", "Skipped (BLOCKED earlier in this run, waiting for a person): "
                  + ", ".join(blocked)]
    lines += ["", f"## Rules (automation: {automation})", ""]
    lines += [f"- {rule}" for rule in RULES[automation]]
    lines += ["- EXIT_SIGNAL: true only when you believe nothing is left; the loop re-runs every "
              "check before it believes you.", "", "## Status block (the last thing you write)",
              "", template("<item id>")]
    return "\n".join(lines) + "\n"


def iterate(state: StatePaths, *, graph_id: str | None, automation: str,
            iteration: int | None = None, skip: frozenset[str] = frozenset(),
            log_dir: Path | None = None, stop: Any = None,
            previous_error: str | None = None, run_id: str | None = None,
            deadline: float | None = None) -> dict[str, Any]:
    """The prompt and what it was built from; `actionable` False means the exit prompt."""
    from clavain.session.token_estimate import estimate_tokens

    if automation not in RULES:
        from clavain.errors import ClavainError

        raise ClavainError(f"automation {automation!r} is not one of {', '.join(RULES)}")
    found = collect(state, graph_id, skip=skip, log_dir=log_dir, stop=stop, deadline=deadline)
    prompt = build_prompt(found["items"], automation=automation, iteration=iteration,
                          blocked=found["skipped"], previous_error=previous_error,
                          run_id=run_id)
    return {"actionable": bool(found["items"]), "items": found["items"],
            "checks": found["checks"], "skipped": found["skipped"], "automation": automation,
            "prompt": prompt, "prompt_tokens_estimate": estimate_tokens(prompt)}
