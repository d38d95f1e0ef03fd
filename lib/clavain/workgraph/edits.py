"""Changing a workgraph by hand (people, the CLI, a sprint's plan import): add nodes, import a
plan, answer a node's question, reset a node. Each is one transaction; each refreshes the
snapshot after it commits (`export.after_commit`).

Tasks that join a graph that is already scaffolded get their verify node in the same
transaction, so "every task has a verify node before integration" holds whoever adds them.
"""

from __future__ import annotations

import json
from typing import Any

from clavain import config as config_mod
from clavain.clock import now_iso
from clavain.errors import ClavainError
from clavain.paths import StatePaths
from clavain.store import queries
from clavain.store.db import transaction
from clavain.workgraph.export import after_commit
from clavain.workgraph.graphs import CLOSED, Graph
from clavain.workgraph.graphs import get as get_graph
from clavain.workgraph.nodes import (
    check_runners,
    get_node,
    insert_nodes,
    record_event,
    reopen,
    require_node,
    validate_specs,
)
from clavain.workgraph.scaffold import scaffold_in_transaction, singleton
from clavain.workgraph.statuses import NodeStatus


def check_specs(state: StatePaths, specs: list[dict[str, Any]]) -> list[Any]:
    """Everything about `specs` that needs no database (shape, runner names), so bad input is
    refused before anything — even the state folder — is created."""
    models = validate_specs(specs)
    check_runners(config_mod.load(state.config), models)
    return models


def add_nodes(g: Graph, specs: list[dict[str, Any]], *,
              parent_id: str | None = None) -> list[str]:
    """Validate and add `specs` in one transaction: all of them, or none and a ClavainError."""
    models = validate_specs(specs)
    cfg = config_mod.load(g.state.config)
    at = now_iso()
    with transaction(g.conn):
        if parent_id is not None:
            require_node(g, parent_id)
        added = insert_nodes(g, cfg, models, parent_id=parent_id, at=at)
        if is_scaffolded(g) and any(spec.type == "task" for spec in models):
            scaffold_in_transaction(g, cfg, at)
    if len(added) >= BULK_ROWS:
        refresh_statistics(g)
    after_commit(g, cfg)
    return added


# A batch this large changes the tables' shape enough that a server's planner should know now,
# not at its next automatic ANALYZE (a minute away): claims right after a big plan stay on the
# ready index.
BULK_ROWS = 1000


def refresh_statistics(g: Graph) -> None:
    queries.run(g.conn, "edits.refresh_statistics")  # nothing to do on SQLite


def is_scaffolded(g: Graph) -> bool:
    """Whether the graph has its integrate node (tasks added later get their gates at once)."""
    return singleton(g, "integrate") is not None


def import_specs(document: Any) -> list[Any]:
    """The node specs of an import document, checking its shape (schemas/node.schema.json)."""
    if not isinstance(document, dict) or not isinstance(document.get("nodes"), list):
        raise ClavainError('the import file must be a JSON object {"nodes": [...]} '
                           "(schemas/node.schema.json)")
    extra = sorted(set(document) - {"nodes", "version"})
    if extra:
        raise ClavainError(f"unexpected top-level key {extra[0]!r} in the import file "
                           "(allowed: nodes, version)")
    return document["nodes"]


def import_nodes(g: Graph, document: Any) -> list[str]:
    """`{"nodes": [...]}` as read by `clavain graph import`."""
    return add_nodes(g, import_specs(document))


def answer(g: Graph, node_id: str, text: str) -> dict[str, Any]:
    """A needs_human node goes back to open with the answer kept beside its question."""
    if not text.strip():
        raise ClavainError("the answer is empty")
    at = now_iso()
    with transaction(g.conn):
        node = require_node(g, node_id)
        if node["status"] != NodeStatus.NEEDS_HUMAN:
            raise ClavainError(f"node {node_id!r} is {node['status']}, not needs_human; "
                               "only a node that asked a question takes an answer")
        question = {**(node["human_question"] or {}), "answer": text, "answered_at": at}
        queries.run(g.conn, "edits.answer", (json.dumps(question), at, g.id, node_id))
        record_event(g, node_id, NodeStatus.NEEDS_HUMAN, NodeStatus.OPEN, at=at, note="answered")
        node = get_node(g, node_id)
    after_commit(g)
    return node


def reset(g: Graph, node_id: str) -> dict[str, Any]:
    """Reopen any node by hand (a failed one to retry, a done one to redo). A failed node's
    escalation that no planner holds yet is closed: the node runs again first."""
    from clavain.workgraph.escalation import close_pending

    at = now_iso()
    with transaction(g.conn):
        node = require_node(g, node_id)
        if node["status"] == NodeStatus.CANCELLED:
            raise ClavainError(f"node {node_id!r} was cancelled with its sprint's graph; it "
                               "does not run again")
        closed = (get_graph(g.conn, g.id) or {}).get("status")
        if closed in CLOSED:
            raise ClavainError(f"graph {g.id!r} was {closed}: its sprint is over and its nodes "
                               "do not run again; start a new sprint, or use another graph")
        if node["superseded_by"]:
            raise ClavainError(f"node {node_id!r} was replaced by what {node['superseded_by']} "
                               "added; reset those nodes instead")
        reopen(g, node_id, node["status"], at=at, note=f"reset by hand (was {node['status']})")
        if node["status"] == NodeStatus.FAILED:
            close_pending(g, node_id, at=at, why="was reset by hand")
        node = get_node(g, node_id)
    after_commit(g)
    return node
