"""`clavain run`: drive one workgraph unattended — claim the next node, hand it to a fresh
runner on a worker thread, record what it returns — until the graph is complete, nothing can
run (the scheduler's reason is the run's), a budget is spent, or the person stops it.

Signals: SIGINT or SIGTERM sets the stop flag; every runner's process group is stopped, its
node given back unspent, and the report says what is done and what is left. A `kill -9` leaves
`supervisor.json` saying "running": the next `clavain run` (or `--resume RUN`) stops the
runners it names and gives their claims back as crashes (no attempt spent) before it claims
anything (`run_record`), and removes the git branches and worktrees the crash left.

Budgets: a node that calls a model starts only with its share of what the run has left
reserved (`run_reserve`, `run_budget.admit`); one that does not fit is given back unspent and
nothing more starts. Configured runners are stopped once the run's spend reaches its cap.

Faults: no claim outlives its worker (`claims.give_back_run` reconciles the run's claims with
its workers after each node and before any wait on "nodes in progress"); a store that is
restarting is waited out with a countdown, bounded by `store.outageWaitSeconds`, at start and
between claims; a damaged database halts the run before its next claim; worker errors several
times in a row stop it. The final line says what happened to every claim.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from clavain import config as config_mod
from clavain import current_graph
from clavain.errors import ClavainError
from clavain.paths import StatePaths
from clavain.processes import TERM_GRACE_SECONDS
from clavain.sprint.headless_gate import refuse_before_execute
from clavain.stop_flag import StopFlag
from clavain.store import faults as store_faults
from clavain.store import health as store_health
from clavain.store.graph_db import (
    graph_store_exists,
    open_graph_db,
    reconnecting,
)
from clavain.supervisor import run_record, worktrees
from clavain.supervisor.fault_injection import inject
from clavain.supervisor.metrics import METRICS_NAME, RunMetrics
from clavain.supervisor.pacing import Pacing, StoreOutage, one_line
from clavain.supervisor.routes import check_override, role_of
from clavain.supervisor.run_budget import RunBudget, admit, check_cap
from clavain.supervisor.run_report import final_report
from clavain.supervisor.run_reserve import RunReserve, charge_held, measure_charged
from clavain.supervisor.signals import Signals
from clavain.supervisor.worker import RunContext, run_node
from clavain.workgraph import claims
from clavain.workgraph.graphs import Graph
from clavain.workgraph.nodes import list_nodes
from clavain.workgraph.runner_env import new_run_id
from clavain.workgraph.schedule import next_node

WAIT_POLL_SECONDS = 0.25
PROGRESS_EVERY_SECONDS = 15.0

Report = Callable[[dict[str, Any]], None]


@dataclass
class RunOptions:
    workers: int | None = None
    max_iterations: int | None = None
    runner: str | None = None
    resume: str | None = None
    run_id: str | None = None
    graph: str | None = None
    packet_mode: str | None = None
    wait_on_limit: bool | None = None  # past budgets.windowShareMax (None: supervisor.waitOnLimit)


class Supervisor:
    def __init__(self, state: StatePaths, graph_id: str, options: RunOptions,
                 report: Report | None = None) -> None:
        self.state = state
        self.options = options
        self.report = report or (lambda event: None)
        self.cfg = config_mod.load(state.config)
        check_override(self.cfg, options.runner)
        self.workers = options.workers or int(config_mod.get(self.cfg, "supervisor.workers", 1))
        if self.workers < 1:
            raise ClavainError("workers must be at least 1")
        self.stop = StopFlag()  # set by a signal handler: no lock (clavain.stop_flag)
        self.pacing = Pacing(self.cfg, self.stop, self.report, root=str(state.root),
                             wait_on_limit=options.wait_on_limit)
        # A server restarting as the run starts is waited for, with a countdown.
        self.conn = self.pacing.store(lambda: open_graph_db(state))
        # Never $CLAVAIN_RUN_ID: a `clavain run` started inside a runner is a run of its own.
        self.run_id = options.resume or options.run_id or new_run_id()
        # A graph named with --graph that the store does not hold is a typo, not an empty run.
        self.g = current_graph.require_known(Graph(self.conn, graph_id, state), options.graph)
        self.signals = Signals(self.stop, on_first=self._stopping, on_again=self._killing)
        self.finished: queue.Queue[dict[str, Any]] = queue.Queue()
        # Held from the last look at what workers said to a worker's start, and by a worker
        # putting its event: no node starts once a limit (errors in a row) is reached.
        self.dispatching = threading.Lock()
        self.active: dict[str, dict[str, Any]] = {}  # node → worker, role, monotonic start
        self.busy_workers: set[int] = set()
        self.started_calls = 0
        self.ctx: RunContext | None = None

    # ------------------------------------------------------------ the run

    def run(self) -> dict[str, Any]:
        with self.signals:
            recovered = self.pacing.store(lambda: run_record.recover(self.state, self.conn))
            for entry in recovered:
                self.report({"event": "recovered", **entry})
            cleaned = {"removed": []}
            with contextlib.suppress(ClavainError, OSError):  # no git: nothing to clean
                cleaned = worktrees.clean_leftovers(
                    self.state.project, self.state.root, live=run_record.live_runs(self.state),
                    kept=run_record.kept_branches(self.state))
            if cleaned["removed"]:
                self.report({"event": "cleaned", **cleaned})
            if self.stop.is_set():
                raise ClavainError("stopped before the run began", exit_code=130)
            use_worktrees = self.workers > 1
            if use_worktrees:
                worktrees.require_clean(self.state.project)
            record = run_record.RunRecord(self.state, self.run_id, self.g.id)
            record.data["options"] = {"runner": self.options.runner, "workers": self.workers,
                                      "packet_mode": self.options.packet_mode}
            record.start()
            budget = RunBudget(self.state, self.run_id)
            metrics = RunMetrics(run_record.run_dir(self.state, self.run_id) / METRICS_NAME,
                                 state_root=self.state.root, run_id=self.run_id,
                                 graph_id=self.g.id)
            reserve = RunReserve(self.state, budget.key, budget.limits, self.cfg,
                                 lambda: metrics.timeline)
            metrics.ledger = reserve.ledger  # the one cost figure (module docstring)
            with contextlib.suppress(Exception):  # transcripts of runners that died before
                measure_charged(self.state, budget.key)
            ctx = RunContext(self.state, self.g.id, self.run_id, self.cfg, record, metrics,
                             budget, self.stop, reserve, self.options.runner,
                             self.options.packet_mode, use_worktrees)
            self.ctx = ctx
            self.report({"event": "start", "run_id": self.run_id, "graph_id": self.g.id,
                         "workers": self.workers, "worktrees": use_worktrees,
                         "budget_problems": budget.problems})
            try:
                ending = self._loop(ctx, budget)
            except BaseException:
                self._stop_workers()  # no runner outlives a supervisor that failed
                with contextlib.suppress(Exception):
                    claims.settle_at_end(self.state, self.g, self.run_id,
                                         why="its supervisor failed", working=set(self.active))
                record.finish("failed", keep_runners=bool(self.active))
                with contextlib.suppress(Exception):  # no reservation outlives its run
                    charge_held(self.state, budget.key,
                                running=frozenset(self.active))
                raise
            status = "interrupted" if self.signal else ending["status"]
            settled = claims.settle_at_end(self.state, self.g, self.run_id,
                                           why=self._ending_why(status), working=set())
            record.finish(status)
            with contextlib.suppress(Exception):  # a worker that ended without settling its
                charge_held(self.state, budget.key)  # reservation: unmeasured, so charged
            nodes, problem = self._nodes()
            crashes = {n["id"]: n["crashes"] for n in nodes if n.get("crashes")}
            summary = metrics.write(status=status, reason=ending.get("reason"), crashes=crashes)
            with contextlib.suppress(Exception):
                self.conn.close()
            return final_report(self, status, ending, summary, recovered,
                                {**settled, "problem": settled["problem"] or problem}, nodes)

    def _ending_why(self, status: str) -> str:
        if status == "interrupted" and self.signal:
            return f"the run was stopped by {signal.Signals(self.signal).name}"
        return f"the run ended ({status}) while its worker still held it"

    def _stop_workers(self) -> None:
        """Stop every runner and wait for its worker, longer than a runner's grace period."""
        self.stop.set()
        deadline = time.monotonic() + TERM_GRACE_SECONDS + 5
        while self.active and time.monotonic() < deadline:
            self.signals.answer()
            try:
                event = self.finished.get(timeout=WAIT_POLL_SECONDS)
            except queue.Empty:
                continue
            self.active.pop(event["node"], None)

    @property
    def signal(self) -> int | None:
        """The signal that stopped the run, if one did."""
        return self.signals.first

    def _stopping(self) -> None:
        if self.active:
            self.report({"event": "stopping", "running": self._running()})

    def _killing(self) -> None:  # a second Ctrl-C: no more grace
        self.report({"event": "killing", "running": self._running()})
        run_record.kill_runners(self.state, self.run_id)

    def _loop(self, ctx: RunContext, budget: RunBudget) -> dict[str, Any]:
        ending: dict[str, Any] | None = None
        last_progress = time.monotonic()
        while True:
            self.signals.answer()
            if ending is not None and ending.get("wait") and self._drain():
                ending = None  # something changed: look again
            if ending is None and not self.stop.is_set():
                ending = self._fill(ctx, budget)
            if not self.active:
                if ending is None or ending.get("wait"):
                    waited_from = time.time()
                    self.pacing.wait(ending, self.conn, self.g.id)
                    if ending is not None:  # the page draws it (metrics.RunMetrics.waited)
                        ctx.metrics.waited(ending["wait"], waited_from, time.time(),
                                           ending.get("message"))
                    ending = None
                    if not self.stop.is_set():
                        continue
                return ending or {"status": "interrupted", "reason": "interrupted"}
            # Every turn (a worker's report, or a poll): configured runners stop at the cap.
            check_cap(ctx, self.active, lambda e: self.report({**e, "running": self._running()}))
            try:
                event = self.finished.get(timeout=WAIT_POLL_SECONDS)
            except queue.Empty:
                if time.monotonic() - last_progress >= PROGRESS_EVERY_SECONDS:
                    last_progress = time.monotonic()
                    self.report({"event": "progress", "running": self._running()})
                continue
            self._on_finished(event)
            if ending is not None and ending.get("wait"):
                ending = None  # something changed: look again

    def _drain(self) -> bool:
        """Take in every worker that finished meanwhile; whether there was any."""
        took = False
        while True:
            try:
                event = self.finished.get_nowait()
            except queue.Empty:
                return took
            self._on_finished(event)
            took = True

    def _on_finished(self, event: dict[str, Any]) -> None:
        """A worker ended: report it, note what it says about the run, and give back its
        node's claim if the worker could not (no claim outlives its worker)."""
        self.active.pop(event["node"], None)
        self.busy_workers.discard(event["worker"])
        self.report({"event": "finished", **event})
        self.pacing.note(event)
        self._reconcile(event["node"])

    def _reconcile(self, node_id: str | None = None) -> None:
        """Give back the run's claims (on `node_id`, or all) that no worker holds. One try: a
        store that does not answer is waited for by the next claim, and the run's end tries
        again."""
        if self.ctx is not None and self.ctx.halt.is_set():
            return  # a damaged database takes no more writes; the end says what is held
        try:
            released = claims.give_back_run(
                self.state, self.conn, self.run_id, self.g.id, keep=set(self.active),
                only=node_id, why="its worker ended without giving it back")
        except Exception as exc:
            if store_faults.kind(exc) is None:
                raise
            return
        if released:
            self.report({"event": "reconciled", "released": released})

    def _fill(self, ctx: RunContext, budget: RunBudget) -> dict[str, Any] | None:
        """Claim and start nodes until every worker is busy; the run's ending (or a reason to
        wait) when nothing more may start now."""
        while len(self.busy_workers) < self.workers and not self.stop.is_set():
            self._drain()  # a finished node is reported before what it made ready starts
            held = self._held(ctx, budget)
            if held is not None:
                return held
            try:
                envelope = self.pacing.store(lambda: reconnecting(self.conn, lambda: next_node(
                    self.g, claim=True, run_id=self.run_id, pid=os.getpid(), cfg=self.cfg)))
            except StoreOutage as exc:
                return {"status": "blocked", "reason": "store_unavailable", "message": str(exc)}
            except Exception as exc:
                if store_faults.kind(exc) != store_faults.DAMAGED:
                    raise
                ctx.halt_run(store_health.damage_message(self.state.db, exc))
                continue  # `hold` says so
            if envelope["node"] is None:
                return self._idle(envelope)
            node = envelope["node"]
            if node["id"] in self.active or ctx.halt.is_set():
                # Its runner gave the claim back (a verify that stopped) before its worker
                # reported: never two workers on one node. It is claimed again once that
                # worker's event is in. Or a worker found the store damaged meanwhile.
                self._unclaim(node, "its previous worker has not finished"
                              if node["id"] in self.active else "the store is damaged")
                return None
            inject("after_claim")
            self._await_finished(node.get("depends_on") or [])
            with self.dispatching:  # a worker that ended while this node was claimed is in
                held = self._held(ctx, budget) if self._drain() else None
                if held is not None:
                    self._unclaim(node, "the run stops before it starts")
                    return held
                share, route, refused = admit(ctx.reserve, self.cfg, node, self.options.runner,
                                              idle=self.workers - len(self.busy_workers),
                                              running=bool(self.active))
                if refused is not None:  # the running finish in their shares; then look again
                    self._unclaim(node, "its projected cost does not fit the run's budget")
                    return refused
                self.started_calls += 1
                worker = self._free_worker()
                self.active[node["id"]] = {"worker": worker, "role": role_of(node),
                                           "began": time.monotonic(),
                                           "runner": route.runner if route else None}
                threading.Thread(target=self._work, args=(ctx, node, worker, share),
                                 daemon=True, name=f"clavain-worker-{worker}").start()
            self.report({"event": "started", "node": node["id"], "type": node["type"],
                         "role": role_of(node), "worker": worker,
                         "attempt": node["attempts"] + 1,
                         "share_usd": share.cost_usd if share else None})
        return None

    def _held(self, ctx: RunContext, budget: RunBudget) -> dict[str, Any] | None:
        """Why no node may start now (`Pacing.hold`), or None."""
        return self.pacing.hold(halt=ctx.halt_message if ctx.halt.is_set() else None,
                                spent=self._spent(budget), started=self.started_calls,
                                limit=self.options.max_iterations)

    def _unclaim(self, node: dict[str, Any], why: str) -> None:
        """Give a claim back before its worker started (no attempt spent); one try."""
        with contextlib.suppress(Exception):
            claims.give_back(self.g, claims.Claim.of(node, self.run_id, self.g.id), why=why)

    def _await_finished(self, node_ids: list[str]) -> None:
        """Wait until the workers of `node_ids` (a claimed node's dependencies, recorded done
        a moment ago) have reported, so their ✔ comes before the ▶ of what they made ready."""
        deadline = time.monotonic() + TERM_GRACE_SECONDS
        while any(node_id in self.active for node_id in node_ids):
            if time.monotonic() >= deadline:
                return
            try:
                self._on_finished(self.finished.get(timeout=WAIT_POLL_SECONDS))
            except queue.Empty:
                continue

    def _work(self, ctx: RunContext, node: dict[str, Any], worker: int, share: Any) -> None:
        try:
            event = run_node(ctx, node, worker, share)
        except Exception as exc:  # a bug must not leave the loop waiting forever
            event = {"node": node["id"], "worker": worker, "outcome": "error",
                     "summary": f"{type(exc).__name__}: {exc}"}
        with self.dispatching:
            self.finished.put(event)

    def _free_worker(self) -> int:
        worker = next(n for n in range(1, self.workers + 1) if n not in self.busy_workers)
        self.busy_workers.add(worker)
        return worker

    def _idle(self, envelope: dict[str, Any]) -> dict[str, Any] | None:
        orphans = set(envelope.get("running") or ()) - set(self.active)
        if envelope["reason"] == "running" and orphans & set(claims.held(self.g, self.run_id)):
            self._reconcile()  # never wait on a claim of this run that no worker holds
            if not self.active:
                envelope = {**envelope, "reason": "ready"}  # look again at once
        return self.pacing.idle(envelope, self.conn, ours_running=bool(self.active))

    def _spent(self, budget: RunBudget) -> str | None:
        """What the run's budget says is spent; a budget that cannot be read stops the run
        (a limit must never be passed because its counters were out of reach)."""
        try:
            return budget.spent()
        except Exception as exc:
            return f"the run's budget could not be read ({one_line(exc)}); stopped to be safe"

    def _running(self) -> list[dict[str, Any]]:
        now = time.monotonic()
        return [{"node": node_id, "role": entry["role"], "worker": entry["worker"],
                 "elapsed": round(now - entry["began"], 1)}
                for node_id, entry in self.active.items()]

    # ------------------------------------------------------------ the report

    def _nodes(self) -> tuple[list[dict[str, Any]], str | None]:
        """The graph's nodes as the run ends; none (and why) when the store cannot say."""
        try:
            return list_nodes(self.g), None
        except Exception as exc:  # a damaged or absent store: say so rather than fail here
            return [], one_line(exc)

def supervise(state: StatePaths, options: RunOptions, report: Report | None = None
              ) -> dict[str, Any]:
    """The front door the CLI (and anything else) calls: resolve the graph, run it."""
    if not graph_store_exists(state):
        raise ClavainError(f"no workgraph yet ({state.db} is missing): `clavain init`, then "
                           "plan a sprint or add nodes with `clavain graph import`")
    options, graph_id = run_to_start(state, options)
    refuse_before_execute(state, graph_id)
    return Supervisor(state, graph_id, options, report).run()


def run_to_start(state: StatePaths, options: RunOptions) -> tuple[RunOptions, str]:
    """(the options the run goes on with, its graph). `--resume RUN`: from its record, read
    once — the run goes on as it was started (its runner, workers and packet mode, unless told
    otherwise now) on its own graph. Otherwise `options` as given and the current graph rule.
    The run and its dry run (`projection`) both ask this."""
    if options.resume:
        record = run_record.resumable(state, options.resume)
        kept = record.get("options") if isinstance(record.get("options"), dict) else {}
        return replace(options, runner=options.runner or kept.get("runner"),
                       workers=options.workers or kept.get("workers"),
                       packet_mode=options.packet_mode or kept.get("packet_mode")), \
            str(record["graph_id"])
    if options.run_id:
        from clavain.workgraph.graphs import check_id

        check_id(options.run_id)  # the same alphabet: it names a folder and a budget run
        used = run_record.run_dir(state, options.run_id) / run_record.RECORD_NAME
        if used.exists():
            raise ClavainError(f"run {options.run_id!r} exists; continue it with "
                               f"--resume {options.run_id}, or pick another id")
    return options, current_graph.resolve(state, options.graph)
