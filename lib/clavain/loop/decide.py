"""The loop's decisions, written once for both front doors (`clavain loop` headless and
`/clavain:loop` in a session): which graph it works on now, whether it ends before the next
iteration and why, which item a BLOCKED report sets aside, its task's circuit breaker and the
project's calls-per-hour window (both kept in `limits`, across runs).

The dual exit gate is checked first: an iteration that finished the work ends the loop as done
even when it was the last one allowed or the breaker's third without new progress. "Nothing
actionable" means nothing at all — every check passes and the scheduler says the graph is
finished (or empty); a node in a retry backoff is waited for (headless) and a node held by
another run, waiting for a person or in a deadlock ends the loop as blocked, never as done.
"""

from __future__ import annotations

from typing import Any

from clavain import config as config_mod
from clavain.loop import limits, records
from clavain.loop.breaker import CircuitBreaker
from clavain.loop.rate_limit import CallRate
from clavain.paths import StatePaths

EXIT_CODES = {"done": 0, "error": 1, "breaker_open": 3, "max_iterations": 4, "budget": 5,
              "blocked": 6, "window_limit": 7, "interrupted": 130, "cancelled": 130}
FINISHED = ("all_done", "empty")


def current_graph(state: StatePaths, explicit: str | None) -> str | None:
    """The graph now (one may be created while the loop runs); None without a database."""
    from clavain.store.graph_db import graph_store_exists

    if not graph_store_exists(state):
        return None
    from clavain import current_graph as resolver

    return resolver.resolve(state, explicit)


def graph_idle(state: StatePaths, graph_id: str | None) -> dict[str, Any] | None:
    """The scheduler's reason nothing runs in the graph ({"reason", "message", …}), or None
    when there is no graph."""
    if graph_id is None:
        return None
    from clavain.store.graph_db import open_graph_db
    from clavain.workgraph.graphs import Graph
    from clavain.workgraph.schedule import idle_reason

    conn = open_graph_db(state)
    try:
        return idle_reason(Graph(conn, graph_id, state))
    finally:
        conn.close()


def ending(state: StatePaths, offered: dict[str, Any], *, graph_id: str | None,
           last_status: dict[str, Any] | None, breaker_state: str, done_iterations: int,
           max_iterations: int) -> dict[str, Any] | None:
    """How the loop ends before its next iteration ({"status", "message"} or, headless,
    {"wait": epoch, "message"} for a backoff), or None to go on."""
    if not offered["actionable"]:
        if offered["skipped"]:
            return {"status": "blocked", "message": "every item left is BLOCKED, waiting for a "
                    "person: " + ", ".join(offered["skipped"])}
        idle = graph_idle(state, graph_id)
        if idle is not None and idle["reason"] == "backoff":
            from datetime import datetime

            until = datetime.fromisoformat(idle["until"].replace("Z", "+00:00")).timestamp()
            return {"wait": until, "message": idle["message"]}
        if idle is not None and idle["reason"] not in FINISHED:
            return {"status": "blocked", "message": f"the workgraph cannot go on: "
                    f"{idle['message']}"}
        if last_status is not None and last_status["exit_signal"]:
            return {"status": "done", "message": "nothing actionable and the agent signalled "
                    "exit"}
    if breaker_state == "OPEN":
        return {"status": "breaker_open", "message": "circuit breaker open"}
    if done_iterations >= max_iterations:
        return {"status": "max_iterations",
                "message": f"stopped after {done_iterations} iteration(s) (--max-iterations)"}
    return None


def note_blocked(blocked: list[str], status: dict[str, Any] | None,
                 offered_ids: list[str]) -> str | None:
    """Set aside the item a BLOCKED report names (one that was offered); returns it."""
    if status is None or status["status"] != "BLOCKED":
        return None
    picked = status["task_completed"]
    if picked and picked in offered_ids and picked not in blocked:
        blocked.append(picked)
        return picked
    return None


def release_leftovers(state: StatePaths, run_id: str, graph_id: str | None) -> list[str]:
    """Give back, unspent, the nodes the run's agent claimed and did not finish."""
    if graph_id is None:
        return []
    from clavain.store.graph_db import open_graph_db
    from clavain.workgraph.claims import give_back_run

    conn = open_graph_db(state)
    try:
        return give_back_run(state, conn, run_id, graph_id,
                             why="its loop iteration ended without a result")
    finally:
        conn.close()


def task_breaker(state: StatePaths, key: str, cfg: dict[str, Any] | None = None,
                 clock: Any = None) -> CircuitBreaker:
    """The circuit breaker of one loop task (`limits.task_key`), with the configured
    thresholds: every run and session of that task shares it."""
    settings = config_mod.get(cfg if cfg is not None else config_mod.load(state.config),
                              "loop.breaker")
    extra = {"clock": clock} if clock is not None else {}
    return CircuitBreaker(limits.breaker_path(state, key), state_root=state.root,
                          no_progress=settings["noProgress"], same_error=settings["sameError"],
                          permission_denials=settings["permissionDenials"],
                          cooldown_seconds=settings["cooldownSeconds"], **extra)


def breaker_for(state: StatePaths, run_id: str, cfg: dict[str, Any] | None = None,
                clock: Any = None) -> CircuitBreaker:
    """The breaker of the loop task the run works on (its `loop.json` names it)."""
    return task_breaker(state, records.task_key_of(records.read_loop(state, run_id)), cfg,
                        clock)


def call_rate(state: StatePaths, cfg: dict[str, Any] | None = None, per_hour: int | None = None,
              clock: Any = None) -> CallRate:
    """The project's calls-per-hour window; `per_hour`: this loop's limit (default
    loop.callsPerHour)."""
    if per_hour is None:
        per_hour = int(config_mod.get(cfg if cfg is not None else config_mod.load(state.config),
                                      "loop.callsPerHour"))
    extra = {"clock": clock} if clock is not None else {}
    return CallRate(limits.calls_path(state), state_root=state.root, per_hour=per_hour, **extra)


RESET_CIRCUIT = ("`clavain loop --reset-circuit --run {run}` in a terminal, or "
                 "`/clavain:loop --reset-circuit {run}` in Claude Code")
RESET_RATE = "`clavain loop --reset-rate` in a terminal, or `/clavain:loop --reset-rate`"


def breaker_message(breaker: CircuitBreaker, run_id: str) -> str:
    return (f"circuit breaker open: {breaker.status().get('reason')} (a person closes it after "
            f"a look: {RESET_CIRCUIT.format(run=run_id)})")


def rate_message(rate: CallRate) -> str:
    """Why the window refuses a call now, and what frees it."""
    from datetime import datetime, timezone

    status = rate.status()
    at = status["next_free_at"]
    free = (f"at {datetime.fromtimestamp(at, timezone.utc).strftime('%H:%M:%S UTC')}" if at
            else "now")
    return (f"calls per hour: {status['calls_in_window']} loop call(s) in this project in the "
            f"last hour, the limit is {rate.per_hour}; the next may start {free}, or a "
            f"person empties the window ({RESET_RATE})")


def admit_session(state: StatePaths, graph_id: str | None, task: str,
                  cfg: dict[str, Any]) -> str:
    """Before `/clavain:loop` starts: ClavainError when its task's breaker is open (it stays
    open across runs) or the project's window is full; else the call of iteration 1 is counted
    and the path of the task's breaker returned."""
    from clavain.errors import ClavainError

    key = limits.task_key(graph_id, task)
    breaker = task_breaker(state, key, cfg)
    if breaker.state == "OPEN":
        last = records.latest_loop(state, task_key=key) or "RUN"
        raise ClavainError(f"this loop task ({limits.task_label(graph_id, task)}) has its "
                           + breaker_message(breaker, last))
    refused = session_call(state, cfg)
    if refused:
        raise ClavainError(refused)
    return str(breaker.path)


def session_call(state: StatePaths, cfg: dict[str, Any] | None = None) -> str | None:
    """Count one iteration of a session's loop against the project's window; None when it
    was counted, else why not (a Stop hook cannot wait an hour: the loop ends instead)."""
    rate = call_rate(state, cfg)
    wait = rate.acquire()
    return rate_message(rate) if wait > 0 else None
