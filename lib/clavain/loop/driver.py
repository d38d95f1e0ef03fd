"""`clavain loop`: the fresh-context loop, headless. Each iteration: `iterate` builds the prompt
from the tree and the graph as they are, a fresh runner (the supervisor's `claude` runner, or a
configured one) works ONE item and ends with a status block, and the loop decides from what it
can check itself whether that moved anything.

It never runs away: a circuit breaker opens on iterations with no progress, the same error or
permission denials (exit 3) — one breaker per loop task, kept across runs, so a restart of the
same task finds it open until a person closes it; calls per hour are capped with a countdown,
in one window for the whole project (every loop run and session counts); a usage or rate limit
the runner reports (structured fields first, text second; a timeout is never one) is waited
out, not counted; past `budgets.windowShareMax` of a subscription window (`guards.window`, fed
by the runner's own `rate_limit_event`s) the loop waits for the reset with a countdown, or with
`--no-wait-on-limit` ends saying when it would resume (exit 7); budgets apply per loop run
(exit 5); `--max-iterations` ends it (exit 4). It
stops as done (exit 0) only through the dual gate: nothing actionable AND the latest status
block says EXIT_SIGNAL: true. An item reported BLOCKED is skipped for the rest of the run and
left for a person; when every item is blocked the loop stops with that list (exit 6).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from clavain import config as config_mod
from clavain.clock import now_iso
from clavain.errors import ClavainError
from clavain.guards.counting import SUPERVISED_RUN_VARIABLE
from clavain.loop import decide, records
from clavain.loop.decide import EXIT_CODES
from clavain.loop.iterate import RULES, iterate
from clavain.loop.limits import task_key, task_label
from clavain.loop.progress import progress_between, snapshot
from clavain.paths import StatePaths
from clavain.processes import process_identity
from clavain.stop_flag import StopFlag
from clavain.supervisor import claude_output
from clavain.supervisor.invocation import prompt_argv, runner_process_env
from clavain.supervisor.outcome import MAX_LIMITS_IN_A_ROW, api_unavailable, limit_wait_seconds
from clavain.supervisor.pacing import WINDOW_RECHECK_SECONDS, window_hold
from clavain.supervisor.process import ProcessOutcome, run_process
from clavain.supervisor.routes import CLAUDE
from clavain.supervisor.run_budget import RunBudget
from clavain.workgraph.runner_env import new_run_id, run_env

Report = Callable[[dict[str, Any]], None]


@dataclass
class LoopOptions:
    runner: str | None = None
    max_iterations: int | None = None
    rate: int | None = None
    automation: str | None = None
    graph: str | None = None
    run_id: str | None = None
    wait_on_limit: bool | None = None  # past budgets.windowShareMax (None: supervisor.waitOnLimit)


@dataclass
class Turn:
    """What one runner call came to."""

    text: str = ""
    tokens: int = 0
    cost_usd: float = 0.0
    permission_denials: int = 0
    error: str | None = None
    limit: Any = None
    unusable: str | None = None  # the runner cannot work at all (not logged in, …)


class Loop:
    def __init__(self, state: StatePaths, options: LoopOptions, report: Report | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.state, self.options = state, options
        self.report = report or (lambda event: None)
        self.clock = clock
        self.cfg = config_mod.load(state.config)
        setting = config_mod.get
        self.max_iterations = options.max_iterations or int(setting(self.cfg,
                                                                    "loop.maxIterations"))
        self.automation = options.automation or setting(self.cfg, "loop.automation")
        if self.automation not in RULES:
            raise ClavainError(f"automation {self.automation!r} is not one of "
                               f"{', '.join(RULES)}")
        self.runner = options.runner or CLAUDE
        self._argv()  # a bad runner or a missing claude binary: say so before anything runs
        self.run_id = options.run_id or new_run_id("loop")
        self.graph_id = decide.current_graph(state, options.graph)
        folder = records.loop_dir(state, self.run_id)
        if (folder / records.LOOP_NAME).exists():
            raise ClavainError(f"loop run {self.run_id!r} exists; pick another id")
        folder.mkdir(parents=True, exist_ok=True)
        # The task is fixed at the start: a graph begun while the loop runs is still its work.
        self.task = {"task_key": task_key(self.graph_id), "task_label": task_label(self.graph_id)}
        self.breaker = decide.task_breaker(state, self.task["task_key"], self.cfg, clock)
        self.rate = decide.call_rate(state, self.cfg, options.rate, clock)
        self.budget = RunBudget(state, self.run_id)
        self.stop = StopFlag()  # set by a signal handler: no lock (clavain.stop_flag)
        self.stopped_by: int | None = None
        self.blocked: list[str] = []
        self.last_status: dict[str, Any] | None = None  # the exit state: reset at every start
        self.last_problem: str | None = None  # why the last status block was rejected
        self.limits_in_a_row = 0
        self.wait_on_limit = bool(setting(self.cfg, "supervisor.waitOnLimit")) \
            if options.wait_on_limit is None else options.wait_on_limit
        self.unusable: str | None = None
        self.items_left: list[str] | None = None  # offered by the last prompt built
        self.record: dict[str, Any] = {}  # loop.json as last written


    # ------------------------------------------------------------ the run

    def run(self) -> dict[str, Any]:
        started, began = now_iso(), time.monotonic()
        loop = {"run_id": self.run_id, "graph_id": self.graph_id, "runner": self.runner,
                "automation": self.automation, "max_iterations": self.max_iterations,
                **self.task, "per_hour": self.rate.per_hour, "started_at": started,
                "status": "running", "pid": os.getpid(),
                "identity": process_identity(os.getpid()), "blocked": [], "waits": []}
        self.record = loop
        records.write_loop(self.state, self.run_id, loop)
        self.report({"event": "start", **loop})
        previous = {sig: signal.signal(sig, self._on_signal)
                    for sig in (signal.SIGINT, signal.SIGTERM)} \
            if threading.current_thread() is threading.main_thread() else {}
        try:
            ending = self._iterations()
        except BaseException as exc:  # the record must not say "running" forever
            why = str(exc) if isinstance(exc, ClavainError) else f"{type(exc).__name__}: {exc}"
            loop.update(status="error", exit_code=EXIT_CODES["error"], finished_at=now_iso(),
                        message=why, blocked=self.blocked, items_left=self.items_left)
            records.write_loop(self.state, self.run_id, loop)
            raise
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if self.stopped_by:
            ending = {"status": "interrupted", "message": "stopped by "
                      f"{signal.Signals(self.stopped_by).name}"}
        loop.update(ending, status=ending["status"], exit_code=EXIT_CODES[ending["status"]],
                    blocked=self.blocked, items_left=self.items_left, finished_at=now_iso(),
                    wall_seconds=round(time.monotonic() - began, 3))
        records.write_loop(self.state, self.run_id, loop)
        return {**loop, "summary": records.summary(self.state, self.run_id)}

    def _on_signal(self, signum: int, _frame: object) -> None:
        self.stopped_by = self.stopped_by or signum
        self.stop.set()

    def _iterations(self) -> dict[str, Any]:
        done = 0
        while not self.stop.is_set():
            self.graph_id = decide.current_graph(self.state, self.options.graph)
            if self.record.get("graph_id") != self.graph_id:  # a plan made it meanwhile
                self.record["graph_id"] = self.graph_id
                records.write_loop(self.state, self.run_id, self.record)
            number = done + 1
            offered = iterate(self.state, graph_id=self.graph_id, automation=self.automation,
                              iteration=number, skip=frozenset(self.blocked),
                              log_dir=records.loop_dir(self.state, self.run_id)
                              / f"checks-{number}", stop=self.stop,
                              previous_error=self.last_problem, run_id=self.run_id)
            if self.stop.is_set():
                break
            self.items_left = [item["id"] for item in offered["items"]]
            end = decide.ending(self.state, offered, graph_id=self.graph_id,
                                last_status=self.last_status, breaker_state=self.breaker.state,
                                done_iterations=done, max_iterations=self.max_iterations)
            if end is not None and "wait" in end:
                self._wait_until(end["wait"], end["message"])
                continue
            if end is not None:
                if end["status"] == "breaker_open":
                    end["message"] = decide.breaker_message(self.breaker, self.run_id)
                return end
            spent = self.budget.spent()
            if spent:
                return {"status": "budget", "message": spent}
            if self.limits_in_a_row >= MAX_LIMITS_IN_A_ROW:
                return {"status": "blocked", "message": f"the runner was limited "
                        f"{self.limits_in_a_row} times in a row; a person must look"}
            window = window_hold(str(self.state.root), wait_on_limit=self.wait_on_limit,
                                 command="clavain loop", now=self.clock())
            if window is not None and "wait" in window:
                self._wait_until(window["until"], window["message"], kind="window")
                continue
            if window is not None:
                return {"status": window["status"], "message": window["message"],
                        "resume_at": window["resume_at"]}
            self._wait_for_rate()
            if self.stop.is_set():
                break
            if self._one(number, offered):
                done = number
            if self.unusable:
                return {"status": "error", "message": self.unusable}
        return {"status": "interrupted", "message": "stopped"}

    def _one(self, number: int, offered: dict[str, Any]) -> bool:
        """Run iteration `number`; False when it did not count (stopped, or rate limited)."""
        self.report({"event": "iteration", "number": number,
                     "items": [item["id"] for item in offered["items"]],
                     "prompt_tokens_estimate": offered["prompt_tokens_estimate"]})
        before = snapshot(self.state, self.graph_id)
        started = now_iso()
        turn = self._call(offered["prompt"], records.loop_dir(self.state, self.run_id)
                          / f"iteration-{number}")
        decide.release_leftovers(self.state, self.run_id, self.graph_id)
        if self.stop.is_set():
            return False  # a runner stopped halfway is nobody's iteration
        if turn.unusable:
            self.unusable = turn.unusable
            return False
        self.budget.add_usage(tokens=turn.tokens, cost_usd=turn.cost_usd)
        if turn.limit is not None:  # the account's limit, not the iteration's failure
            self.limits_in_a_row += 1
            self._wait_for_limit(turn.limit)
            self.report({"event": "iterated", "iteration": number, "status": None,
                         "runner_error": turn.error, "progress": {"why": []},
                         "breaker": self.breaker.state})
            return False
        self.limits_in_a_row = 0
        status, problem = self._status(turn)
        moved = progress_between(before, snapshot(self.state, self.graph_id),
                                 status["files_modified"] if status else 0)
        # Confirming the exit when nothing is left is the loop's last step, not a stall: it
        # must not leave a no-progress count for the task's next run.
        confirmed = not offered["actionable"] and status is not None and status["exit_signal"]
        self.breaker.record(progress=moved["progress"] or confirmed,
                            error=problem or turn.error,
                            permission_denials=turn.permission_denials)
        self.last_problem = problem
        if status is not None:
            self.last_status = status
            picked = decide.note_blocked(self.blocked, status,
                                         [item["id"] for item in offered["items"]])
            if picked:
                self.report({"event": "blocked", "item": picked,
                             "why": status["next_recommendation"]})
        entry = {"iteration": number, "started_at": started, "finished_at": now_iso(),
                 "graph_id": self.graph_id, "items": [item["id"] for item in offered["items"]],
                 "actionable": offered["actionable"], "status": status,
                 "status_error": problem, "runner_error": turn.error, "rate_limited": False,
                 "progress": moved, "breaker": self.breaker.state, "tokens": turn.tokens,
                 "cost_usd": turn.cost_usd, "permission_denials": turn.permission_denials}
        records.write_iteration(self.state, self.run_id, number, entry)
        self.report({"event": "iterated", **entry})
        return True

    def _status(self, turn: Turn) -> tuple[dict[str, Any] | None, str | None]:
        from clavain.loop.status_block import parse

        try:
            return parse(turn.text), None
        except ClavainError as exc:
            return None, f"bad status block: {exc}"

    # ------------------------------------------------------------ the runner

    def _call(self, prompt: str, log_dir: Any) -> Turn:
        env = runner_process_env(self.cfg, {
            **run_env(self.state, self.run_id, self.graph_id or "default"),
            SUPERVISED_RUN_VARIABLE: self.budget.key})
        argv, timeout = self._argv()
        process = run_process(argv, stdin_text=prompt, cwd=self.state.project, env=env,
                              log_dir=log_dir, timeout=timeout, stop=self.stop)
        # The subscription's windows its output reported: the next iteration is paced by them.
        claude_output.record_runner_output(str(self.state.root), process.stdout, self.clock())
        return self._turn(process, timeout)

    def _argv(self) -> tuple[list[str], float]:
        return prompt_argv(self.cfg, self.runner,
                           config_mod.get(self.cfg, "supervisor.roles.executor.model"),
                           purpose="a loop")

    def _turn(self, process: ProcessOutcome, timeout: float) -> Turn:
        if process.stopped:
            return Turn(error="stopped")
        if process.timed_out:  # never a usage limit, whatever the output says
            return Turn(text=process.stdout, error=f"runner timed out after {timeout:g}s")
        if self.runner != CLAUDE:
            failed = process.exit_code != 0
            # Its stderr only: its stdout is the agent's reply, which may well discuss limits.
            limit = claude_output.parse("", process.stderr, process.exit_code).rate_limit \
                if failed else None
            return Turn(text=process.stdout, limit=limit,
                        error=f"runner exited {process.exit_code}" if failed else None)
        report = claude_output.parse(process.stdout, process.stderr, process.exit_code)
        # A usage limit or an API outage: waited out like the supervisor waits, never counted.
        limit = report.rate_limit or api_unavailable(report)
        if report.is_error and report.terminal_reason == "api_error" and limit is None:
            return Turn(tokens=report.tokens, cost_usd=report.cost_usd,
                        unusable=f"claude could not use the API: "
                                 f"{report.result_text[:300] or report.api_error}")
        error = report.problem
        if error is None and report.is_error:  # its subtype says "success" on API errors
            reason = report.terminal_reason or report.subtype or "error"
            error = f"claude: {reason}: {report.result_text[:200]}".rstrip(": ")
        if limit is not None:
            error = f"rate limited: {limit.message}"
        return Turn(text=report.result_text, tokens=report.tokens, cost_usd=report.cost_usd,
                    permission_denials=report.permission_denials, limit=limit, error=error)

    # ------------------------------------------------------------ waiting

    def _wait_for_rate(self) -> None:
        """Wait until the project's window takes this call (it is counted as it is taken:
        another loop may take the free call first, then this one waits again)."""
        while not self.stop.is_set():
            wait = self.rate.acquire()
            if wait <= 0:
                return
            self._wait_until(self.clock() + wait, f"calls per hour: {self.rate.per_hour} "
                             "for this project's loops")

    def _wait_for_limit(self, limit: Any) -> None:
        seconds = limit_wait_seconds(
            limit.reset_at, limit.retry_after_seconds, now=self.clock(),
            in_a_row=self.limits_in_a_row,
            cap=float(config_mod.get(self.cfg, "supervisor.maxRateLimitWaitSeconds", 3600)))
        self._wait_until(self.clock() + seconds, limit.message or "rate limit")

    def _wait_until(self, until: float, why: str, kind: str | None = None) -> None:
        """Wait with a countdown; `kind` "window": re-read the windows now and then, so a
        raised share or an early reset ends the wait."""
        # Kept in loop.json, so a page or a person sees why the run stood still.
        self.record.setdefault("waits", []).append(
            {"at": now_iso(), "why": why, "seconds": round(max(until - self.clock(), 0), 1),
             **({"kind": kind} if kind else {})})
        records.write_loop(self.state, self.run_id, self.record)
        last = 0.0
        checked = time.monotonic()
        while not self.stop.is_set():
            left = until - self.clock()
            if left <= 0:
                return
            if kind == "window" and time.monotonic() - checked >= WINDOW_RECHECK_SECONDS:
                checked = time.monotonic()
                if window_hold(str(self.state.root), wait_on_limit=True,
                               command="clavain loop", now=self.clock()) is None:
                    return
            if time.monotonic() - last >= 1:
                last = time.monotonic()
                self.report({"event": "waiting", "why": why, "seconds_left": left,
                             **({"kind": kind} if kind else {})})
                left = until - self.clock()  # (an injected clock may have moved meanwhile)
            if left > 0:
                self.stop.wait(min(1.0, left))


def run_loop(state: StatePaths, options: LoopOptions, report: Report | None = None
             ) -> dict[str, Any]:
    return Loop(state, options, report).run()
