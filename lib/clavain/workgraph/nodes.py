"""Workgraph rows: read nodes, validate and insert new ones, record events, reopen a node.

SQL only: every function runs inside the caller's transaction (or reads outside one), on one
graph (`graphs.Graph`): every statement is scoped by its id. The user-facing operations that
open a transaction, keep scaffolding whole and refresh the snapshot are in `edits` (people and
agents adding work), `results` (runner results), `claims` (claims) and `schedule` (what runs
next). Readiness is `nodes.unmet_deps = 0`, kept by triggers (migrations 0001, 0004).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from clavain import config as config_mod
from clavain.errors import ClavainError
from clavain.store import queries
from clavain.textio import storable, storable_tree
from clavain.workgraph.cycles import find_cycle
from clavain.workgraph.graphs import Graph, ensure
from clavain.workgraph.statuses import NodeStatus

# Only one of each: scaffolding owns them, so an added second one is refused.
SINGLETON_TYPES = ("integrate", "final_verify")


def record_event(g: Graph, node_id: str, from_status: str | None, to_status: str | None, *,
                 at: str, run_id: str | None = None, note: str = "") -> None:
    queries.run(g.conn, "nodes.record_event",
                (g.id, node_id, from_status, to_status, run_id, at, storable(note)))


# ---------------------------------------------------------------- reading

def get_node(g: Graph, node_id: str) -> dict[str, Any] | None:
    """Every column (JSON columns decoded, snake_case keys) plus `depends_on`, or None."""
    row = queries.run(g.conn, "nodes.get", (g.id, node_id)).fetchone()
    return json.loads(row[0]) if row else None


def require_node(g: Graph, node_id: str) -> dict[str, Any]:
    node = get_node(g, node_id)
    if node is None:
        raise ClavainError(f"unknown node {node_id!r} in graph {g.id!r}; `clavain graph ls` "
                           "lists its nodes (`--all`: every graph's)")
    return node


def list_nodes(g: Graph, status: str | None = None) -> list[dict[str, Any]]:
    """The graph's nodes (or those with `status`), in selection order."""
    rows = (queries.run(g.conn, "nodes.list_with_status", (g.id, status)) if status
            else queries.run(g.conn, "nodes.list", (g.id,))).fetchall()
    return [json.loads(r[0]) for r in rows]


def list_all_nodes(conn: sqlite3.Connection, status: str | None = None) -> list[dict[str, Any]]:
    """Every graph's nodes (each with its `graph_id`), graph by graph, in selection order."""
    rows = (queries.run(conn, "nodes.list_all_with_status", (status,)) if status
            else queries.run(conn, "nodes.list_all")).fetchall()
    return [json.loads(r[0]) for r in rows]


def existing_ids(g: Graph, ids: Iterable[str]) -> set[str]:
    wanted = list(dict.fromkeys(ids))
    if not wanted:
        return set()
    return {r[0] for r in queries.run(g.conn, "nodes.existing_ids", (g.id, json.dumps(wanted)))}


# ---------------------------------------------------------------- adding

def validate_specs(specs: Sequence[dict[str, Any]]) -> list[Any]:
    """Pydantic-validate raw specs; the first problem becomes one line naming the node."""
    from pydantic import ValidationError

    from clavain.models.node import NodeSpec

    if not isinstance(specs, (list, tuple)):
        raise ClavainError("nodes must be a JSON array of node objects")
    specs = [storable_tree(spec)[0] for spec in specs]  # NUL and lone surrogates, visibly
    models = []
    for index, spec in enumerate(specs):
        label = spec.get("id") if isinstance(spec, dict) else None
        name = f"node {label!r}" if isinstance(label, str) else f"nodes[{index}]"
        try:
            models.append(NodeSpec.model_validate(spec))
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or "node"
            raise ClavainError(f"{name}: {where}: {err['msg']}{_hint(err, NodeSpec)}") from None
    return models


# Keys people reach for that the node format spells otherwise.
_SYNONYMS = {"deps": "dependsOn", "depends_on": "dependsOn", "dependencies": "dependsOn",
             "depends": "dependsOn", "owns": "ownership", "files": "ownership",
             "checks": "verify", "tests": "verify", "cmds": "commands", "run": "commands",
             "retry_policy": "retryPolicy"}


def _hint(err: Any, model: Any) -> str:
    """For an unknown key, the field that was probably meant."""
    if err.get("type") != "extra_forbidden" or len(err["loc"]) != 1:  # top-level keys only
        return ""
    import difflib

    key = str(err["loc"][-1])
    fields = [info.alias or name for name, info in model.model_fields.items()]
    guess = _SYNONYMS.get(key) or next(iter(difflib.get_close_matches(key, fields, n=1)), None)
    return f" (did you mean {guess!r}?)" if guess else f" (fields: {', '.join(fields)})"


def _check_batch(g: Graph, models: list[Any], parent_id: str | None) -> None:
    """Everything that would make the batch wrong, before a single row is written."""
    seen: set[str] = set()
    for spec in models:
        if spec.id in seen:
            raise ClavainError(f"duplicate node id {spec.id!r} in the batch")
        seen.add(spec.id)
    taken = existing_ids(g, seen)
    if taken:
        raise ClavainError(f"node {sorted(taken)[0]!r} already exists in graph {g.id!r}; pick "
                           "another id")
    outside = {d for s in models for d in s.dependsOn if d not in seen}
    parents = {} if parent_id else {s.id: s.parent for s in models if s.parent}
    outside |= {p for p in parents.values() if p not in seen}
    known = existing_ids(g, outside)
    for spec in models:
        for dep in spec.dependsOn:
            if dep not in seen and dep not in known:
                raise ClavainError(f"node {spec.id!r} depends on unknown node {dep!r}")
        parent = parents.get(spec.id)
        if parent and parent not in seen and parent not in known:
            raise ClavainError(f"node {spec.id!r} has unknown parent {parent!r}")
    cycle = find_cycle({s.id: [d for d in s.dependsOn if d in seen] for s in models})
    if cycle:
        raise ClavainError(f"node {cycle[0]!r} is in a dependency cycle: {' -> '.join(cycle)}")
    for kind in SINGLETON_TYPES:
        adding = [s.id for s in models if s.type == kind]
        present = queries.run(g.conn, "nodes.first_of_type", (g.id, kind)).fetchone()
        if len(adding) + (1 if present else 0) > 1:
            raise ClavainError(
                f"node {adding[-1]!r}: the graph keeps exactly one {kind} node "
                "(`clavain graph scaffold` creates it); add tasks instead")


# Runners Clavain itself provides; projects add theirs under `runners` in .clavain/config.json.
BUILTIN_RUNNERS = ("shellVerify", "shell", "claude")


def runner_names(cfg: dict[str, Any]) -> list[str]:
    configured = config_mod.get(cfg, "runners", {})
    return [*BUILTIN_RUNNERS, *sorted(r for r in (configured if isinstance(configured, dict)
                                                    else {}) if r not in BUILTIN_RUNNERS)]


def check_runners(cfg: dict[str, Any], models: list[Any]) -> None:
    known = runner_names(cfg)
    for spec in models:
        if spec.runner is not None and spec.runner not in known:
            raise ClavainError(f"node {spec.id!r}: unknown runner {spec.runner!r} "
                               f"(configured runners: {', '.join(known)})")


def stored_input(ref: Any) -> dict[str, str]:
    """A spec's input reference as stored and shown (snake_case, `as` only when given)."""
    stored = {"node_id": ref.nodeId, "key": ref.key}
    if ref.as_:
        stored["as"] = ref.as_
    return stored


def stored_origin(spec: Any) -> str | None:
    """A spec's origin as stored (`origin_json`, snake_case as the spec writes it; keys left
    at their defaults are left out), or None."""
    origin = getattr(spec, "origin", None)
    return json.dumps(origin.model_dump(exclude_defaults=True)) if origin is not None else None


def _dumps(items: list[Any]) -> str:
    return json.dumps(items) if items else "[]"  # most lists are empty; skip the encoder


def insert_nodes(g: Graph, cfg: dict[str, Any], models: list[Any], *,
                 parent_id: str | None = None, at: str, run_id: str | None = None,
                 dep_kind: dict[tuple[str, str], str] | None = None,
                 note: str | None = None) -> list[str]:
    """Check and insert validated specs into the graph (made if new; a closed graph refuses).
    SQL only: the caller holds the transaction."""
    conn = g.conn
    ensure(conn, g.id, at=at)
    _check_batch(g, models, parent_id)
    check_runners(cfg, models)
    max_attempts = int(config_mod.get(cfg, "defaults.maxAttempts", 3))
    verify_runner = config_mod.get(cfg, "defaults.verifyRunner")
    # Parents may come later in the batch; checked at COMMIT (reset automatically then).
    queries.run(conn, "store.defer_foreign_keys")
    default_policy = json.dumps({"max_attempts": max_attempts})
    rows, edges = [], []
    for s in models:
        runner = s.runner or (verify_runner if s.type == "verify" else None)
        policy = (json.dumps({"max_attempts": s.retryPolicy.maxAttempts}) if s.retryPolicy
                  else default_policy)
        rows.append((
            g.id, s.id, s.title, s.type, parent_id or s.parent, runner,
            _dumps([stored_input(i) for i in s.inputs]),
            _dumps(s.ownership), _dumps(s.acceptance), _dumps(s.verify),
            _dumps(list(getattr(s, "commands", None) or [])), policy, at, at,
            stored_origin(s),
        ))
        edges += [(g.id, s.id, d, (dep_kind or {}).get((s.id, d), "done"))
                  for d in dict.fromkeys(s.dependsOn)]
    queries.run_many(conn, "nodes.insert", rows)
    queries.run_many(conn, "nodes.insert_dependency", edges)
    note = note or (f"added by {parent_id}" if parent_id else "added")
    queries.run_many(conn, "nodes.record_added", [(g.id, s.id, run_id, at, note) for s in models])
    return [s.id for s in models]


# ---------------------------------------------------------------- reopening

def reopen(g: Graph, node_id: str, from_status: str, *, at: str, note: str,
           auto: bool = False) -> None:
    """Back to open with a clean slate (attempts, backoff, lock, supersession). The escalation
    count survives: it bounds how often one node's failure is handed to a planner. SQL only."""
    queries.run(g.conn, "nodes.reopen", (1 if auto else 0, at, g.id, node_id))
    record_event(g, node_id, from_status, NodeStatus.OPEN, at=at, note=note)


class FenceError(ClavainError):
    """A runner's claim is not the node's current one: the node was finished, given back or
    claimed again since (perhaps by the same run). Its writes are refused, and the message
    says which of these happened."""

    def __init__(self, node: dict[str, Any], fence: int | None) -> None:
        node_id, current = node["id"], node["lock_generation"]
        if node["status"] == NodeStatus.IN_PROGRESS and current != fence:
            why = (f"was claimed again since this runner's claim (generation {fence}, now "
                   f"{current}, by run {node['lock_run_id']!r}): its lease ran out or its "
                   "holder was taken for dead")
        elif node["status"] == NodeStatus.IN_PROGRESS:
            why = f"is held by run {node['lock_run_id']!r}, not by this runner's claim"
        elif node["status"] == NodeStatus.OPEN:
            why = (f"was given back since this runner's claim (generation {fence}); it runs "
                   "again under a new claim")
        else:
            why = (f"is {node['status']} already: something other than this runner's claim "
                   f"(generation {fence}) finished it")
        super().__init__(f"node {node_id!r} {why}; nothing of this runner was recorded")

