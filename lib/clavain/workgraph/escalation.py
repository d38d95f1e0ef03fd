"""What happens after a node fails for good: a planner node (`plan-escalate-<id>`) takes it over,
and what that planner adds replaces the failed work, so the graph converges instead of leaving
the failed node's dependents blocked forever.

Rules (events record every step):
- A node that fails for good is handed to its escalation: created the first time, reopened when
  it already finished (the failure is new), left alone while it is still pending. At most
  `defaults.maxEscalations` hand-overs per node; past that, or for an escalation node itself,
  the failed node is reported as blocking (`deadlock.detect`) instead of growing a chain.
- An escalation that succeeds with `next.addNodes` while the node is still failed:
  for work (task, plan, epic) the added nodes REPLACE the failed node: every dependent edge is
  re-pointed to the added nodes that nothing else in the batch depends on, and the failed node
  is marked `superseded_by` (it blocks nothing any more); for a check (verify, integrate,
  final_verify) the check is still wanted, so it is reopened to run again after those nodes.
  Everything the escalation added counts, on any of its attempts.
- An escalation that succeeds without adding nodes leaves the decision to whoever reset the
  node (its text recommends `clavain graph reset`); if nobody does, the node is a blocker.
- A failed node reopened by hand (or by the deadlock breaker) closes its escalation while no
  planner has claimed it: the node runs again first, and a new failure reopens the escalation.
- Any plan that succeeds with added nodes makes its dependents wait for them too (`expand`):
  what comes after a plan comes after the plan's work.
"""

from __future__ import annotations

import json
from typing import Any

from clavain import config as config_mod
from clavain.errors import ClavainError
from clavain.store import queries
from clavain.workgraph.graphs import Graph
from clavain.workgraph.nodes import get_node, insert_nodes, record_event, reopen
from clavain.workgraph.statuses import UNFINISHED, NodeStatus

ESCALATION_PREFIX = "plan-escalate-"
# Plain text, not NodeStatus members: deadlock's SQL quotes these with repr().
PENDING = tuple(status.value for status in UNFINISHED)
CHECK_TYPES = ("verify", "integrate", "final_verify")


def escalation_id(node_id: str) -> str:
    return f"{ESCALATION_PREFIX}{node_id}"


def escalated_node(node_id: str) -> str | None:
    """The node an escalation node takes over, or None for any other node."""
    return node_id[len(ESCALATION_PREFIX):] if node_id.startswith(ESCALATION_PREFIX) else None


def escalation_spec(node: dict[str, Any]) -> Any:
    """The planner node that takes over a node that failed for good."""
    from clavain.models.node import NodeInput, NodeSpec

    failed = node["id"]
    inputs = [NodeInput.model_validate({"nodeId": failed, "key": key, "as": alias})
              for key, alias in (("err.summary", "failure"), ("err.errors", "errors"),
                                 ("out.last_stdout_path", "stdout"),
                                 ("out.last_result_path", "result"))]
    replace = (f"{failed} runs again after them" if node["type"] in CHECK_TYPES
               else f"they replace {failed}: its dependents wait on them instead")
    attempts = node["attempts"]
    # model_construct: the id may exceed the user-facing id length; everything else is literal.
    return NodeSpec.model_construct(
        id=escalation_id(failed), type="plan",
        title=f"Escalation: {failed} failed after {attempts} attempt"
              f"{'' if attempts == 1 else 's'}",
        dependsOn=[failed], parent=node["parent_id"], runner=None, inputs=inputs,
        ownership=[],
        acceptance=[
            f"either add nodes that fix the failure (next.addNodes; {replace}),",
            "or checkpoint a question for a human,",
            f"or reopen {failed} with a new approach (`clavain graph reset {failed}`)",
        ],
        verify=[], commands=[], retryPolicy=None,
    )


def hand_over(g: Graph, cfg: dict[str, Any], node: dict[str, Any], *, at: str,
              run_id: str | None) -> dict[str, Any]:
    """After `node` failed for good: {"escalation": id or None, "action": created | reopened |
    pending | limit | none}. SQL only (the caller's transaction)."""
    if escalated_node(node["id"]) is not None:
        return {"escalation": None, "action": "none"}
    target = escalation_id(node["id"])
    existing = queries.run(g.conn, "escalation.node_status", (g.id, target)).fetchone()
    if existing is not None and existing["status"] in PENDING:
        return {"escalation": target, "action": "pending"}
    limit = int(config_mod.get(cfg, "defaults.maxEscalations", 2))
    if node["escalations"] >= limit:
        record_event(g, node["id"], NodeStatus.FAILED, NodeStatus.FAILED, at=at, run_id=run_id,
                     note=f"not escalated: {node['escalations']} of {limit} escalations used "
                          "(defaults.maxEscalations); it blocks until reset or replaced")
        return {"escalation": None, "action": "limit"}
    if existing is None:
        insert_nodes(g, cfg, [escalation_spec(node)], at=at, run_id=run_id,
                     dep_kind={(target, node["id"]): "settled"},
                     note=f"escalation of {node['id']}")
        action = "created"
    else:
        reopen(g, target, existing["status"], at=at,
               note=f"reopened: {node['id']} failed for good again")
        action = "reopened"
    queries.run(g.conn, "escalation.count_escalation", (g.id, node["id"]))
    return {"escalation": target, "action": action}


def _sinks(g: Graph, added: list[str]) -> list[str]:
    """Added nodes that no other added node depends on: the end of the new work."""
    inner = {row[0] for row in queries.run(g.conn, "escalation.inner_dependencies",
                                           (g.id, json.dumps(added)))}
    return [node_id for node_id in added if node_id not in inner]


def _reaches(g: Graph, start: str, target: str) -> bool:
    """Whether `start` depends on `target`, directly or not."""
    return queries.run(g.conn, "escalation.reaches",
                       (start, g.id, target)).fetchone() is not None


def children(g: Graph, node_id: str) -> list[str]:
    """The nodes `node_id` added, over all its attempts (not the verify nodes scaffolding gave
    them, which share their parent)."""
    return [row[0] for row in queries.run(g.conn, "escalation.children", (g.id, node_id))]


def close_pending(g: Graph, node_id: str, *, at: str, why: str) -> str | None:
    """Close `node_id`'s escalation when no planner holds it yet (the node itself runs again);
    returns its id when closed. SQL only."""
    target = escalation_id(node_id)
    closed = queries.run(g.conn, "escalation.close_pending",
                         (at, at, g.id, target)).fetchall()
    if not closed:
        return None
    record_event(g, target, None, NodeStatus.DONE, at=at,
                 note=f"closed: {node_id} {why}; it is reopened if {node_id} fails again")
    return target


def after_success(g: Graph, node: dict[str, Any], *, at: str,
                  run_id: str | None) -> dict[str, Any] | None:
    """What a succeeding node's added work takes over: the failed node (an escalation) or the
    plan's place before its dependents (a plan or epic). SQL only."""
    added = children(g, node["id"])
    if not added:
        return None
    if escalated_node(node["id"]) is not None:
        return take_over(g, node, added, at=at, run_id=run_id)
    if node["type"] in ("plan", "epic"):
        return expand(g, node, added, at=at, run_id=run_id)
    return None


def expand(g: Graph, plan: dict[str, Any], added: list[str], *, at: str,
           run_id: str | None) -> dict[str, Any] | None:
    """The plan's dependents wait for the end of its added work as well. SQL only."""
    conn = g.conn
    sinks = _sinks(g, added)
    dependents = queries.run(conn, "escalation.dependents_outside",
                             (g.id, plan["id"], json.dumps(added))).fetchall()
    waiting = []
    for dependent in dependents:
        new = [sink for sink in sinks if not queries.run(
            conn, "escalation.has_dependency", (g.id, dependent["node_id"], sink)).fetchone()]
        if not new:
            continue
        _refuse_cycles(g, new, dependent["node_id"], plan["id"])
        queries.run_many(conn, "escalation.add_dependency_of_kind",
                         [(g.id, dependent["node_id"], sink, dependent["kind"]) for sink in new])
        record_event(g, dependent["node_id"], None, None, at=at, run_id=run_id,
                     note=f"also waits on {', '.join(new)} (added by {plan['id']})")
        waiting.append(dependent["node_id"])
    return {"node": plan["id"], "action": "expanded", "nodes": sinks,
            "repointed": waiting} if waiting else None


def _refuse_cycles(g: Graph, sinks: list[str], dependent: str, replaced: str) -> None:
    for sink in sinks:
        if _reaches(g, sink, dependent):
            raise ClavainError(f"added node {sink!r} depends on {dependent!r}, which waits on "
                               f"{replaced!r} and would then wait on {sink!r}: a cycle; drop "
                               "that dependency")


def take_over(g: Graph, escalation: dict[str, Any], added: list[str], *, at: str,
              run_id: str | None) -> dict[str, Any] | None:
    """Let what a successful escalation added replace (or precede) the failed node; None when
    there is nothing to do. SQL only."""
    failed_id = escalated_node(escalation["id"])
    if failed_id is None or not added:
        return None
    conn = g.conn
    failed = get_node(g, failed_id)
    if failed is None or failed["status"] != NodeStatus.FAILED or failed["superseded_by"]:
        return None  # reset by hand meanwhile (it runs again on its own), or replaced already
    sinks = _sinks(g, added)
    if failed["type"] in CHECK_TYPES:
        for sink in sinks:
            if _reaches(g, sink, failed_id):
                raise ClavainError(f"added node {sink!r} depends on {failed_id!r}, which must "
                                   "run after it; drop that dependency")
        queries.run_many(conn, "escalation.add_dependency_if_missing",
                         [(g.id, failed_id, sink) for sink in sinks])
        reopen(g, failed_id, NodeStatus.FAILED, at=at,
               note=f"runs again after {', '.join(sinks)} (added by {escalation['id']})")
        return {"node": failed_id, "action": "rerun_after", "nodes": sinks}
    dependents = queries.run(conn, "escalation.dependents_except",
                             (g.id, failed_id, escalation["id"])).fetchall()
    for dependent in dependents:
        _refuse_cycles(g, sinks, dependent["node_id"], failed_id)
    for dependent in dependents:
        queries.run(conn, "escalation.drop_dependency", (g.id, dependent["node_id"], failed_id))
        queries.run_many(conn, "escalation.add_dependency_of_kind_if_missing",
                         [(g.id, dependent["node_id"], sink, dependent["kind"]) for sink in sinks])
        if len(sinks) == 1:
            _repoint_inputs(g, dependent["node_id"], failed_id, sinks[0])
        record_event(g, dependent["node_id"], None, None, at=at, run_id=run_id,
                     note=f"now waits on {', '.join(sinks)} instead of {failed_id} "
                          f"(replaced by {escalation['id']})")
    queries.run(conn, "escalation.supersede", (escalation["id"], at, g.id, failed_id))
    record_event(g, failed_id, NodeStatus.FAILED, NodeStatus.FAILED, at=at, run_id=run_id,
                 note=f"superseded by {escalation['id']}: replaced by {', '.join(sinks)}")
    return {"node": failed_id, "action": "replaced",
            "nodes": sinks, "repointed": [d["node_id"] for d in dependents]}


def _repoint_inputs(g: Graph, node_id: str, old: str, new: str) -> None:
    """A dependent that read the failed node's keys (a verify node its `out.summary`) reads
    the replacement's instead."""
    row = queries.run(g.conn, "escalation.inputs_of", (g.id, node_id)).fetchone()
    inputs = json.loads(row["inputs_json"])
    changed = [{**ref, "node_id": new} if ref.get("node_id") == old else ref for ref in inputs]
    if changed != inputs:
        queries.run(g.conn, "escalation.set_inputs", (json.dumps(changed), g.id, node_id))
