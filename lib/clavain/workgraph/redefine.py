"""A node that has not started takes a new definition: what a sprint's plan recorded again
(`sprint.plan.record_plan`) and an import run again (`workgraph.imports`) share. A node that
already ran keeps its definition — its result would no longer say anything about the new one —
so the callers refuse a change to it by name; `started` says which is which.

SQL only: every function runs inside the caller's transaction.
"""

from __future__ import annotations

import json
from typing import Any

from clavain.errors import ClavainError
from clavain.store import queries
from clavain.workgraph.graphs import Graph
from clavain.workgraph.statuses import NodeStatus

# What a spec says about a node, as the database stores it (node JSON keys).
DEFINITION = ("title", "depends_on", "verify", "ownership", "acceptance", "inputs", "runner",
              "retry_policy", "commands")


def stored(model: Any, cfg: dict[str, Any]) -> dict[str, Any]:
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


def changed_fields(node: dict[str, Any], model: Any, cfg: dict[str, Any]) -> list[str]:
    """The DEFINITION keys where the stored node and the spec differ, in that order."""
    wanted = stored(model, cfg)
    have = {**{key: node[key] for key in DEFINITION}, "depends_on": sorted(node["depends_on"])}
    return [key for key in DEFINITION if have[key] != wanted[key]]


def started(g: Graph, node: dict[str, Any]) -> bool:
    """Whether a runner ever held the node (or it left `open` any other way)."""
    if node["status"] != NodeStatus.OPEN or node["attempts"]:
        return True
    return queries.run(g.conn, "redefine.task_started", (g.id, node["id"])).fetchone() is not None


def refuse_started(ran: list[tuple[str, list[str]]], *, noun: str, changer: str,
                   new_id: str) -> None:
    """Refuse, by name, changes to nodes that already started (`ran`: id and what changes):
    `noun` names the node ("task"), `changer` what changes it ("the plan"), `new_id` where the
    new work goes instead ("the new work a new task id")."""
    if not ran:
        return
    node_id, fields = ran[0]
    more = f" (and {len(ran) - 1} more)" if len(ran) > 1 else ""
    raise ClavainError(
        f"{noun} {node_id!r} already started, and {changer} changes it ({', '.join(fields)})"
        f"{more}; a started {noun} keeps its definition: give {new_id}, or `clavain graph "
        f"reset` the {noun} first if it must run again")


def update(g: Graph, model: Any, cfg: dict[str, Any], *, at: str, who: str,
           note: str) -> None:
    """The node (and its verify node, which has not run either) take the new definition.
    `who` names the node in a refusal ("plan task"); `note` is the event's."""
    from clavain.workgraph.nodes import record_event

    wanted = stored(model, cfg)
    queries.run(
        g.conn, "redefine.update_task",
        (wanted["title"], json.dumps(wanted["verify"]), json.dumps(wanted["ownership"]),
         json.dumps(wanted["acceptance"]), json.dumps(wanted["inputs"]), wanted["runner"],
         json.dumps(wanted["retry_policy"]), json.dumps(wanted["commands"]), at, g.id,
         model.id))
    have = {row[0] for row in queries.run(g.conn, "redefine.depends_on", (g.id, model.id))}
    for gone in have - set(wanted["depends_on"]):
        queries.run(g.conn, "redefine.delete_dep", (g.id, model.id, gone))
    missing = [dep for dep in wanted["depends_on"] if dep not in have]
    known = {row[0] for row in queries.run(g.conn, "redefine.known_nodes",
                                           (g.id, json.dumps(missing)))} if missing else set()
    for dep in missing:
        if dep not in known:
            raise ClavainError(f"{who} {model.id!r} depends on unknown node {dep!r}")
        queries.run(g.conn, "redefine.add_dep", (g.id, model.id, dep))
    refuse_cycle(g, model.id, who=who)
    for verify_id in verify_nodes(g, model.id):
        queries.run(
            g.conn, "redefine.update_verify_node",
            (f"Verify {wanted['title'] or model.id}", json.dumps(wanted["verify"]),
             json.dumps(wanted["acceptance"]), at, g.id, verify_id))
    record_event(g, model.id, NodeStatus.OPEN, NodeStatus.OPEN, at=at, note=note)


def verify_nodes(g: Graph, task_id: str) -> list[str]:
    return [row[0] for row in queries.run(g.conn, "redefine.verify_nodes_of", (g.id, task_id))]


def refuse_cycle(g: Graph, node_id: str, *, who: str) -> None:
    looped = queries.run(g.conn, "redefine.in_cycle",
                         (g.id, node_id, g.id, node_id)).fetchone()
    if looped:
        raise ClavainError(f"{who} {node_id!r} is in a dependency cycle; drop one of its "
                           "dependencies")
