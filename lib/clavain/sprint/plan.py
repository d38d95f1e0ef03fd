"""A sprint's plan: the plan step writes a Markdown file whose one ```json block lists the tasks
(`{"nodes": [...]}`, each with its verify commands and owned paths). `sprint done plan --plan PATH`
records it in the sprint's graph and scaffolds the gates (a verify node per task, integrate, the
final verify), so the execute step is `graph next --claim` until the graph is done.

Recording a corrected plan again (after `sprint resume --from-step plan`) is never a silent
no-op: tasks that have not started take their new definition (and their verify node its new
checks), new tasks are added, tasks the plan dropped that never started are removed, and a task
that already ran and whose definition changed is refused by name — its result would no longer
say anything about the plan.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from clavain.errors import ClavainError
from clavain.paths import StatePaths
from clavain.store import queries
from clavain.workgraph.graphs import Graph
from clavain.workgraph.results import PLANNER_MAX_TASKS as MAX_TASKS
from clavain.workgraph.statuses import NodeStatus

_JSON_FENCE = re.compile(r"^```json[ \t]*\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)
# What a plan says about a task, as the database stores it (node JSON keys).
DEFINITION = ("title", "depends_on", "verify", "ownership", "acceptance", "inputs", "runner",
              "retry_policy", "commands")


def plan_document(text: str, where: str) -> dict[str, Any]:
    """The `{"nodes": [...]}` block of a plan, checked for what a sprint's plan must hold."""
    from clavain.textio import BadText, load_json

    blocks = [block for block in _JSON_FENCE.findall(text) if '"nodes"' in block]
    if len(blocks) != 1:
        raise ClavainError(f"{where}: a plan holds exactly one ```json block with "
                           f'{{"nodes": [...]}} (found {len(blocks)}); see the writing-plans '
                           "skill")
    try:
        document = load_json(blocks[0], f"{where} (the nodes block)")
    except BadText as exc:
        raise ClavainError(str(exc)) from None
    nodes = document.get("nodes") if isinstance(document, dict) else None
    if not isinstance(nodes, list) or not 1 <= len(nodes) <= MAX_TASKS:
        raise ClavainError(f"{where}: the plan lists 1 to {MAX_TASKS} tasks in \"nodes\"")
    for index, node in enumerate(nodes):
        label = node.get("id", f"nodes[{index}]") if isinstance(node, dict) else f"[{index}]"
        if not isinstance(node, dict) or node.get("type", "task") != "task":
            raise ClavainError(f"{where}: {label}: a plan lists tasks only (type task); "
                               "Clavain adds the verify, integrate and final gates itself")
        for field, what in (("verify", "a shell command that checks it"),
                            ("ownership", "a path glob it owns")):
            if not node.get(field):
                raise ClavainError(f"{where}: task {label!r} needs at least one {field} entry "
                                   f"({what})")
        node.setdefault("type", "task")
    return document


def read_plan(state: StatePaths, plan_path: str) -> list[dict[str, Any]]:
    """The plan's task specs, checked (shape, runners) before anything is written."""
    from clavain.textio import BadText, decode
    from clavain.workgraph.edits import check_specs

    path = Path(plan_path)
    if not path.is_absolute():
        path = state.project / path
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ClavainError(f"plan {plan_path}: {exc.strerror or exc}") from None
    try:
        document = plan_document(decode(raw, plan_path), plan_path)
    except BadText as exc:
        raise ClavainError(str(exc)) from None
    check_specs(state, document["nodes"])
    return document["nodes"]


def record_plan(g: Graph, plan_path: str) -> dict[str, Any]:
    """Record the plan in the sprint's graph in one transaction (module docstring). Returns
    {"added", "updated": {id: [fields]}, "removed", "unchanged"}."""
    from clavain import config as config_mod
    from clavain.clock import now_iso
    from clavain.store.db import transaction
    from clavain.workgraph.export import after_commit
    from clavain.workgraph.nodes import get_node, insert_nodes, validate_specs
    from clavain.workgraph.scaffold import scaffold_in_transaction

    specs = read_plan(g.state, plan_path)
    models = {model.id: model for model in validate_specs(specs)}
    cfg = config_mod.load(g.state.config)
    at = now_iso()
    report: dict[str, Any] = {"added": [], "updated": {}, "removed": [], "unchanged": []}
    with transaction(g.conn):
        existing = {node_id: get_node(g, node_id) for node_id in models}
        ran, changes = [], {}
        for node_id, model in models.items():
            node = existing[node_id]
            if node is None:
                continue
            if node["type"] != "task":
                raise ClavainError(f"plan task {node_id!r}: the sprint's graph already has a "
                                   f"node of type {node['type']} with that id; rename the task")
            changed = _changed_fields(node, model, cfg)
            if not changed:
                report["unchanged"].append(node_id)
            elif _started(g, node):
                ran.append((node_id, changed))
            else:
                changes[node_id] = changed
        dropped = _dropped_tasks(g, set(models))
        ran += [(node_id, ["dropped from the plan"]) for node_id in dropped
                if _started(g, get_node(g, node_id))]
        if ran:
            node_id, fields = ran[0]
            more = f" (and {len(ran) - 1} more)" if len(ran) > 1 else ""
            raise ClavainError(
                f"task {node_id!r} already started, and the plan changes it "
                f"({', '.join(fields)})"
                f"{more}; a started task keeps its definition: give the new work a new task "
                "id, or `clavain graph reset` it first if it must run again")
        for node_id in dropped:
            _remove_task(g, node_id, at)
        report["removed"] = dropped
        for node_id in changes:
            _update_task(g, models[node_id], cfg, at)
        report["updated"] = changes
        fresh = [model for node_id, model in models.items() if existing[node_id] is None]
        if fresh:
            report["added"] = insert_nodes(g, cfg, fresh, at=at, note="added by the plan")
        scaffold_in_transaction(g, cfg, at)
        if changes or dropped:
            _refresh_gates(g, at)
    after_commit(g, cfg)
    return report


def _stored(model: Any, cfg: dict[str, Any]) -> dict[str, Any]:
    """A spec's definition as `nodes.get_node` shows it."""
    from clavain import config as config_mod
    from clavain.workgraph.nodes import stored_input

    attempts = (model.retryPolicy.maxAttempts if model.retryPolicy
                else int(config_mod.get(cfg, "defaults.maxAttempts", 3)))
    return {"title": model.title, "depends_on": sorted(set(model.dependsOn)),
            "verify": list(model.verify), "ownership": list(model.ownership),
            "acceptance": list(model.acceptance),
            "inputs": [stored_input(ref) for ref in model.inputs], "runner": model.runner,
            "retry_policy": {"max_attempts": attempts}, "commands": list(model.commands)}


def _changed_fields(node: dict[str, Any], model: Any, cfg: dict[str, Any]) -> list[str]:
    wanted = _stored(model, cfg)
    have = {**{key: node[key] for key in DEFINITION}, "depends_on": sorted(node["depends_on"])}
    return [key for key in DEFINITION if have[key] != wanted[key]]


def _started(g: Graph, node: dict[str, Any]) -> bool:
    """Whether a runner ever held the task (or it left `open` any other way)."""
    if node["status"] != NodeStatus.OPEN or node["attempts"]:
        return True
    return queries.run(g.conn, "sprint_plan.task_started",
                       (g.id, node["id"])).fetchone() is not None


def _dropped_tasks(g: Graph, planned: set[str]) -> list[str]:
    """Top-level tasks of the graph (the plan's, not those a runner added) the plan no longer
    lists."""
    rows = queries.run(g.conn, "sprint_plan.top_level_tasks", (g.id,)).fetchall()
    return [row[0] for row in rows if row[0] not in planned]


def _verify_nodes(g: Graph, task_id: str) -> list[str]:
    return [row[0] for row in queries.run(g.conn, "sprint_plan.verify_nodes_of",
                                          (g.id, task_id))]


def _remove_task(g: Graph, task_id: str, at: str) -> None:
    """A task that never started leaves the graph with its scaffolded verify node."""
    from clavain.workgraph.nodes import record_event

    dependents = [row[0] for row in queries.run(g.conn, "sprint_plan.dependents",
                                                (g.id, task_id))
                  if row[0] not in _verify_nodes(g, task_id)]
    if dependents:
        raise ClavainError(f"the plan drops task {task_id!r}, but {dependents[0]!r} still "
                           "depends on it; keep the task or drop that dependency too")
    for node_id in [*_verify_nodes(g, task_id), task_id]:
        # Its context goes too: a task added again under this id starts with none.
        queries.run(g.conn, "sprint_plan.delete_kv_latest", (g.id, node_id))
        queries.run(g.conn, "sprint_plan.delete_kv_history", (g.id, node_id))
        queries.run(g.conn, "sprint_plan.delete_node", (g.id, node_id))
        record_event(g, node_id, NodeStatus.OPEN, None, at=at,
                     note="removed: the plan dropped it")


def _update_task(g: Graph, model: Any, cfg: dict[str, Any], at: str) -> None:
    """The task (and its verify node, which has not run either) take the new definition."""
    from clavain.workgraph.nodes import record_event

    wanted = _stored(model, cfg)
    queries.run(
        g.conn, "sprint_plan.update_task",
        (wanted["title"], json.dumps(wanted["verify"]), json.dumps(wanted["ownership"]),
         json.dumps(wanted["acceptance"]), json.dumps(wanted["inputs"]), wanted["runner"],
         json.dumps(wanted["retry_policy"]), json.dumps(wanted["commands"]), at, g.id,
         model.id))
    have = {row[0] for row in queries.run(g.conn, "sprint_plan.depends_on", (g.id, model.id))}
    for gone in have - set(wanted["depends_on"]):
        queries.run(g.conn, "sprint_plan.delete_dep", (g.id, model.id, gone))
    missing = [dep for dep in wanted["depends_on"] if dep not in have]
    known = {row[0] for row in queries.run(g.conn, "sprint_plan.known_nodes",
                                           (g.id, json.dumps(missing)))} if missing else set()
    for dep in missing:
        if dep not in known:
            raise ClavainError(f"plan task {model.id!r} depends on unknown node {dep!r}")
        queries.run(g.conn, "sprint_plan.add_dep", (g.id, model.id, dep))
    _refuse_cycle(g, model.id)
    for verify_id in _verify_nodes(g, model.id):
        queries.run(
            g.conn, "sprint_plan.update_verify_node",
            (f"Verify {wanted['title'] or model.id}", json.dumps(wanted["verify"]),
             json.dumps(wanted["acceptance"]), at, g.id, verify_id))
    record_event(g, model.id, NodeStatus.OPEN, NodeStatus.OPEN, at=at,
                 note="definition updated by the plan")


def _refuse_cycle(g: Graph, node_id: str) -> None:
    looped = queries.run(g.conn, "sprint_plan.in_cycle",
                         (g.id, node_id, g.id, node_id)).fetchone()
    if looped:
        raise ClavainError(f"plan task {node_id!r} is in a dependency cycle; drop one of its "
                           "dependencies")


def _refresh_gates(g: Graph, at: str) -> None:
    """The final gate re-runs exactly the plan's checks as they are now; a gate that already
    ran runs again."""
    from clavain.workgraph.nodes import reopen
    from clavain.workgraph.scaffold import gather_final_checks, singleton

    final = singleton(g, "final_verify")
    if final is not None and gather_final_checks(g, final["id"], at, rebuild=True) and \
            final["status"] in (NodeStatus.DONE, NodeStatus.FAILED):
        reopen(g, final["id"], final["status"], at=at, note="the plan's checks changed")
