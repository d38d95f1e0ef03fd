"""`clavain graph import`: node specs into a graph, from Clavain's own `{"nodes": [...]}` or from
where the work lives (`--from FORMAT FILE`: GitHub issues, a markdown PRD, beads, Task Master;
`plans.import_formats` turns each into specs that carry their `origin`).

Two steps, so a refused import writes nothing — not even the state folder:
- `check` (no database written): shape and runners (`edits.check_specs`), then plan lint
  (`plans.lint`) against the ids the graph already holds. Errors refuse the import (exit 1)
  unless a person accepted them (`--accept-lint REASON`, who asks is `clavain.authority`);
  warnings come back to be printed.
- `record` (one transaction): new ids are added; an id the graph already holds is the same
  item again only when it was imported from the same place (origin format and source id).
  Then, as a sprint's plan recorded again (`workgraph.redefine`), a node that has not started
  takes its new definition, an unchanged one is left alone, and a started one whose definition
  changed refuses the whole import by name. Any other id already held is refused by name.
  Items their source marks done are done here without running ("done at its source"), so
  their dependents can run; a re-import that closes an item does the same to its node while
  the node has not started. The origin itself (status, priority, url) is provenance, not
  definition: it follows the source even on a started node.

A person's acceptance of lint findings is recorded on the graph, in the same transaction, as
the run-wide KV key `import.lint_accepted` (`clavain kv get --run --key import.lint_accepted`):
{"reason", "decided_by", "at", "source", "format", "findings"}; its history keeps the last
five.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from clavain.errors import ClavainError
from clavain.paths import StatePaths
from clavain.store import queries
from clavain.workgraph.graphs import Graph

# Statuses a source uses for an item that is finished (each format's own word, lower-cased).
DONE_AT_SOURCE = frozenset({"done", "closed", "completed", "complete", "resolved"})
LINT_KEY = "import.lint_accepted"


def accept_command(source: str, fmt: str | None) -> str:
    """What a person runs to import `source` despite its lint errors."""
    from shlex import quote

    return (f"clavain graph import {f'--from {quote(fmt)} ' if fmt else ''}{quote(source)} "
            "--accept-lint REASON")


@dataclass
class Checked:
    """Specs that passed `check`: what `record` writes, and what lint said about them."""

    specs: list[dict[str, Any]]
    source: str
    findings: list[Any] = field(default_factory=list)  # plans.findings.Finding, to print
    accepted: dict[str, Any] | None = None  # a person's acceptance, recorded with the import


def formats() -> tuple[str, ...]:
    from clavain.plans import import_formats

    return tuple(import_formats.FORMATS)


def read_specs(text: str, where: str, fmt: str | None = None) -> list[dict[str, Any]]:
    """The node specs in `text`: Clavain's `{"nodes": [...]}` JSON, or a FORMAT's file."""
    if fmt is None:
        from clavain.textio import BadText, load_json
        from clavain.workgraph.edits import import_specs

        try:
            return list(import_specs(load_json(text, where)))
        except BadText as exc:
            raise ClavainError(str(exc)) from None
    known = formats()
    if fmt not in known:
        raise ClavainError(f"unknown import format {fmt!r} (formats: {', '.join(known)})")
    from clavain.plans import import_formats

    return import_formats.parse(fmt, text, where)


def node_ids(g: Graph) -> list[str]:
    """Every node id of the graph (a spec may depend on any of them)."""
    return [row[0] for row in queries.run(g.conn, "imports.node_ids", (g.id,))]


def check(state: StatePaths, specs: list[dict[str, Any]], *, source: str,
          known_ids: list[str], fmt: str | None = None, accept_lint: str | None = None,
          decided_by: dict[str, Any] | None = None) -> Checked:
    """Everything before a row is written (module docstring). `source` and `fmt` name the
    file as the command did; `decided_by` is the person's provenance when a person asks (None:
    an agent), needed for `accept_lint`."""
    from clavain import config as config_mod
    from clavain.clock import now_iso
    from clavain.plans.findings import ERROR, PlanRefused, judge
    from clavain.plans.graph_lint import lint_with_known
    from clavain.workgraph.edits import check_specs

    if accept_lint is not None:
        if not accept_lint.strip():
            raise ClavainError("--accept-lint needs the reason the findings are accepted")
        if decided_by is None:
            from clavain.authority import refusal

            raise refusal("accepting a plan's lint findings (--accept-lint)",
                          in_claude_code=None, in_terminal=accept_command(source, fmt))
    check_specs(state, specs)
    cfg = config_mod.load(state.config)
    findings = lint_with_known(specs, project=state.project, config=cfg, known_ids=known_ids)
    accepted = None
    if accept_lint is not None:
        accepted = {"reason": accept_lint.strip(), "decided_by": decided_by, "at": now_iso(),
                    "source": source, "format": fmt}
    try:
        shown = judge(findings, accepted_by=accepted)
    except PlanRefused as exc:
        errors = [f for f in exc.findings if f.severity == ERROR]
        raise ClavainError(
            f"{source}: {len(errors)} lint error(s); nothing was imported (a person may accept "
            f"them: `{accept_command(source, fmt)}`):\n"
            + "\n".join(f.line() for f in exc.findings),
            exit_code=1) from None
    if accepted is not None:
        accepted["findings"] = [f.to_json() for f in findings]
    return Checked(specs, source, list(shown), accepted)


def done_at_source(model: Any) -> bool:
    status = model.origin.status if model.origin is not None else None
    return isinstance(status, str) and status.strip().lower() in DONE_AT_SOURCE


def _origin_of(model: Any) -> dict[str, Any] | None:
    return model.origin.model_dump(exclude_defaults=True) if model.origin is not None else None


def _same_item(node: dict[str, Any], model: Any) -> bool:
    have, want = node.get("origin"), _origin_of(model)
    return bool(have and want and (have.get("format"), have.get("source_id")) ==
                (want["format"], want["source_id"]))


def _refuse_taken(g: Graph, node: dict[str, Any], model: Any) -> ClavainError:
    have, want = node.get("origin"), _origin_of(model)
    if want is None:
        why = ""
    elif have is None:
        why = (f" and was not imported (this one is {want['format']} item "
               f"{want['source_id']!r})")
    else:
        why = (f" and is {have['format']} item {have['source_id']!r}, not {want['format']} "
               f"item {want['source_id']!r}")
    return ClavainError(f"node {model.id!r} already exists in graph {g.id!r}{why}; pick another "
                        "id")


def record(g: Graph, checked: Checked) -> dict[str, Any]:
    """Write `checked` into `g` in one transaction (module docstring). Returns {"graph_id",
    "added", "updated": {id: [fields]}, "unchanged", "done", "lint", "lint_accepted"}."""
    from clavain import config as config_mod
    from clavain.clock import now_iso
    from clavain.store.db import transaction
    from clavain.workgraph import redefine
    from clavain.workgraph.edits import BULK_ROWS, is_scaffolded, refresh_statistics
    from clavain.workgraph.export import after_commit
    from clavain.workgraph.graphs import ensure
    from clavain.workgraph.nodes import get_node, insert_nodes, stored_origin, validate_specs
    from clavain.workgraph.scaffold import scaffold_in_transaction

    models = validate_specs(checked.specs)
    seen: set[str] = set()
    for model in models:
        if model.id in seen:
            raise ClavainError(f"duplicate node id {model.id!r} in the batch")
        seen.add(model.id)
    cfg = config_mod.load(g.state.config)
    at = now_iso()
    report: dict[str, Any] = {"graph_id": g.id, "added": [], "updated": {}, "unchanged": [],
                              "done": [], "lint": [f.to_json() for f in checked.findings],
                              "lint_accepted": checked.accepted}
    with transaction(g.conn):
        ensure(g.conn, g.id, at=at)
        existing = {model.id: get_node(g, model.id) for model in models}
        ran, changes, origins = [], {}, []
        for model in models:
            node = existing[model.id]
            if node is None:
                continue
            if not _same_item(node, model):
                raise _refuse_taken(g, node, model)
            changed = redefine.changed_fields(node, model, cfg)
            closed_here = node["status"] == "done" and done_at_source(model)
            if closed_here:
                pass  # finished, and its source says so: nothing of it runs here again
            elif changed and redefine.started(g, node):
                ran.append((model.id, changed))
            elif changed:
                changes[model.id] = changed
            if node["origin"] != _origin_of(model):
                origins.append(model)
        redefine.refuse_started(ran, noun="node", changer="the import",
                                new_id="the item a new id")
        fresh = [model for model in models if existing[model.id] is None]
        if fresh:
            formats_used = sorted({m.origin.format for m in fresh if m.origin is not None})
            note = f"imported from {', '.join(formats_used)}" if formats_used else "added"
            report["added"] = insert_nodes(g, cfg, fresh, at=at, note=note)
        by_id = {model.id: model for model in models}
        for node_id in changes:
            redefine.update(g, by_id[node_id], cfg, at=at, who="imported node",
                            note="definition updated by an import")
        for model in origins:
            queries.run(g.conn, "redefine.set_origin", (stored_origin(model), at, g.id, model.id))
        report["done"] = _close_done(g, models, existing, at)
        report["updated"] = {**changes, **{m.id: [*changes.get(m.id, []), "origin"]
                                           for m in origins if m.id not in report["done"]}}
        report["unchanged"] = [m.id for m in models if existing[m.id] is not None and
                               m.id not in report["updated"] and m.id not in report["done"]]
        if checked.accepted is not None:
            from clavain.workgraph.kv import RUN_NAMESPACE, write

            write(g, RUN_NAMESPACE, LINT_KEY, json.dumps(checked.accepted), cfg=cfg)
        if is_scaffolded(g) and (changes or any(m.type == "task" for m in fresh)):
            scaffold_in_transaction(g, cfg, at)
    if len(report["added"]) >= BULK_ROWS:
        refresh_statistics(g)
    after_commit(g, cfg)
    return report


def _close_done(g: Graph, models: list[Any], existing: dict[str, Any], at: str) -> list[str]:
    """Nodes whose item the source marks done, open and never started here: done now."""
    from clavain.workgraph import redefine
    from clavain.workgraph.nodes import get_node, record_event
    from clavain.workgraph.statuses import NodeStatus

    closed = []
    for model in models:
        if not done_at_source(model):
            continue
        node = get_node(g, model.id) if existing[model.id] is not None else None
        if node is not None and redefine.started(g, node):
            continue
        queries.run(g.conn, "redefine.mark_done", (at, at, g.id, model.id))
        origin = model.origin
        record_event(g, model.id, NodeStatus.OPEN, NodeStatus.DONE, at=at,
                     note=f"done at its source ({origin.format} {origin.source_id})")
        closed.append(model.id)
    return closed
