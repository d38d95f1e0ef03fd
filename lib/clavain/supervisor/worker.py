"""One node, start to finish, on one worker thread: route → packet → runner process → outcome →
(merge its worktree) → record. Every worker has its own database connection; the claim was
taken by the supervisor under the run's id, and this worker renews its lease while the runner
lives.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clavain import config as config_mod
from clavain.clock import now_iso
from clavain.errors import ClavainError
from clavain.fsutil import write_json_atomic
from clavain.guards.gate import SUPERVISED_RUN_VARIABLE
from clavain.paths import StatePaths
from clavain.store.db import transaction
from clavain.store.graph_db import open_graph_db, reconnecting
from clavain.supervisor import invocation, worktrees
from clavain.supervisor.invocation import runner_process_env
from clavain.supervisor.metrics import RunMetrics
from clavain.supervisor.outcome import Outcome, failure, interpret
from clavain.supervisor.process import ProcessOutcome, run_process
from clavain.supervisor.routes import SHELL_VERIFY, WORK_ROLES, Route, route_for
from clavain.supervisor.run_budget import RunBudget
from clavain.supervisor.run_record import RunRecord, run_dir
from clavain.workgraph.graphs import Graph
from clavain.workgraph.leases import heartbeat
from clavain.workgraph.nodes import FenceError, release_claim
from clavain.workgraph.results import apply_result
from clavain.workgraph.runner_env import runner_env
from clavain.workgraph.verifier import safe_path_part

OUTCOME_BY_STATUS = {"done": "done", "open": "retry", "failed": "failed",
                     "needs_human": "needs_human"}
# Outcomes that give the node back unspent, by `outcome.Outcome.kind`.
GIVEN_BACK = {"stopped": "released", "rate_limited": "rate_limited",
              "unusable": "runner_unusable"}


@dataclass
class RunContext:
    """What every worker of one supervised run shares."""

    state: StatePaths
    graph_id: str
    run_id: str
    cfg: dict[str, Any]
    record: RunRecord
    metrics: RunMetrics
    budget: RunBudget
    stop: threading.Event
    runner_override: str | None = None
    packet_mode: str | None = None
    use_worktrees: bool = False


def _log_dir(ctx: RunContext, node: dict[str, Any]) -> Path:
    base = run_dir(ctx.state, ctx.run_id) / safe_path_part(node["id"])
    number = node["attempts"] + 1
    while (base / f"attempt-{number}").exists():  # a released or rate-limited call kept its logs
        number += 1
    return base / f"attempt-{number}"


def _env(ctx: RunContext, node: dict[str, Any], cwd: Path) -> dict[str, str]:
    return runner_process_env(ctx.cfg, {
        **runner_env(ctx.state, node, ctx.run_id, ctx.graph_id),
        SUPERVISED_RUN_VARIABLE: ctx.budget.key, "CLAVAIN_WORKDIR": str(cwd)})


class _GiveBack(Exception):
    """The node goes back unspent: the run is stopping, nothing of the node's own failed."""


def run_node(ctx: RunContext, node: dict[str, Any], worker: int) -> dict[str, Any]:
    """Run one claimed node; returns the event the supervisor reports and records. Whatever
    happens, the claim ends recorded or released: never held by a runner that is gone."""
    conn = open_graph_db(ctx.state, migrate_schema=False)
    g = Graph(conn, ctx.graph_id, ctx.state)
    started_epoch = time.time()
    event: dict[str, Any] = {"node": node["id"], "worker": worker, "start": now_iso(),
                             "start_epoch": started_epoch, "role": None, "runner": None,
                             "llm": False}
    tree: list[worktrees.Worktree] = []
    try:
        _attempt(ctx, g, node, event, tree)
    except _GiveBack as back:
        _end(event)
        _give_back(g, node, ctx.run_id, str(back))
        event.update(outcome="released", summary=str(back))
    except OSError as exc:  # the runner's program cannot start: the node is not to blame
        _end(event)
        _give_back(g, node, ctx.run_id, f"runner could not start: {exc}")
        event.update(outcome="runner_unusable", summary=f"runner could not start: {exc}")
    except ClavainError as exc:  # no binary, git refused, a bad route: the setup, not the node
        _end(event)
        stopping = ctx.stop.is_set()  # stopping killed its git or its process
        _give_back(g, node, ctx.run_id, f"stopped: {exc}" if stopping
                   else f"runner not started: {exc}")
        event.update(outcome="released" if stopping else "runner_unusable",
                     summary=f"runner not started: {exc}")
    finally:
        if tree:
            # A conflict's branch, or work a dirty tree kept from merging, is its only copy.
            keep = bool(event.get("conflicts")) or event.get("outcome") == "runner_unusable"
            with contextlib.suppress(ClavainError, OSError):
                worktrees.remove(ctx.state.project, tree[0], delete_branch=not keep)
        conn.close()
    _end(event)
    event["seconds"] = round(event["end_epoch"] - started_epoch, 3)
    ctx.metrics.record({key: event.get(key) for key in (
        "node", "role", "runner", "model", "worker", "start", "end", "start_epoch", "end_epoch",
        "seconds", "outcome", "llm", "tokens", "cost_usd", "summary")})
    return event


def _end(event: dict[str, Any]) -> None:
    """The runner's interval ends when its process does, before its result releases the
    claim: the next holder of an overlapping node always starts after this end."""
    if "end_epoch" not in event:
        event.update(end=now_iso(), end_epoch=time.time())


def _attempt(ctx: RunContext, g: Graph, node: dict[str, Any], event: dict[str, Any],
             tree: list[worktrees.Worktree]) -> None:
    if ctx.stop.is_set():
        raise _GiveBack("the run stopped before its runner started")
    route = route_for(ctx.cfg, node, runner_override=ctx.runner_override)
    event.update(route.as_dict())
    if ctx.use_worktrees and route.role in WORK_ROLES:
        tree.append(worktrees.create(ctx.state.project, ctx.state.root, node["id"],
                                     ctx.run_id))
    cwd = tree[0].path if tree else ctx.state.project
    log_dir = _log_dir(ctx, node)
    call = invocation.build(g, ctx.cfg, node, route, run_id=ctx.run_id, log_dir=log_dir,
                            packet_mode=ctx.packet_mode)
    if ctx.stop.is_set():
        raise _GiveBack("the run stopped before its runner started")
    process = run_process(
        call.argv, stdin_text=call.stdin_text, cwd=cwd, env=_env(ctx, node, cwd),
        log_dir=log_dir, timeout=call.timeout, stop=ctx.stop,
        on_start=lambda pid: ctx.record.runner_started(node["id"], pid),
        renew=lambda: _renew(g, node, ctx.run_id),
        renew_every=max(1.0, float(config_mod.get(ctx.cfg, "defaults.lockLeaseSeconds",
                                                  3600)) / 3))
    ctx.record.runner_ended(node["id"])
    _end(event)
    event.update(_settle(ctx, g, node, route, process, call.timeout,
                         tree[0] if tree else None, log_dir))


def _renew(g: Graph, node: dict[str, Any], run_id: str) -> None:
    # A store that is briefly unreachable (a server restart) costs one renewal, not the node.
    with contextlib.suppress(Exception):
        heartbeat(g, node["id"], run_id=run_id, fence=node.get("lock_generation"))


def _settle(ctx: RunContext, g: Graph, node: dict[str, Any], route: Route,
            process: ProcessOutcome, timeout: float, tree: worktrees.Worktree | None,
            log_dir: Path) -> dict[str, Any]:
    if route.runner == SHELL_VERIFY:
        return _settle_verify(g, node, ctx.run_id, process)
    outcome = interpret(route.runner, process, timeout)
    usage = {"tokens": outcome.tokens, "cost_usd": outcome.cost_usd}
    ctx.budget.add_usage(tokens=outcome.tokens, cost_usd=outcome.cost_usd)
    if outcome.kind != "result":
        _give_back(g, node, ctx.run_id, outcome.note)
        return {**usage, "outcome": GIVEN_BACK[outcome.kind], "summary": outcome.note,
                "rate_limit": _limit(outcome)}
    result = outcome.result or failure("the runner gave no result")
    conflicts: list[str] = []
    if tree is not None and result["status"] == "success":
        lost = _claim_lost(g, node, ctx.run_id)
        if lost is not None:  # its lease ran out and the node went to another runner
            return {**usage, "outcome": "not_recorded", "summary": lost}
        merged = _merge(ctx, node, tree)
        if merged.dirty:  # a person is editing: merging could tangle their work with the run's
            why = (f"{merged.message}; the run stops so they are not merged over (branch "
                   f"{tree.branch} keeps the work)")
            _give_back(g, node, ctx.run_id, why)
            return {**usage, "outcome": "runner_unusable", "summary": why}
        if not merged.merged:
            files = ", ".join(merged.conflicts) or "(git named none)"
            conflicts = merged.conflicts or ["?"]
            result = failure(f"its work conflicts with work merged before it in {files}; "
                             f"nothing of it was merged (branch {tree.branch} keeps it)",
                             f"merge conflict in {files}: {merged.message}")
    result_path = log_dir / "result.json"
    write_json_atomic(result_path, result, inside=ctx.state.root)
    return {**usage, "conflicts": conflicts,
            **_record(g, node, ctx.run_id, result, str(process.stdout_path),
                      str(result_path))}


def _limit(outcome: Outcome) -> dict[str, Any] | None:
    if outcome.kind != "rate_limited":
        return None
    return {"reset_at": outcome.reset_at.isoformat() if outcome.reset_at else None,
            "retry_after_seconds": outcome.retry_after_seconds, "message": outcome.note}


def _merge(ctx: RunContext, node: dict[str, Any], tree: worktrees.Worktree
           ) -> worktrees.MergeOutcome:
    """Commit a successful runner's work and merge it into the run's branch."""
    worktrees.commit_all(tree, f"clavain: {node['id']} {node.get('title') or ''}".strip())
    return worktrees.merge(ctx.state.project, tree,
                           lock_path=ctx.state.root / worktrees.WORKTREES_DIR
                           / worktrees.MERGE_LOCK)


def _record(g: Graph, node: dict[str, Any], run_id: str, result: dict[str, Any],
            stdout_path: str | None, result_path: str | None) -> dict[str, Any]:
    """Apply the result under the claim's fence; one the library refuses (too many planned
    tasks, a bad addNodes) is a failed attempt with the refusal as its reason. A result whose
    claim ran out and was taken again is not recorded at all."""
    node_id, fence = node["id"], node.get("lock_generation")
    try:
        applied = reconnecting(g.conn, lambda: apply_result(
            g, node_id, result, run_id=run_id, stdout_path=stdout_path,
            result_path=result_path, fence=fence))
    except FenceError as exc:
        return {"outcome": "not_recorded", "summary": str(exc)}
    except ClavainError as exc:
        if result["status"] == "fail":
            return {"outcome": "not_recorded", "summary": str(exc)}
        try:
            applied = apply_result(g, node_id, failure(f"result refused: {exc}", str(exc)),
                                   run_id=run_id, stdout_path=stdout_path,
                                   result_path=result_path, fence=fence)
        except ClavainError as again:
            return {"outcome": "not_recorded", "summary": str(again)}
        result = failure(f"result refused: {exc}")
    return {"outcome": OUTCOME_BY_STATUS.get(applied["to"], applied["to"]),
            "summary": result.get("summary", ""), "added": applied.get("added") or [],
            "escalation": applied.get("escalation")}


def _settle_verify(g: Graph, node: dict[str, Any], run_id: str,
                   process: ProcessOutcome) -> dict[str, Any]:
    """`clavain verify` recorded (or, stopped, released) the node itself; read what it did."""
    free = {"tokens": 0, "cost_usd": 0.0}
    if process.stopped:
        _give_back(g, node, run_id, "stopped by the supervisor")
        return {**free, "outcome": "released", "summary": "stopped by the supervisor"}
    try:
        report = json.loads(process.stdout)
    except ValueError:
        report = None
    if isinstance(report, dict) and report.get("applied"):
        to = report["apply"]["to"]
        return {**free, "outcome": OUTCOME_BY_STATUS.get(to, to),
                "summary": report["result"]["summary"]}
    why = (report.get("error") if isinstance(report, dict) else None) or (
        f"the shell verifier exited {process.exit_code} without a report"
        + (" (timed out)" if process.timed_out else "") + f"; see {process.stderr_path}")
    crashed = failure(f"shell verifier: {why}", str(why))
    try:
        applied = apply_result(g, node["id"], crashed, run_id=run_id, by_verifier=True,
                               fence=node.get("lock_generation"))
    except ClavainError as exc:
        return {**free, "outcome": "not_recorded", "summary": f"{why}; {exc}"}
    return {**free, "outcome": OUTCOME_BY_STATUS.get(applied["to"], applied["to"]),
            "summary": crashed["summary"]}


def _claim_lost(g: Graph, node: dict[str, Any], run_id: str) -> str | None:
    """Why this worker's claim is not the node's any more (nothing of its work may be merged
    or recorded), or None while it still holds it."""
    try:
        reconnecting(g.conn, lambda: heartbeat(g, node["id"], run_id=run_id,
                                               fence=node.get("lock_generation")))
    except ClavainError as exc:
        return f"{exc}; its work was not merged"
    return None


def _give_back(g: Graph, node: dict[str, Any], run_id: str, why: str) -> None:
    def release() -> None:
        with transaction(g.conn):
            release_claim(g, node["id"], run_id, at=now_iso(), why=why,
                          fence=node.get("lock_generation"))

    reconnecting(g.conn, release)
