"""`clavain run`: drive one workgraph unattended — claim the next node, hand it to a fresh
runner on a worker thread, record what it returns — until the graph is complete, nothing can
run (the scheduler's reason is the run's), a budget is spent, or the person stops it.

Signals: SIGINT or SIGTERM sets the stop flag; every runner's process group is stopped, its
node given back unspent, and the report says what is done and what is left. A `kill -9` leaves
`supervisor.json` saying "running": the next `clavain run` (or `--resume RUN`) stops the
runners it names and releases their claims unspent before it claims anything (`run_record`).
"""

from __future__ import annotations

import os
import queue
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any

from clavain import config as config_mod
from clavain.clock import now_iso
from clavain.errors import ClavainError
from clavain.paths import StatePaths
from clavain.store.db import transaction
from clavain.store.graph_db import (
    dialect,
    graph_store_exists,
    open_graph_db,
    reconnecting,
)
from clavain.supervisor import run_record, worktrees
from clavain.supervisor.metrics import METRICS_NAME, RunMetrics
from clavain.supervisor.outcome import MAX_LIMITS_IN_A_ROW, limit_wait_seconds
from clavain.supervisor.routes import check_override, role_of
from clavain.supervisor.run_budget import RunBudget
from clavain.supervisor.worker import RunContext, run_node
from clavain.workgraph.graphs import Graph
from clavain.workgraph.nodes import list_nodes, release_claim
from clavain.workgraph.runner_env import new_run_id
from clavain.workgraph.schedule import next_node
from clavain.workgraph.shell import TERM_GRACE_SECONDS

WAIT_POLL_SECONDS = 0.25
OTHERS_POLL_SECONDS = 2.0
# On a shared server the wake is the server's notification; the poll is only a fallback.
OTHERS_POLL_SECONDS_SHARED = 15.0
READY_RETRY_SECONDS = 0.2
PROGRESS_EVERY_SECONDS = 15.0
# How a run ended → the command's exit code.
EXIT_CODES = {"complete": 0, "stopped_at_limit": 0, "blocked": 1, "budget": 3,
              "interrupted": 130}

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
        self.conn = open_graph_db(state)
        # Never $CLAVAIN_RUN_ID: a `clavain run` started inside a runner is a run of its own.
        self.run_id = options.resume or options.run_id or new_run_id()
        self.g = Graph(self.conn, graph_id, state)
        self.stop = threading.Event()
        self.signal: int | None = None
        self.finished: queue.Queue[dict[str, Any]] = queue.Queue()
        self.active: dict[str, dict[str, Any]] = {}  # node → worker, role, monotonic start
        self.busy_workers: set[int] = set()
        self.started_calls = 0
        self.rate_limited_until: float | None = None
        self.limits_in_a_row = 0
        self.unusable: str | None = None  # why the runner cannot work at all

    # ------------------------------------------------------------ the run

    def run(self) -> dict[str, Any]:
        with _Signals(self._on_signal):
            recovered = run_record.recover(self.state, self.conn)
            for entry in recovered:
                self.report({"event": "recovered", **entry})
            if self.stop.is_set():
                raise ClavainError("stopped before the run began", exit_code=130)
            use_worktrees = self.workers > 1
            if use_worktrees:
                worktrees.require_clean(self.state.project)
            record = run_record.RunRecord(self.state, self.run_id, self.g.id)
            record.data["options"] = {"runner": self.options.runner, "workers": self.workers,
                                      "packet_mode": self.options.packet_mode}
            record.start()
            metrics = RunMetrics(run_record.run_dir(self.state, self.run_id) / METRICS_NAME,
                                 state_root=self.state.root, run_id=self.run_id,
                                 graph_id=self.g.id)
            budget = RunBudget(self.state, self.run_id)
            ctx = RunContext(self.state, self.g.id, self.run_id, self.cfg, record, metrics,
                             budget, self.stop, self.options.runner, self.options.packet_mode,
                             use_worktrees)
            self.report({"event": "start", "run_id": self.run_id, "graph_id": self.g.id,
                         "workers": self.workers, "worktrees": use_worktrees,
                         "budget_problems": budget.problems})
            try:
                ending = self._loop(ctx, budget)
            except BaseException:
                self._stop_workers()  # no runner outlives a supervisor that failed
                run_record.release_run_claims(self.state, self.conn, self.run_id, self.g.id,
                                              why="its supervisor failed")
                record.finish("failed", keep_runners=bool(self.active))
                raise
            status = "interrupted" if self.signal else ending["status"]
            record.finish(status)
            summary = metrics.write(status=status, reason=ending.get("reason"))
            return self._final(status, ending, summary, recovered)

    def _stop_workers(self) -> None:
        """Stop every runner and wait for its worker, longer than a runner's grace period."""
        self.stop.set()
        deadline = time.monotonic() + TERM_GRACE_SECONDS + 5
        while self.active and time.monotonic() < deadline:
            try:
                event = self.finished.get(timeout=WAIT_POLL_SECONDS)
            except queue.Empty:
                continue
            self.active.pop(event["node"], None)

    def _on_signal(self, signum: int) -> None:
        if self.signal is not None:  # a second Ctrl-C: no more grace
            self.report({"event": "killing", "running": self._running()})
            run_record.kill_runners(self.state, self.run_id)
            return
        self.signal = signum
        self.stop.set()
        if self.active:
            self.report({"event": "stopping", "running": self._running()})

    def _loop(self, ctx: RunContext, budget: RunBudget) -> dict[str, Any]:
        ending: dict[str, Any] | None = None
        last_progress = time.monotonic()
        while True:
            if ending is None and not self.stop.is_set():
                ending = self._fill(ctx, budget)
            if not self.active:
                if ending is None or ending.get("wait"):
                    self._wait(ending)
                    ending = None
                    if not self.stop.is_set():
                        continue
                return ending or {"status": "interrupted", "reason": "interrupted"}
            try:
                event = self.finished.get(timeout=WAIT_POLL_SECONDS)
            except queue.Empty:
                if time.monotonic() - last_progress >= PROGRESS_EVERY_SECONDS:
                    last_progress = time.monotonic()
                    self.report({"event": "progress", "running": self._running()})
                continue
            self.active.pop(event["node"], None)
            self.busy_workers.discard(event["worker"])
            self.report({"event": "finished", **event})
            if event.get("outcome") == "rate_limited":
                self._note_rate_limit(event)
            else:
                self.limits_in_a_row = 0
            if event.get("outcome") == "runner_unusable":
                self.unusable = self.unusable or str(event.get("summary"))
            if ending is not None and ending.get("wait"):
                ending = None  # something changed: look again

    def _fill(self, ctx: RunContext, budget: RunBudget) -> dict[str, Any] | None:
        """Claim and start nodes until every worker is busy; the run's ending (or a reason to
        wait) when nothing more may start now."""
        while len(self.busy_workers) < self.workers and not self.stop.is_set():
            if self.unusable:
                return {"status": "blocked", "reason": "runner_unusable",
                        "message": self.unusable}
            if self.limits_in_a_row >= MAX_LIMITS_IN_A_ROW:
                return {"status": "blocked", "reason": "rate_limited",
                        "message": f"rate limited {self.limits_in_a_row} times in a row; "
                                   "a person must look"}
            if self.rate_limited_until and time.time() < self.rate_limited_until:
                return {"wait": "rate_limit", "until": self.rate_limited_until}
            spent = budget.spent()
            if spent:
                return {"status": "budget", "reason": "budget", "message": spent}
            limit = self.options.max_iterations
            if limit is not None and self.started_calls >= limit:
                return {"status": "stopped_at_limit", "reason": "max_iterations",
                        "message": f"stopped after {limit} runner call(s) as asked "
                                   "(--once / --max-iterations)"}
            envelope = reconnecting(self.conn, lambda: next_node(
                self.g, claim=True, run_id=self.run_id, pid=os.getpid(), cfg=self.cfg))
            if envelope["node"] is None:
                return self._idle(envelope)
            node = envelope["node"]
            if node["id"] in self.active:
                # Its runner gave the claim back (a verify that stopped) before its worker
                # reported: never two workers on one node. It is claimed again once that
                # worker's event is in.
                with transaction(self.conn):
                    release_claim(self.g, node["id"], self.run_id, at=now_iso(),
                                  why="its previous worker has not finished",
                                  fence=node["lock_generation"])
                return None
            self.started_calls += 1
            worker = self._free_worker()
            self.active[node["id"]] = {"worker": worker, "role": role_of(node),
                                       "began": time.monotonic()}
            threading.Thread(target=self._work, args=(ctx, node, worker), daemon=True,
                             name=f"clavain-worker-{worker}").start()
            self.report({"event": "started", "node": node["id"], "type": node["type"],
                         "role": role_of(node), "worker": worker,
                         "attempt": node["attempts"] + 1})
        return None

    def _work(self, ctx: RunContext, node: dict[str, Any], worker: int) -> None:
        try:
            event = run_node(ctx, node, worker)
        except Exception as exc:  # a bug must not leave the loop waiting forever
            event = {"node": node["id"], "worker": worker, "outcome": "error",
                     "summary": f"{type(exc).__name__}: {exc}"}
        self.finished.put(event)

    def _free_worker(self) -> int:
        worker = next(n for n in range(1, self.workers + 1) if n not in self.busy_workers)
        self.busy_workers.add(worker)
        return worker

    def _idle(self, envelope: dict[str, Any]) -> dict[str, Any] | None:
        reason = envelope["reason"]
        if reason == "running" and self.active:
            return None  # ours: wait for them
        if reason == "ready":  # given back elsewhere a moment ago: claim again
            return {"wait": "others", "until": time.time() + READY_RETRY_SECONDS,
                    "message": envelope["message"]}
        if reason == "running":
            poll = (OTHERS_POLL_SECONDS if dialect(self.conn) == "sqlite"
                    else OTHERS_POLL_SECONDS_SHARED)
            return {"wait": "others", "until": time.time() + poll,
                    "message": envelope["message"]}
        if reason == "backoff":
            until = datetime.fromisoformat(envelope["until"].replace("Z", "+00:00"))
            return {"wait": "backoff", "until": until.timestamp(),
                    "message": envelope["message"]}
        status = "complete" if reason == "all_done" else "blocked"
        return {"status": status, "reason": reason, "message": envelope["message"]}

    def _note_rate_limit(self, event: dict[str, Any]) -> None:
        """Pause the run until the limit's reset (`outcome.limit_wait_seconds`)."""
        limit = event.get("rate_limit") or {}
        self.limits_in_a_row += 1
        now = time.time()
        reset_at = datetime.fromisoformat(limit["reset_at"]) if limit.get("reset_at") else None
        seconds = limit_wait_seconds(
            reset_at, limit.get("retry_after_seconds"), now=now, in_a_row=self.limits_in_a_row,
            cap=float(config_mod.get(self.cfg, "supervisor.maxRateLimitWaitSeconds", 3600)))
        self.rate_limited_until = max(self.rate_limited_until or 0, now + seconds)

    def _wait(self, ending: dict[str, Any] | None) -> None:
        """Wait for a backoff, a rate limit's reset or other runs, with a countdown."""
        if ending is None:
            return
        until = float(ending["until"])
        last_shown = 0.0
        while not self.stop.is_set():
            left = until - time.time()
            if left <= 0:
                break
            if time.monotonic() - last_shown >= 1.0:
                last_shown = time.monotonic()
                self.report({"event": "waiting", "why": ending["wait"], "seconds_left": left,
                             "until": datetime.fromtimestamp(until, timezone.utc).isoformat(),
                             "message": ending.get("message")})
            if ending["wait"] == "rate_limit" or dialect(self.conn) == "sqlite":
                self.stop.wait(min(1.0, left))
            elif self.conn.wait_for_ready(self.g.id, min(1.0, left)):
                break  # the graph changed on the server: look again now
        if ending["wait"] == "rate_limit":
            self.rate_limited_until = None

    def _running(self) -> list[dict[str, Any]]:
        now = time.monotonic()
        return [{"node": node_id, "role": entry["role"], "worker": entry["worker"],
                 "elapsed": round(now - entry["began"], 1)}
                for node_id, entry in self.active.items()]

    # ------------------------------------------------------------ the report

    def _final(self, status: str, ending: dict[str, Any], summary: dict[str, Any],
               recovered: list[dict[str, Any]]) -> dict[str, Any]:
        nodes = list_nodes(self.g)
        done = [n["id"] for n in nodes if n["status"] == "done"]
        left = [{"id": n["id"], "status": n["status"]} for n in nodes
                if n["status"] not in ("done", "cancelled")]
        message = ending.get("message") or ""
        if status == "interrupted":
            message = f"stopped by {signal.Signals(self.signal).name}; claims released" \
                if self.signal else "stopped"
        self.conn.close()
        return {"run_id": self.run_id, "graph_id": self.g.id, "status": status,
                "reason": ending.get("reason"), "message": message,
                "exit_code": EXIT_CODES.get(status, 1), "done": done, "left": left,
                "recovered": recovered, "metrics": summary}


class _Signals:
    """SIGINT/SIGTERM call `handler` instead of raising (main thread only)."""

    def __init__(self, handler: Callable[[int], None]) -> None:
        self.handler = handler
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> _Signals:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.previous[sig] = signal.signal(sig, lambda s, _f: self.handler(s))
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)


def supervise(state: StatePaths, options: RunOptions, report: Report | None = None
              ) -> dict[str, Any]:
    """The front door the CLI (and anything else) calls: resolve the graph, run it."""
    if not graph_store_exists(state):
        raise ClavainError(f"no workgraph yet ({state.db} is missing): `clavain init`, then "
                           "plan a sprint or add nodes with `clavain graph import`")
    if options.resume:
        record = resumable(state, options.resume)
        kept = record.get("options") if isinstance(record.get("options"), dict) else {}
        # A resumed run goes on as it was started, unless told otherwise now.
        options = replace(options, runner=options.runner or kept.get("runner"),
                          workers=options.workers or kept.get("workers"),
                          packet_mode=options.packet_mode or kept.get("packet_mode"))
        return Supervisor(state, record["graph_id"], options, report).run()
    return Supervisor(state, resolve_graph(state, options), options, report).run()


def resumable(state: StatePaths, run_id: str) -> dict[str, Any]:
    """The record of run `run_id`, refused when it is missing, damaged or still running."""
    from clavain.fsutil import read_json_object

    path = run_record.run_dir(state, run_id) / run_record.RECORD_NAME
    record = read_json_object(path)
    if record is None:
        raise ClavainError(f"no run {run_id!r} to resume ({path} is missing or damaged)")
    if not isinstance(record.get("graph_id"), str):
        raise ClavainError(f"{path}: no graph_id; this record cannot be resumed")
    if record.get("status") == "running" and run_record.supervisor_alive(record):
        raise ClavainError(f"run {run_id!r} is still running (pid {record.get('pid')} on "
                           f"{record.get('host')}); stop it first")
    return record


def resolve_graph(state: StatePaths, options: RunOptions) -> str:
    """The graph of `--resume RUN` (from its record), else the current graph rule."""
    from clavain import current_graph

    if options.resume:
        return str(resumable(state, options.resume)["graph_id"])
    if options.run_id:
        from clavain.workgraph.graphs import check_id

        check_id(options.run_id)  # the same alphabet: it names a folder and a budget run
        used = run_record.run_dir(state, options.run_id) / run_record.RECORD_NAME
        if used.exists():
            raise ClavainError(f"run {options.run_id!r} exists; continue it with "
                               f"--resume {options.run_id}, or pick another id")
    return current_graph.resolve(state, options.graph)
