"""One node, start to finish, on one worker thread: route → packet → runner process → outcome →
(merge its worktree) → record. Every worker has its own database connection; the claim was
taken by the supervisor under the run's id, and this worker renews its lease while the runner
lives.

Whatever a worker meets after the claim, the claim ends recorded or given back, under its
fence: a stop, a runner that cannot start, a store restarting (waited out, bounded), a damaged
database (the run halts: nothing more is claimed), a bug. Only a result the node's runner gave
spends an attempt. If even the give-back cannot reach the store, the supervisor gives the
claim back once it can (`supervise` reconciles its run's claims with its workers).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from clavain.clock import now_iso
from clavain.errors import ClavainError
from clavain.fsutil import write_json_atomic
from clavain.guards.gate import SUPERVISED_RUN_VARIABLE
from clavain.paths import StatePaths
from clavain.processes import process_identity
from clavain.store import faults as store_faults
from clavain.store.db import transaction
from clavain.store.graph_db import open_graph_db, reconnecting
from clavain.supervisor import invocation, worktrees
from clavain.supervisor.fault_injection import inject
from clavain.supervisor.invocation import runner_process_env
from clavain.supervisor.metrics import RunMetrics
from clavain.supervisor.outcome import Outcome, failure, interpret
from clavain.supervisor.process import ProcessOutcome, RunnerNotStarted, run_process
from clavain.supervisor.routes import SHELL_VERIFY, WORK_ROLES, Route, route_for
from clavain.supervisor.run_budget import RunBudget
from clavain.supervisor.run_record import RunRecord, run_dir
from clavain.workgraph.graphs import Graph
from clavain.workgraph.leases import heartbeat, lease_of
from clavain.workgraph.nodes import FenceError, note_runner, release_claim
from clavain.workgraph.results import apply_result
from clavain.workgraph.runner_env import runner_env
from clavain.workgraph.verifier import safe_path_part

T = TypeVar("T")
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
    # Set once by the first worker that finds the store damaged: nothing more is claimed.
    halt: threading.Event = field(default_factory=threading.Event)
    halt_message: list[str] = field(default_factory=list)

    def store_wait_seconds(self) -> float:
        return store_faults.outage_seconds(self.cfg)

    def halt_run(self, message: str) -> None:
        if not self.halt.is_set():
            self.halt_message.append(message)
            self.halt.set()


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


class _Stops:
    """What stops a runner: the run stopping, or its claim taken back (`run_process` asks
    `is_set` and waits with `wait`)."""

    def __init__(self, run: threading.Event, lost: threading.Event) -> None:
        self.run, self.lost = run, lost

    def is_set(self) -> bool:
        return self.run.is_set() or self.lost.is_set()

    def wait(self, timeout: float) -> bool:
        return self.run.wait(timeout) or self.lost.is_set()


class _GiveBack(Exception):
    """The node goes back unspent: the run is stopping, nothing of the node's own failed."""


def run_node(ctx: RunContext, node: dict[str, Any], worker: int) -> dict[str, Any]:
    """Run one claimed node; returns the event the supervisor reports and records. Whatever
    happens, the claim ends recorded or given back (module docstring)."""
    started_epoch = time.time()
    event: dict[str, Any] = {"node": node["id"], "worker": worker, "start": now_iso(),
                             "start_epoch": started_epoch, "role": None, "runner": None,
                             "llm": False}
    tree: list[worktrees.Worktree] = []
    conn = None
    try:
        inject("worker_start")
        conn = store_faults.wait_out(lambda: open_graph_db(ctx.state, migrate_schema=False),
                                     seconds=ctx.store_wait_seconds(), stopped=ctx.stop.is_set)
        g = Graph(conn, ctx.graph_id, ctx.state)
        _attempt(ctx, g, node, event, tree)
    except Exception as exc:  # never the node's failure: given back, never held
        _end(event)
        outcome, why = _failure(ctx, exc)
        event.update(outcome=outcome, summary=_give_back(ctx, conn, node, why))
    finally:
        if tree:
            # A conflict's branch, or work a dirty tree kept from merging, is its only copy.
            keep = bool(event.get("conflicts")) or event.get("outcome") == "runner_unusable"
            if keep:
                ctx.record.keep_branch(tree[0].branch, str(event.get("summary")))
            with contextlib.suppress(ClavainError, OSError):
                worktrees.remove(ctx.state.project, tree[0], delete_branch=not keep)
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()
    _end(event)
    event["seconds"] = round(event["end_epoch"] - started_epoch, 3)
    ctx.metrics.record({key: event.get(key) for key in (
        "node", "role", "runner", "model", "worker", "start", "end", "start_epoch", "end_epoch",
        "seconds", "outcome", "llm", "tokens", "cost_usd", "summary")})
    return event


def _failure(ctx: RunContext, exc: Exception) -> tuple[str, str]:
    """What a worker's exception means: its outcome and why, in one line."""
    if isinstance(exc, _GiveBack):
        return "released", str(exc)
    fault = store_faults.kind(exc)
    if fault == store_faults.DAMAGED:
        ctx.halt_run(store_faults.damage_message(ctx.state.db, exc))
        return "store_damaged", f"the workgraph database is damaged: {exc}"
    if fault == store_faults.UNAVAILABLE:
        return "store_unavailable", f"the workgraph store is unavailable: {exc}"
    if isinstance(exc, ClavainError):  # no binary, git refused, a bad route: the setup
        if ctx.stop.is_set():  # stopping killed its git or its process
            return "released", f"stopped: {exc}"
        if isinstance(exc, RunnerNotStarted):
            return "runner_unusable", str(exc)
        return "runner_unusable", f"runner not started: {exc}"
    return "error", f"worker error: {type(exc).__name__}: {exc}"


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
    event.update({**route.as_dict(), "llm": False})  # an LLM call once its runner started
    if ctx.use_worktrees and route.role in WORK_ROLES:
        tree.append(worktrees.create(ctx.state.project, ctx.state.root, node["id"],
                                     ctx.run_id))
    cwd = tree[0].path if tree else ctx.state.project
    log_dir = _log_dir(ctx, node)
    call = invocation.build(g, ctx.cfg, node, route, run_id=ctx.run_id, log_dir=log_dir,
                            packet_mode=ctx.packet_mode)
    if ctx.stop.is_set():
        raise _GiveBack("the run stopped before its runner started")
    lost = threading.Event()
    process = run_process(
        call.argv, stdin_text=call.stdin_text, cwd=cwd, env=_env(ctx, node, cwd),
        log_dir=log_dir, timeout=call.timeout, stop=_Stops(ctx.stop, lost),
        on_start=lambda pid: _runner_started(ctx, g, node, event, route, pid),
        renew=lambda: _renew(g, node, ctx.run_id, lost),
        renew_every=max(1.0, lease_of(ctx.cfg) / 3))
    ctx.record.runner_ended(node["id"])
    _end(event)
    inject("runner_ended")
    if lost.is_set():
        event.update(outcome="not_recorded", summary=(
            "its claim was taken back while its runner worked (its lease ran out, or its "
            "holder was taken for dead): the runner was stopped and nothing was recorded"))
        return
    event.update(_settle(ctx, g, node, route, process, call.timeout,
                         tree[0] if tree else None, log_dir))


def _runner_started(ctx: RunContext, g: Graph, node: dict[str, Any], event: dict[str, Any],
                    route: Route, pid: int) -> None:
    """Record the runner where a later claimer finds it — the run's record, and the claim
    itself (a supervisor in another project folder on this host stops it before it claims the
    node again). A claim that is not this worker's any more stops the runner at once."""
    ctx.record.runner_started(node["id"], pid, worker=event["worker"])
    event["llm"] = route.llm
    identity = process_identity(pid)

    def note() -> bool:
        with transaction(g.conn, exclusive=False):
            return note_runner(g, node["id"], ctx.run_id, fence=node.get("lock_generation"),
                               pid=pid, identity=identity)

    if not _store(ctx, g, note):
        raise _GiveBack("its claim was taken back before its runner started")
    inject("runner_started")


def _renew(g: Graph, node: dict[str, Any], run_id: str, lost: threading.Event) -> None:
    """Renew the claim's lease while the runner works. A claim taken back meanwhile (its lease
    ran out, another host took the node) stops the runner: its work would only be refused.
    A store that is briefly unreachable (a server restart) costs one renewal, not the node."""
    try:
        heartbeat(g, node["id"], run_id=run_id, fence=node.get("lock_generation"))
    except ClavainError as exc:
        if store_faults.kind(exc) is None:
            lost.set()
    except Exception:
        return


def _settle(ctx: RunContext, g: Graph, node: dict[str, Any], route: Route,
            process: ProcessOutcome, timeout: float, tree: worktrees.Worktree | None,
            log_dir: Path) -> dict[str, Any]:
    if route.runner == SHELL_VERIFY:
        return _settle_verify(ctx, g, node, process)
    outcome = interpret(route.runner, process, timeout)
    usage = {"tokens": outcome.tokens, "cost_usd": outcome.cost_usd}
    try:  # the run's ledger (the project's own file) must not cost the node its result
        ctx.budget.add_usage(tokens=outcome.tokens, cost_usd=outcome.cost_usd)
    except Exception as exc:
        usage["budget_problem"] = f"{type(exc).__name__}: {exc}"
    if outcome.kind != "result":
        _release(ctx, g, node, outcome.note)
        return {**usage, "outcome": GIVEN_BACK[outcome.kind], "summary": outcome.note,
                "rate_limit": _limit(outcome)}
    result = outcome.result or failure("the runner gave no result")
    conflicts: list[str] = []
    if tree is not None and result["status"] == "success":
        lost = _claim_lost(ctx, g, node)
        if lost is not None:  # its lease ran out and the node went to another runner
            return {**usage, "outcome": "not_recorded", "summary": lost}
        inject("before_merge")
        merged = _merge(ctx, node, tree)
        if merged.dirty:  # a person is editing: merging could tangle their work with the run's
            why = (f"{merged.message}; the run stops so they are not merged over (branch "
                   f"{tree.branch} keeps the work)")
            _release(ctx, g, node, why)
            return {**usage, "outcome": "runner_unusable", "summary": why}
        inject("after_merge")
        if not merged.merged:
            files = ", ".join(merged.conflicts) or "(git named none)"
            conflicts = merged.conflicts or ["?"]
            result = failure(f"its work conflicts with work merged before it in {files}; "
                             f"nothing of it was merged (branch {tree.branch} keeps it)",
                             f"merge conflict in {files}: {merged.message}")
    result_path = log_dir / "result.json"
    write_json_atomic(result_path, result, inside=ctx.state.root)
    inject("before_record")
    recorded = _record(ctx, g, node, result, str(process.stdout_path), str(result_path))
    inject("after_record")
    return {**usage, "conflicts": conflicts, **recorded}


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
                           lock_path=worktrees.merge_lock(ctx.state.root))


def _store(ctx: RunContext, g: Graph, action: Callable[[], T]) -> T:
    """Run whole transactions on the worker's connection, waiting out a store that is
    restarting or busy (bounded: `store.outageWaitSeconds`; not once the run is stopping)."""
    return store_faults.wait_out(lambda: reconnecting(g.conn, action),
                                 seconds=ctx.store_wait_seconds(), stopped=ctx.stop.is_set)


def _record(ctx: RunContext, g: Graph, node: dict[str, Any], result: dict[str, Any],
            stdout_path: str | None, result_path: str | None) -> dict[str, Any]:
    """Apply the result under the claim's fence; one the library refuses (too many planned
    tasks, a bad addNodes) is a failed attempt with the refusal as its reason. A result whose
    claim ran out and was taken again is not recorded at all. A store fault is not a refusal:
    it goes up to `run_node`, which gives the claim back unspent."""
    node_id, fence, run_id = node["id"], node.get("lock_generation"), ctx.run_id

    def apply(outcome: dict[str, Any]) -> dict[str, Any]:
        return _store(ctx, g, lambda: apply_result(
            g, node_id, outcome, run_id=run_id, stdout_path=stdout_path,
            result_path=result_path, fence=fence))

    try:
        applied = apply(result)
    except FenceError as exc:
        return {"outcome": "not_recorded", "summary": str(exc)}
    except ClavainError as exc:
        if store_faults.kind(exc) is not None:
            raise
        if result["status"] == "fail":
            return {"outcome": "not_recorded", "summary": str(exc)}
        try:
            applied = apply(failure(f"result refused: {exc}", str(exc)))
        except ClavainError as again:
            if store_faults.kind(again) is not None:
                raise
            return {"outcome": "not_recorded", "summary": str(again)}
        result = failure(f"result refused: {exc}")
    return {"outcome": OUTCOME_BY_STATUS.get(applied["to"], applied["to"]),
            "summary": result.get("summary", ""), "added": applied.get("added") or [],
            "escalation": applied.get("escalation")}


def _settle_verify(ctx: RunContext, g: Graph, node: dict[str, Any],
                   process: ProcessOutcome) -> dict[str, Any]:
    """`clavain verify` recorded (or, stopped, released) the node itself; read what it did. A
    verify that could not reach the store is given back unspent: the check did not fail."""
    free = {"tokens": 0, "cost_usd": 0.0}
    if process.stopped:
        _release(ctx, g, node, "stopped by the supervisor")
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
    fault = report.get("store") if isinstance(report, dict) else None
    if fault == store_faults.DAMAGED:
        raise store_faults.StoreDamaged(f"shell verifier: {why}")
    if fault == store_faults.UNAVAILABLE:
        _release(ctx, g, node, f"shell verifier: {why}")
        return {**free, "outcome": "store_unavailable", "summary": f"shell verifier: {why}"}
    crashed = failure(f"shell verifier: {why}", str(why))
    try:
        applied = _store(ctx, g, lambda: apply_result(
            g, node["id"], crashed, run_id=ctx.run_id, by_verifier=True,
            fence=node.get("lock_generation")))
    except ClavainError as exc:
        if store_faults.kind(exc) is not None:
            raise
        return {**free, "outcome": "not_recorded", "summary": f"{why}; {exc}"}
    return {**free, "outcome": OUTCOME_BY_STATUS.get(applied["to"], applied["to"]),
            "summary": crashed["summary"]}


def _claim_lost(ctx: RunContext, g: Graph, node: dict[str, Any]) -> str | None:
    """Why this worker's claim is not the node's any more (nothing of its work may be merged
    or recorded), or None while it still holds it."""
    try:
        _store(ctx, g, lambda: heartbeat(g, node["id"], run_id=ctx.run_id,
                                         fence=node.get("lock_generation")))
    except ClavainError as exc:
        if store_faults.kind(exc) is not None:
            raise
        return f"{exc}; its work was not merged"
    return None


def _release(ctx: RunContext, g: Graph, node: dict[str, Any], why: str, *,
             wait: bool = True) -> None:
    """Give the claim back unspent, under its fence (a no-op once it is not this claim);
    `wait`: wait out a store that does not answer (else one try)."""
    def release() -> None:
        with transaction(g.conn):
            release_claim(g, node["id"], ctx.run_id, at=now_iso(), why=why,
                          fence=node.get("lock_generation"))

    if wait:
        _store(ctx, g, release)
    else:
        reconnecting(g.conn, release)


def _give_back(ctx: RunContext, conn: Any, node: dict[str, Any], why: str) -> str:
    """`_release` for a worker that is failing, tried once (it may have waited for the store
    already): never raises. Returns `why`, plus the reason the claim is still held when even
    that failed (the supervisor gives it back later)."""
    if conn is None:
        return f"{why}; its claim is kept until the store answers (the run gives it back)"
    try:
        _release(ctx, Graph(conn, ctx.graph_id, ctx.state), node, why, wait=False)
    except Exception as exc:
        return (f"{why}; its claim is kept until the store answers (the run gives it back): "
                f"{type(exc).__name__}: {exc}")
    return why
