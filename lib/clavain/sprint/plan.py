"""The plan step's output, imported into the workgraph: a markdown plan holds one fenced ```json
block `{"nodes": [...]}` (the format of `schemas/node.schema.json`) listing 1–6 task nodes, each
with its verify commands and the paths it owns. `clavain sprint done plan --plan PATH` imports
them and scaffolds their gates (a verify node per task, integrate, final verify), so the
execute step is `graph next --claim` until the graph is done.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from clavain.errors import ClavainError
from clavain.paths import StatePaths

MAX_TASKS = 6
_JSON_FENCE = re.compile(r"^```json[ \t]*\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)


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


def import_plan(state: StatePaths, plan_path: str) -> list[str]:
    """Import the plan's tasks and scaffold their gates; tasks imported before (the plan step
    recorded again) are left as they are. Returns the ids added."""
    from clavain.project import ensure_state
    from clavain.store.db import connect
    from clavain.workgraph import graph
    from clavain.workgraph.nodes import existing_ids
    from clavain.workgraph.scaffold import ensure_scaffolding

    path = Path(plan_path)
    if not path.is_absolute():
        path = state.project / path
    try:
        text = path.read_bytes()
    except OSError as exc:
        raise ClavainError(f"plan {plan_path}: {exc.strerror or exc}") from None
    from clavain.textio import BadText, decode

    try:
        document = plan_document(decode(text, plan_path), plan_path)
    except BadText as exc:
        raise ClavainError(str(exc)) from None
    graph.check_specs(state, document["nodes"])
    conn = connect(ensure_state(state).db)
    try:
        known = existing_ids(conn, [node["id"] for node in document["nodes"]])
        fresh = [node for node in document["nodes"] if node["id"] not in known]
        added = graph.add_nodes(conn, state, fresh) if fresh else []
        ensure_scaffolding(conn, state)
    finally:
        conn.close()
    return added
