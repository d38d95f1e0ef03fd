"""Plan lint where work joins a graph (`sprint done plan`, a planner's result): the findings
for the specs about to be added, with the graph's own nodes as ids a spec may depend on. Only
the ids the specs name are looked up: a graph may hold 40,000 nodes.

An unknown dependency or a cycle is refused first, in the words the graph's own batch check
uses (`workgraph.nodes`): it is the same refusal, found before the project's files are read."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clavain.errors import ClavainError
from clavain.plans import lint
from clavain.plans.findings import Finding

if TYPE_CHECKING:
    from clavain.workgraph.graphs import Graph

GRAPH_CHECKS = ("unknown_dependency", "dependency_cycle")  # refused above, in the graph's words


def lint_for_graph(g: Graph, specs: list[dict[str, Any]],
                   config: dict[str, Any]) -> list[Finding]:
    from clavain.workgraph.nodes import existing_ids

    named = {dep for spec in specs for dep in _deps(spec)} - {spec["id"] for spec in specs}
    known = existing_ids(g, sorted(named)) if named else set()
    return lint_with_known(specs, project=g.state.project, config=config, known_ids=known)


def lint_with_known(specs: list[dict[str, Any]], *, project: Path, config: dict[str, Any],
                    known_ids: Iterable[str]) -> list[Finding]:
    """The findings for `specs` joining a graph that holds `known_ids` (at least every id the
    specs name that is not their own), with links refused in the graph's words."""
    from clavain.workgraph.cycles import find_cycle

    known = set(known_ids)
    own = {spec["id"]: _deps(spec) for spec in specs}
    for node, deps in own.items():
        for dep in deps:
            if dep not in own and dep not in known:
                raise ClavainError(f"node {node!r} depends on unknown node {dep!r}")
    cycle = find_cycle({node: [d for d in deps if d in own] for node, deps in own.items()})
    if cycle:
        raise ClavainError(f"node {cycle[0]!r} is in a dependency cycle: {' -> '.join(cycle)}")
    return [finding for finding in lint.lint_specs(specs, project=project, config=config,
                                              known_ids=known)
            if finding.code not in GRAPH_CHECKS]


def _deps(spec: dict[str, Any]) -> list[str]:
    deps = spec.get("dependsOn")
    return [dep for dep in deps if isinstance(dep, str)] if isinstance(deps, list) else []
