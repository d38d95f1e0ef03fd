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

import shlex
from pathlib import Path
from typing import Any

from clavain.errors import ClavainError
from clavain.paths import StatePaths
from clavain.plans.nodes_block import nodes_blocks
from clavain.store import queries
from clavain.workgraph.graphs import Graph
from clavain.workgraph.results import PLANNER_MAX_TASKS as MAX_TASKS
from clavain.workgraph.statuses import NodeStatus


def plan_document(text: str, where: str) -> dict[str, Any]:
    """The `{"nodes": [...]}` block of a plan, checked for what a sprint's plan must hold."""
    from clavain.textio import BadText, load_json

    blocks = nodes_blocks(text)
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


def record_plan(g: Graph, plan_path: str, *,
                accepted_by: dict[str, Any] | None = None) -> dict[str, Any]:
    """Record the plan in the sprint's graph in one transaction (module docstring), once plan
    lint passed it: an error refuses it (`PlanRefused`, nothing written) unless a person
    accepted the findings (`accepted_by`, their provenance). Returns {"added", "updated": {id:
    [fields]}, "removed", "unchanged"}, and "lint": [finding JSON] when lint found anything
    (warnings, or every finding when accepted)."""
    from clavain import config as config_mod
    from clavain.clock import now_iso
    from clavain.store.db import transaction
    from clavain.workgraph.export import after_commit
    from clavain.workgraph.nodes import get_node, insert_nodes, validate_specs
    from clavain.workgraph.redefine import refuse_started, started
    from clavain.workgraph.scaffold import scaffold_in_transaction

    specs = read_plan(g.state, plan_path)
    models = {model.id: model for model in validate_specs(specs)}
    cfg = config_mod.load(g.state.config)
    shown = _lint(g, specs, cfg, plan_path, accepted_by)
    at = now_iso()
    report: dict[str, Any] = {"added": [], "updated": {}, "removed": [], "unchanged": []}
    if shown:
        report["lint"] = [finding.to_json() for finding in shown]
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
            elif started(g, node):
                ran.append((node_id, changed))
            else:
                changes[node_id] = changed
        dropped = _dropped_tasks(g, set(models))
        ran += [(node_id, ["dropped from the plan"]) for node_id in dropped
                if started(g, get_node(g, node_id))]
        refuse_started(ran, noun="task", changer="the plan",
                       new_id="the new work a new task id")
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


def _lint(g: Graph, specs: list[dict[str, Any]], cfg: dict[str, Any], plan_path: str,
          accepted_by: dict[str, Any] | None) -> list[Any]:
    """The plan's findings to show; `PlanRefused` (naming how a person records it anyway) when
    it has errors and nobody accepted them."""
    from clavain.plans.findings import PlanRefused, judge
    from clavain.plans.graph_lint import lint_for_graph

    try:
        return judge(lint_for_graph(g, specs, cfg), accepted_by=accepted_by)
    except PlanRefused as exc:
        first, _, rest = str(exc).partition("\n")
        exc.args = (f"{plan_path}: {first.rstrip(':')} (a person may record it anyway: "
                    f"{accept_lint_hint(plan_path)}):\n{rest}",)
        raise


def accept_lint_hint(plan_path: str | None) -> str:
    """What a person types to record a plan with its lint findings accepted."""
    plan = shlex.quote(plan_path) if plan_path else "PLAN"
    return (f"`/clavain:sprint --accept-lint {plan} REASON` in Claude Code, `clavain sprint done "
            f"plan --plan {plan} --accept-lint REASON` in a terminal")


def check_accept_lint(step: str, reason: str, decided_by: dict[str, Any] | None,
                      plan_path: str | None) -> None:
    """`--accept-lint REASON`: only with step plan, with a reason, and a person's decision
    (docs/THREAT_MODEL.md): refused to an agent with what the person types."""
    from clavain.authority import refusal

    if step != "plan":
        raise ClavainError(f"--accept-lint goes with step plan (it records a plan whose lint "
                           f"found errors), not step {step}")
    if not reason.strip():
        raise ClavainError("--accept-lint needs a reason (--accept-lint \"why the findings are "
                           "acceptable\")")
    if decided_by is None:
        plan = shlex.quote(plan_path) if plan_path else "PLAN"
        raise refusal(
            "recording a plan with lint errors (--accept-lint)",
            in_claude_code=f"/clavain:sprint --accept-lint {plan} REASON",
            in_terminal=f"clavain sprint done plan --plan {plan} --accept-lint REASON")


def with_lint_acceptance(checkpoint: dict[str, Any], findings: list[dict[str, Any]],
                         reason: str | None, decided_by: dict[str, Any] | None,
                         at: str) -> dict[str, Any]:
    """The checkpoint's `plan_lint` for the plan just recorded: the findings a person accepted
    (those of a plan with errors), why and by whom; none when the plan needed no acceptance
    (a corrected plan replaces what was accepted for the one before)."""
    updated = {key: value for key, value in checkpoint.items() if key != "plan_lint"}
    if reason is not None and any(f["severity"] == "error" for f in findings):
        updated["plan_lint"] = {"accepted": findings, "reason": " ".join(reason.split()),
                                "decided_by": decided_by, "at": at}
    return updated


def _changed_fields(node: dict[str, Any], model: Any, cfg: dict[str, Any]) -> list[str]:
    from clavain.workgraph.redefine import changed_fields

    return changed_fields(node, model, cfg)


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
    from clavain.workgraph.redefine import update

    update(g, model, cfg, at=at, who="plan task", note="definition updated by the plan")


def _refresh_gates(g: Graph, at: str) -> None:
    """The final gate re-runs exactly the plan's checks as they are now; a gate that already
    ran runs again."""
    from clavain.workgraph.nodes import reopen
    from clavain.workgraph.scaffold import gather_final_checks, singleton

    final = singleton(g, "final_verify")
    if final is not None and gather_final_checks(g, final["id"], at, rebuild=True) and \
            final["status"] in (NodeStatus.DONE, NodeStatus.FAILED):
        reopen(g, final["id"], final["status"], at=at, note="the plan's checks changed")
