"""The loop's decisions, written once for both front doors (`clavain loop` headless and
`/clavain:loop` in a session): which graph it works on now, whether it ends before the next
iteration and why, which item a BLOCKED report sets aside, and its circuit breaker.

The dual exit gate is checked first: an iteration that finished the work ends the loop as done
even when it was the last one allowed or the breaker's third without new progress. "Nothing
actionable" means nothing at all — every check passes and the scheduler says the graph is
finished (or empty); a node in a retry backoff is waited for (headless) and a node held by
another run, waiting for a person or in a deadlock ends the loop as blocked, never as done.
"""

from __future__ import annotations

from typing import Any

from clavain import config as config_mod
from clavain.loop import records
from clavain.loop.breaker import CircuitBreaker
from clavain.paths import StatePaths

EXIT_CODES = {"done": 0, "error": 1, "breaker_open": 3, "max_iterations": 4, "budget": 5,
              "blocked": 6, "interrupted": 130, "cancelled": 130}
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
    from clavain.supervisor import run_claims

    conn = open_graph_db(state)
    try:
        return run_claims.give_back(state, conn, run_id, graph_id,
                                    why="its loop iteration ended without a result")
    finally:
        conn.close()


def breaker_for(state: StatePaths, run_id: str, cfg: dict[str, Any] | None = None,
                clock: Any = None) -> CircuitBreaker:
    """The run's circuit breaker, with the configured thresholds."""
    settings = config_mod.get(cfg if cfg is not None else config_mod.load(state.config),
                              "loop.breaker")
    extra = {"clock": clock} if clock is not None else {}
    return CircuitBreaker(records.loop_dir(state, run_id) / "breaker.json",
                          state_root=state.root, no_progress=settings["noProgress"],
                          same_error=settings["sameError"],
                          permission_denials=settings["permissionDenials"],
                          cooldown_seconds=settings["cooldownSeconds"], **extra)


def breaker_message(breaker: CircuitBreaker, run_id: str) -> str:
    return (f"circuit breaker open: {breaker.status().get('reason')} (`clavain loop "
            f"--reset-circuit --run {run_id}` after a look)")
