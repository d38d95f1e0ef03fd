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
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clavain.clock import now_iso
from clavain.errors import ClavainError
from clavain.fsutil import write_json_atomic
from clavain.guards.counting import SUPERVISED_RUN_VARIABLE
from clavain.paths import StatePaths
from clavain.processes import process_identity
from clavain.stop_flag import StopFlag
from clavain.store import faults as store_faults
from clavain.store import health as store_health
from clavain.store.db import transaction
from clavain.store.graph_db import open_graph_db
from clavain.supervisor import invocation, worktrees
from clavain.supervisor.claude_output import record_runner_output
from clavain.supervisor.fault_injection import inject
from clavain.supervisor.invocation import runner_process_env
from clavain.supervisor.metrics import RunMetrics
from clavain.supervisor.outcome import Outcome, failure, interpret
from clavain.supervisor.process import ProcessOutcome, RunnerNotStarted, run_process
from clavain.supervisor.routes import CLAUDE, SHELL_VERIFY, WORK_ROLES, Route, route_for
from clavain.supervisor.run_budget import RunBudget
from clavain.supervisor.run_record import RunRecord, run_dir
from clavain.supervisor.run_reserve import RunReserve, Share, transcript_path
from clavain.supervisor.worker_claims import (
    claim_lost,
    give_back,
    record,
    release,
    settle_verify,
    store,
)
from clavain.workgraph import claims
from clavain.workgraph.graphs import Graph
from clavain.workgraph.runner_env import runner_env
from clavain.workgraph.verifier import safe_path_part

# Outcomes that give the node back unspent, by `outcome.Outcome.kind`.
GIVEN_BACK = {"stopped": "released", "rate_limited": "rate_limited",
              "unusable": "runner_unusable", "over_share": "budget_share"}


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
    stop: StopFlag  # set by a signal handler (clavain.stop_flag)
    reserve: RunReserve
    runner_override: str | None = None
    packet_mode: str | None = None
    use_worktrees: bool = False
    # Set once by the first worker that finds the store damaged: nothing more is claimed.
    halt: threading.Event = field(default_factory=threading.Event)
    halt_message: list[str] = field(default_factory=list)
    # Set by the supervisor once the run's spend reached its cap: configured runners (nothing
    # makes them honour their share) are stopped.
    cap_reached: threading.Event = field(default_factory=threading.Event)

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


def _env(ctx: RunContext, node: dict[str, Any], cwd: Path, share: Share | None
         ) -> dict[str, str]:
    return runner_process_env(ctx.cfg, {
        **runner_env(ctx.state, node, ctx.run_id, ctx.graph_id),
        SUPERVISED_RUN_VARIABLE: ctx.budget.key, "CLAVAIN_WORKDIR": str(cwd),
        **(share.env() if share is not None else {})})


class _Stops:
    """What stops a runner: the run stopping, its claim taken back, or (a configured runner)
    the run's spend at its cap (`run_process` asks `is_set` and waits with `wait`)."""

    def __init__(self, run: threading.Event, *others: threading.Event) -> None:
        self.run, self.others = run, others

    def is_set(self) -> bool:
        return self.run.is_set() or any(other.is_set() for other in self.others)

    def wait(self, timeout: float) -> bool:
        return self.run.wait(timeout) or any(other.is_set() for other in self.others)


@dataclass
class _Spend:
    """The node's reservation and what became of it: settled (released with its measured
    usage) or, for a runner that ended unmeasured, charged."""

    share: Share | None
    started: bool = False
    done: bool = False

    def settle(self, ctx: RunContext, *, tokens: int, cost_usd: float) -> None:
        holder = self.share.holder if self.share is not None else None
        if holder is None and not tokens and not cost_usd:
            return
        self.done = True
        ctx.reserve.settle(holder, tokens=tokens, cost_usd=cost_usd)

    def end(self, ctx: RunContext) -> dict[str, Any]:
        """The runner did not report: charged if it ran, released if it never started."""
        if self.share is None or self.done:
            return {}
        self.done = True
        if not self.started:
            ctx.reserve.settle(self.share.holder, tokens=0, cost_usd=0.0)
            return {}
        measured = ctx.reserve.charge(self.share.holder)
        if measured is not None:
            return {"tokens": measured["tokens"], "cost_usd": measured["cost_usd"],
                    "measured_from": "transcript"}
        return {"charged_usd": self.share.cost_usd}


class _GiveBack(Exception):
    """The node goes back unspent: the run is stopping, nothing of the node's own failed."""


def run_node(ctx: RunContext, node: dict[str, Any], worker: int, share: Share | None = None
             ) -> dict[str, Any]:
    """Run one claimed node; returns the event the supervisor reports and records. Whatever
    happens, the claim ends recorded or given back (module docstring), and its reservation
    (`share`) settled or charged."""
    started_epoch = time.time()
    event: dict[str, Any] = {"node": node["id"], "worker": worker, "start": now_iso(),
                             "start_epoch": started_epoch, "role": None, "runner": None,
                             "llm": False}
    tree: list[worktrees.Worktree] = []
    conn = None
    spend = _Spend(share)
    try:
        inject("worker_start")
        conn = store_faults.wait_out(lambda: open_graph_db(ctx.state, migrate_schema=False),
                                     seconds=ctx.store_wait_seconds(), stopped=ctx.stop.is_set)
        g = Graph(conn, ctx.graph_id, ctx.state)
        _attempt(ctx, g, node, event, tree, spend)
    except Exception as exc:  # never the node's failure: given back, never held
        _end(event)
        outcome, why = _failure(ctx, exc)
        event.update(outcome=outcome, summary=give_back(ctx, conn, node, why))
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
        try:
            event.update(spend.end(ctx))
        except Exception as exc:  # the meter is out of reach: say so, the run stops dispatch
            event["budget_problem"] = f"{type(exc).__name__}: {exc}"
    _end(event)
    event["seconds"] = round(event["end_epoch"] - started_epoch, 3)
    ctx.metrics.record({key: event.get(key) for key in (
        "node", "role", "runner", "model", "worker", "start", "end", "start_epoch", "end_epoch",
        "seconds", "outcome", "llm", "tokens", "cost_usd", "charged_usd", "summary", "retry_at")})
    return event


def _failure(ctx: RunContext, exc: Exception) -> tuple[str, str]:
    """What a worker's exception means: its outcome and why, in one line."""
    if isinstance(exc, _GiveBack):
        return "released", str(exc)
    fault = store_faults.kind(exc)
    if fault == store_faults.DAMAGED:
        ctx.halt_run(store_health.damage_message(ctx.state.db, exc))
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
             tree: list[worktrees.Worktree], spend: _Spend) -> None:
    if ctx.stop.is_set():
        raise _GiveBack("the run stopped before its runner started")
    route = route_for(ctx.cfg, node, runner_override=ctx.runner_override)
    event.update({**route.as_dict(), "llm": False})  # an LLM call once its runner started
    if ctx.use_worktrees and route.role in WORK_ROLES:
        tree.append(worktrees.create(ctx.state.project, ctx.state.root, node["id"],
                                     ctx.run_id))
    cwd = tree[0].path if tree else ctx.state.project
    log_dir = _log_dir(ctx, node)
    share = spend.share
    call = invocation.build(g, ctx.cfg, node, route, run_id=ctx.run_id, log_dir=log_dir,
                            packet_mode=ctx.packet_mode, share=share)
    env = _env(ctx, node, cwd, share)
    if share is not None and route.runner == CLAUDE:
        ctx.reserve.note_transcript(share, transcript_path(env, cwd, share.session_id))
    if ctx.stop.is_set():
        raise _GiveBack("the run stopped before its runner started")
    lost = threading.Event()
    # Nothing makes a configured runner honour its share: it is stopped at the run's cap.
    stops = _Stops(ctx.stop, lost) if route.runner == CLAUDE else \
        _Stops(ctx.stop, lost, ctx.cap_reached)

    def started(pid: int) -> None:
        spend.started = True
        _runner_started(ctx, g, node, event, route, pid)

    process = run_process(
        call.argv, stdin_text=call.stdin_text, cwd=cwd, env=env,
        log_dir=log_dir, timeout=call.timeout, stop=stops, on_start=started,
        renew=lambda: _renew(g, node, ctx.run_id, lost),
        renew_every=max(1.0, claims.lease_of(ctx.cfg) / 3))
    ctx.record.runner_ended(node["id"])
    # The subscription's windows its output reported: the next dispatch is paced by them.
    record_runner_output(str(ctx.state.root), process.stdout)
    _end(event)
    inject("runner_ended")
    if lost.is_set():
        event.update(outcome="not_recorded", summary=(
            "its claim was taken back while its runner worked (its lease ran out, or its "
            "holder was taken for dead): the runner was stopped and nothing was recorded"))
        return
    event.update(_settle(ctx, g, node, route, process, call.timeout,
                         tree[0] if tree else None, log_dir, spend))


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
            return claims.note_runner(g, node["id"], ctx.run_id,
                                      fence=node.get("lock_generation"), pid=pid,
                                      identity=identity)

    if not store(ctx, g, note):
        raise _GiveBack("its claim was taken back before its runner started")
    inject("runner_started")


def _renew(g: Graph, node: dict[str, Any], run_id: str, lost: threading.Event) -> None:
    """Renew the claim's lease while the runner works. A claim taken back meanwhile (its lease
    ran out, another host took the node) stops the runner: its work would only be refused.
    A store that is briefly unreachable (a server restart) costs one renewal, not the node."""
    try:
        claims.renew(g, node["id"], run_id=run_id, fence=node.get("lock_generation"))
    except ClavainError as exc:
        if store_faults.kind(exc) is None:
            lost.set()
    except Exception:
        return


def _settle(ctx: RunContext, g: Graph, node: dict[str, Any], route: Route,
            process: ProcessOutcome, timeout: float, tree: worktrees.Worktree | None,
            log_dir: Path, spend: _Spend) -> dict[str, Any]:
    if route.runner == SHELL_VERIFY:
        return settle_verify(ctx, g, node, process)
    outcome = interpret(route.runner, process, timeout)
    usage: dict[str, Any] = {"tokens": outcome.tokens, "cost_usd": outcome.cost_usd}
    if outcome.reported:
        try:  # the run's ledger (the project's own file) must not cost the node its result
            spend.settle(ctx, tokens=outcome.tokens, cost_usd=outcome.cost_usd)
        except Exception as exc:
            usage["budget_problem"] = f"{type(exc).__name__}: {exc}"
    if outcome.kind == "over_share" and spend.share is not None:
        ctx.reserve.stopped_at[node["id"]] = {"tokens": spend.share.tokens,
                                              "cost_usd": spend.share.cost_usd}
    if outcome.kind != "result":
        note = outcome.note
        if process.stopped and ctx.cap_reached.is_set() and not ctx.stop.is_set():
            note = "stopped: the run's spend reached its cap"
        release(ctx, g, node, note)
        return {**usage, "outcome": GIVEN_BACK[outcome.kind], "summary": note,
                "rate_limit": _limit(outcome)}
    result = outcome.result or failure("the runner gave no result")
    conflicts: list[str] = []
    if tree is not None and result["status"] == "success":
        lost = claim_lost(ctx, g, node)
        if lost is not None:  # its lease ran out and the node went to another runner
            return {**usage, "outcome": "not_recorded", "summary": lost}
        inject("before_merge")
        merged = _merge(ctx, node, tree)
        if merged.dirty:  # a person is editing: merging could tangle their work with the run's
            why = (f"{merged.message}; the run stops so they are not merged over (branch "
                   f"{tree.branch} keeps the work)")
            release(ctx, g, node, why)
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
    recorded = record(ctx, g, node, result, str(process.stdout_path), str(result_path))
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
