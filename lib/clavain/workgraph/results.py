"""Apply a runner's result to its node, all in one transaction or nothing: the status change,
retry with backoff, added nodes (with their scaffolding), the auto KV keys, and on permanent
failure the hand-over to an escalation (`escalation`).

`check_applicable` is the one answer to "may this result be applied?": the node is open or in
progress, its dependencies are done, and no other run holds it. The transition itself is
`transitions.record_result`, shared with a claim released at the crash limit.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from clavain import config as config_mod
from clavain.clock import now_iso
from clavain.errors import ClavainError
from clavain.store import queries
from clavain.store.db import transaction
from clavain.store.graph_db import store_now
from clavain.textio import NUL_SYMBOL, BadText, load_json, storable_tree
from clavain.workgraph import claims, escalation
from clavain.workgraph.export import after_commit
from clavain.workgraph.graphs import Graph
from clavain.workgraph.nodes import (
    FenceError,
    require_node,
)
from clavain.workgraph.runner_env import current_run_id
from clavain.workgraph.transitions import record_result

APPLICABLE = ("open", "in_progress")
SUMMARY_MAX = 20_000  # RunnerResult.summary's own limit
# A planner splits work into at most this many tasks (seed 000: tasks only, 2-6 per plan); the
# sprint's plan file is held to the same number.
PLANNER_MAX_TASKS = 6
PLANNER_TYPES = ("plan", "epic")
CHECK_NODE_TYPES = ("verify", "integrate", "final_verify")

_RESULT_BLOCK = re.compile(r"<result>(.*?)</result>", re.DOTALL)
_FENCE = re.compile(r"^```[A-Za-z]*\s*\n(.*)\n```\s*$", re.DOTALL)


# ---------------------------------------------------------------- parsing

def extract_result_json(text: str) -> Any:
    """The JSON inside the last `<result>…</result>` (agents often echo the template's example
    first), else the whole text; a ```json fence around it is tolerated."""
    blocks = _RESULT_BLOCK.findall(text)
    body = (blocks[-1] if blocks else text).strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    if not body:
        raise ClavainError("the result is empty; expected <result>{...}</result> or a JSON object")
    where = ("the result inside <result>…</result>" if blocks
             else "the result (no <result>…</result> block found)")
    try:
        return load_json(body, where)
    except BadText as exc:
        raise ClavainError(str(exc)) from None


def parse_result(result: dict[str, Any] | str) -> Any:
    """A validated `RunnerResult` from a dict or from runner output text."""
    from pydantic import ValidationError

    from clavain.models.node import RunnerResult

    raw = extract_result_json(result) if isinstance(result, str) else result
    if not isinstance(raw, dict):
        raise ClavainError("the result must be a JSON object with status and summary")
    raw = _storable_result(raw)
    try:
        return RunnerResult.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "result"
        raise ClavainError(f"result field {where}: {err['msg']}") from None


def _storable_result(raw: dict[str, Any]) -> dict[str, Any]:
    """The result with every text as both stores keep it (`textio.storable`); when something
    had to change, its summary says so."""
    kept, changed = storable_tree(raw)
    assert isinstance(kept, dict)
    if changed and isinstance(kept.get("summary"), str):
        note = (f" [{changed} text(s) of this result held NUL bytes or undecodable characters, "
                f"stored as {NUL_SYMBOL} / \ufffd]")
        kept["summary"] = kept["summary"][:SUMMARY_MAX - len(note)] + note
    return kept


# ---------------------------------------------------------------- may it be applied?

def unmet_dependencies(g: Graph, node_id: str) -> list[str]:
    return [row[0] for row in queries.run(g.conn, "results.unmet_dependencies",
                                          (g.id, node_id))]


class WaitingOnDependencies(ClavainError):
    """The node's dependencies are not done (or were reopened after it was claimed)."""


def check_applicable(g: Graph, node: dict[str, Any], run_id: str,
                     fence: int | None = None) -> None:
    """Refuse a result that must not be recorded: the node finished (or waits on a person), a
    dependency is not done yet (nothing is done before its dependencies), another run holds
    the node, or (with `fence`, the generation of the runner's claim) the runner's claim is
    not the node's current one. Every front door asks this one function."""
    node_id = node["id"]
    if fence is not None and (node["status"] != "in_progress" or node["lock_run_id"] != run_id
                              or node["lock_generation"] != fence):
        raise FenceError(node, fence)
    if node["status"] == "cancelled":
        raise ClavainError(f"node {node_id!r} was cancelled with its sprint's graph "
                           f"({g.id!r}); its result is not recorded")
    if node["status"] not in APPLICABLE:
        raise ClavainError(f"node {node_id!r} is {node['status']}; only an open or in_progress "
                           f"node takes a result (reopen it first: clavain graph reset {node_id})")
    if node["unmet_deps"] > 0:
        waiting = unmet_dependencies(g, node_id)
        # A running escalation may reopen the node it took over (its own advice: reset it and
        # try again); that must not keep the escalation from finishing.
        if node["status"] == "in_progress":
            waiting = [d for d in waiting if d != escalation.escalated_node(node_id)]
        if waiting:
            raise WaitingOnDependencies(
                f"node {node_id!r} waits on {', '.join(waiting)}, not done yet; it cannot be "
                "finished before its dependencies")
    holder = node["lock_run_id"]
    if holder and holder != run_id:
        raise ClavainError(f"node {node_id!r} is claimed by run {holder!r}, not {run_id!r}: "
                           f"pass --run-id {holder} (or set CLAVAIN_RUN_ID) if that run is yours")


# ---------------------------------------------------------------- apply

def check_planned_work(node: dict[str, Any], result: Any) -> None:
    """A planner adds work, never checks (the verify, integrate and final gates are Clavain's to
    scaffold), and at most PLANNER_MAX_TASKS nodes: a longer list is a plan too coarse to verify
    task by task."""
    if node["type"] not in PLANNER_TYPES or not (result.next and result.next.addNodes):
        return
    added = result.next.addNodes
    checks = [spec.id for spec in added if spec.type in CHECK_NODE_TYPES]
    if checks:
        raise ClavainError(f"planner node {node['id']!r} may not add {checks[0]!r}: Clavain "
                           "adds the verify, integrate and final gates itself")
    if len(added) > PLANNER_MAX_TASKS:
        raise ClavainError(f"planner node {node['id']!r} adds {len(added)} nodes; at most "
                           f"{PLANNER_MAX_TASKS} (split the work into bigger tasks or a "
                           "second plan)")


def lint_planned_work(g: Graph, node_id: str, result: Any, cfg: dict[str, Any]) -> None:
    """A planner's tasks pass plan lint as a sprint's plan does (`clavain.plans.lint`): an
    error refuses the whole result, and nobody accepts findings for an agent. Run before the
    transaction (lint reads the project's files; no write lock is held that long), after the
    planner rules above, which refuse first."""
    if not (result.next and result.next.addNodes):
        return
    from clavain.workgraph.nodes import get_node

    node = get_node(g, node_id)
    if node is None or node["type"] not in PLANNER_TYPES:
        return
    check_planned_work(node, result)
    from clavain.plans.findings import PlanRefused, judge
    from clavain.plans.graph_lint import lint_for_graph

    specs = [spec.model_dump(exclude_none=True) for spec in result.next.addNodes]
    try:
        judge(lint_for_graph(g, specs, cfg), accepted_by=None)
    except PlanRefused as exc:
        raise ClavainError(f"planner node {node_id!r} adds work plan lint refuses; nothing was "
                           "added:\n" + "\n".join(f.line() for f in exc.findings)) from None


def apply_result(g: Graph, node_id: str, result: dict[str, Any] | str, *,
                 run_id: str | None = None, stdout_path: str | None = None,
                 result_path: str | None = None, now: datetime | None = None,
                 extra_kv: dict[str, str] | None = None,
                 by_verifier: bool = False, fence: int | None = None) -> dict[str, Any]:
    """Record a runner's result for `node_id` under the run-id rule (explicit, else
    $CLAVAIN_RUN_ID, else a new id): a node another run holds is refused. A verify or
    final_verify node takes only the shell verifier's result (`by_verifier`): a check that
    anyone could report as passed would prove nothing. `fence`: the generation of the claim
    the result comes from; a result from an older claim is refused (`FenceError`)."""
    parsed = parse_result(result)
    run_id = current_run_id(run_id)
    cfg = config_mod.load(g.state.config)
    now = now or store_now(g.conn)
    at = now_iso(now)
    lint_planned_work(g, node_id, parsed, cfg)
    refused: WaitingOnDependencies | None = None
    with transaction(g.conn):
        node = require_node(g, node_id)
        if node["type"] in ("verify", "final_verify") and not by_verifier:
            raise ClavainError(f"node {node_id!r} is a {node['type']} node: only the shell "
                               f"verifier records its result (`clavain verify {node_id}`)")
        check_planned_work(node, parsed)
        try:
            check_applicable(g, node, run_id, fence)
        except WaitingOnDependencies as exc:
            # Claimed, then a dependency reopened (a reset, new work scaffolded in front): the
            # node cannot finish now and must not stay locked until its lease runs out.
            if node["lock_run_id"] != run_id or not claims.release(
                    g, node_id, run_id, reason=claims.Reason.GIVEN_BACK, at=at,
                    why="a dependency is not done any more"):
                raise
            refused = exc
        else:
            outcome = record_result(g, cfg, node, parsed, run_id=run_id, at=at, now=now,
                                    stdout_path=stdout_path, result_path=result_path,
                                    extra_kv=extra_kv)
    after_commit(g, cfg)
    if refused is not None:
        raise ClavainError(f"{refused}; the claim was released, so it runs again once they are "
                           "done")
    return outcome
