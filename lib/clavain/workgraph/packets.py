"""Runner packets: the prompt a fresh agent gets for one node, rendered from `templates/<role>.md`.

A packet carries the node's own fields, its input refs (small values inlined) and pointers to the
database; everything else the agent loads on demand (`clavain kv get`). Templates use a tiny
`{{NAME}}` substitution: one pass, so a value that happens to contain `{{…}}` is left alone, and
an unknown name is an error rather than a silent hole in the prompt.
"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Any

from clavain import config as config_mod
from clavain.errors import ClavainError
from clavain.store import queries
from clavain.workgraph import kv
from clavain.workgraph.graphs import Graph

ROLE_BY_TYPE = {
    "plan": "planner",
    "epic": "planner",
    "task": "executor",
    "verify": "verifier",
    "integrate": "integrator",
    "final_verify": "final-verifier",
}
# Roles that work from their own node's fields; plan context only costs them tokens.
THIN_ROLES = frozenset({"executor", "verifier", "integrator"})
# Shared sections, written once and included in every role template.
INCLUDES = {"DB_ACCESS": "_db-access.md", "RESULT": "_result.md"}
CONTEXT_PREFIX = "ctx."

_PLACEHOLDER = re.compile(r"\{\{([A-Z][A-Z0-9_]*)\}\}")


def templates_dir() -> Path:
    """Package data beside this module, so a plain `pip install` has them too."""
    return Path(__file__).resolve().parent / "templates"


def role_for(node_type: str) -> str:
    try:
        return ROLE_BY_TYPE[node_type]
    except KeyError:
        raise ClavainError(f"no packet template for node type {node_type!r}") from None


def substitute(template: str, values: dict[str, str], *, source: str = "template") -> str:
    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise ClavainError(f"{source}: unknown placeholder {{{{{name}}}}}")
        return values[name]

    return _PLACEHOLDER.sub(replace, template)


def read_template(name: str) -> str:
    path = templates_dir() / name
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ClavainError(f"packet template {path} is missing ({exc.strerror})") from exc


def _fenced(text: str) -> str:
    """`text` in a code fence longer than any backtick run inside it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text.rstrip()}\n{fence}"


def _bullets(items: list[Any]) -> str:
    if not items:
        return "  (none)"
    return "\n".join(f"  - {item if isinstance(item, str) else json.dumps(item)}"
                     for item in items)


def answered_question(node: dict[str, Any]) -> list[str]:
    """A person's answer to this node's earlier question: the reason it was reopened, so the
    next runner must see it rather than ask again."""
    asked = node.get("human_question") or {}
    if not isinstance(asked, dict) or not asked.get("answer"):
        return []
    question = str(asked.get("question") or asked.get("summary") or "(not recorded)")
    return ["", "### A person answered this node's earlier question", "", "Question:", "",
            _fenced(question), "", "Answer:", "", _fenced(str(asked["answer"]))]


def node_fields(node: dict[str, Any]) -> str:
    parent = node.get("parent_id") or "(none)"
    depends = ", ".join(node.get("depends_on") or []) or "(none)"
    return "\n".join([
        "## This node",
        "",
        f"- id: `{node['id']}` ({node['type']})",
        f"- title: {node.get('title') or '(untitled)'}",
        f"- parent: {parent}",
        f"- depends on: {depends}",
        "- acceptance:",
        _bullets(list(node.get("acceptance") or [])),
        "- verify commands:",
        _bullets(list(node.get("verify") or [])),
        "- owns files:",
        _bullets(list(node.get("ownership") or [])),
        *answered_question(node),
    ])


def _latest_text(g: Graph, node_id: str, key: str) -> tuple[bool, str | None]:
    """(exists, inline text); text is None when the value lives in an artifact file."""
    row = queries.run(g.conn, "packets.latest_text", (g.id, node_id, key)).fetchone()
    return (False, None) if row is None else (True, row["value_text"])


def _describe_value(node_id: str, key: str, exists: bool, text: str | None,
                    inline_max: int) -> str:
    """Inline a small value; for a large or artifact-backed one, say how to fetch it."""
    if not exists:
        return " not written yet"
    size = None if text is None else len(text.encode("utf-8"))
    if text is not None and size is not None and size <= inline_max:
        return "\n\n" + _fenced(text) + "\n"
    where = "--run" if node_id == kv.RUN_NAMESPACE else f"--node {node_id}"
    kind = "artifact" if size is None else f"{size} bytes"
    return f" large ({kind}), fetch with `clavain kv get {where} --key {key}`"


def inputs_section(g: Graph, inputs: list[dict[str, Any]], inline_max: int) -> str:
    if not inputs:
        return "## Inputs\n\n(none)"
    lines = ["## Inputs", ""]
    for ref in inputs:
        node_id, key = str(ref.get("node_id", "")), str(ref.get("key", ""))
        label = f"`{ref['as']}` = " if ref.get("as") else ""
        body = _describe_value(node_id, key, *_latest_text(g, node_id, key), inline_max)
        lines.append(f"- {label}{node_id} / {key}:{body}")
    return "\n".join(lines).rstrip()


# Roles that take over from many upstream nodes: they get those nodes' summaries as inputs.
GATHERING_ROLES = frozenset({"integrator", "final-verifier"})


def upstream_inputs(g: Graph, node: dict[str, Any]) -> list[dict[str, Any]]:
    """The `out.summary` of every node this one depends on and, for a verify node among them,
    of the task it checked: what an integrate or final-verify node builds on."""
    refs: dict[str, dict[str, Any]] = {}
    for row in queries.run(g.conn, "packets.upstream", (g.id, node["id"])):
        if row["verifies"]:
            refs.setdefault(row["verifies"], {"node_id": row["verifies"], "key": "out.summary",
                                              "as": f"task {row['verifies']}"})
        refs.setdefault(row["id"], {"node_id": row["id"], "key": "out.summary",
                                    "as": f"{row['type']} {row['id']}"})
    return list(refs.values())


def _ancestors(g: Graph, node_id: str) -> list[sqlite3.Row]:
    """Root first. The depth guard keeps a corrupt parent cycle from looping forever."""
    return queries.run(g.conn, "packets.ancestors", (g.id, node_id, g.id)).fetchall()


OMITTED_CONTEXT = ("## Plan context\n\nOmitted (thin packet); "
                   f"`clavain kv ls --run --prefix {CONTEXT_PREFIX}` lists it.")


def context_section(g: Graph, node: dict[str, Any], inline_max: int) -> str:
    """Plan context: the chain of parents and the run's shared `ctx.*` keys."""
    lines = ["## Plan context", ""]
    chain = _ancestors(g, node["id"])
    if chain:
        lines.append("Part of: " + " → ".join(f"{r['id']} ({r['title'] or r['type']})"
                                              for r in chain))
    shared = kv.ls(g, kv.RUN_NAMESPACE, CONTEXT_PREFIX)
    for entry in shared:
        body = _describe_value(kv.RUN_NAMESPACE, entry["key"], True, entry["value"], inline_max)
        lines.append(f"- {kv.RUN_NAMESPACE} / {entry['key']}:{body}")
    if not chain and not shared:
        lines.append("(none recorded)")
    return "\n".join(lines).rstrip()


def build_packet(g: Graph, node: dict[str, Any], *, thin: bool = False) -> dict[str, Any]:
    """Render the packet for a node dict (as `nodes.get_node` returns it)."""
    role = role_for(node["type"])
    inline_max = int(config_mod.get(config_mod.load(g.state.config),
                                    "defaults.kvInlineMaxBytes", 2048))
    context = context_section(g, node, inline_max)
    # Thin drops the context only where that saves something: a one-line context is cheaper
    # than the note saying where it went.
    omit_context = thin and role in THIN_ROLES and len(context) > len(OMITTED_CONTEXT)
    values = {
        "NODE_ID": str(node["id"]),
        # The run that holds the node and its graph: SubagentStop records an executor's result
        # under them.
        "RUN_ID": str(node.get("lock_run_id") or "(not claimed)"),
        "GRAPH_ID": g.id,
        "NODE_FIELDS": node_fields(node),
        "INPUTS": inputs_section(g, list(node.get("inputs") or []) + (
            upstream_inputs(g, node) if role in GATHERING_ROLES else []), inline_max),
        "CONTEXT": OMITTED_CONTEXT if omit_context else context,
    }
    for name, filename in INCLUDES.items():
        values[name] = substitute(read_template(filename), values, source=filename).rstrip()
    text = substitute(read_template(f"{role}.md"), values, source=f"{role}.md")
    return {"node_id": node["id"], "graph_id": g.id, "role": role, "thin": thin,
            "context_omitted": omit_context, "packet": text}


def render_packet(g: Graph, node_id: str, *, thin: bool = False) -> dict[str, Any]:
    """The packet for `node_id`; an unknown node is bad input."""
    from clavain.workgraph.nodes import require_node

    return build_packet(g, require_node(g, node_id), thin=thin)
