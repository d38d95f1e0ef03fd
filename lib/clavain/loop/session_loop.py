"""`/clavain:loop` inside a session: the Stop hook continues the turn with the next iteration
prompt until the headless loop's rules (driver.py) end it: the dual exit gate (nothing
actionable AND the latest status block says EXIT_SIGNAL: true), BLOCKED items skipped for the
rest of the run (all blocked ends it), the breaker, the iteration cap.

State: `.clavain/loops/<session-id>.json`, written by `start` (the command's `!` line, with the
host's $CLAUDE_CODE_SESSION_ID), removed when the loop ends; the run's records are in
`.clavain/runs/<run>/` as for `clavain loop` (`clavain loop summary` reads both). A Stop from a
session without a state file costs one `os.path.exists` and is never looped.

`stop_hook_active`: without a loop it changes nothing here. With one it is True on every
continuation (2.1.330: from a user turn's first Stop-hook block to the turn's end, tool calls
included), so it is no reason to stop. False while `blocks_in_row` > 0 means the host ended the
chain without us (its cap, or a person interrupting): the Stop ending the person's next message
resumes the loop (a valid status block counts as the iteration; else it is asked for again).

The host's cap (verified on 2.1.330): the 9th Stop-hook block in a row with no tool call in
between is overridden and the turn ends; a tool call resets the count;
CLAUDE_CODE_STOP_HOOK_BLOCK_CAP (environment or a settings file's `env`) raises it. Tool calls
are invisible here, so `blocks_in_row` is an upper bound: from the cap on, continuations say
so. Real iterations use tools; a text-only model meets the breaker (noProgress 3) first.
"""

from __future__ import annotations

import os
from typing import Any

from clavain.loop.session_state import LOOPS

FORMAT_VERSION = 1
CAP_VARIABLE = "CLAUDE_CODE_STOP_HOOK_BLOCK_CAP"
HOST_CAP_DEFAULT = 8
STOP_HOOK_SECONDS = 600  # hooks/hooks.json: the checks must finish well within it
CHECKS_SECONDS = STOP_HOOK_SECONDS - 60  # the checks' total in one Stop; the rest is margin
REASON_MAX_CHARS = 9_000  # the host shows a file path and a preview past 10,000 characters
TASK_MAX_CHARS = 2_000
MESSAGE_MAX_CHARS = 400_000  # the status block is at the end
_KINDS = {"run_id": str, "task": str, "iteration": int, "max_iterations": int,
          "automation": str, "blocked": list, "items": list, "actionable": bool,
          "snapshot": dict, "breaker": str, "blocks_in_row": int, "host_cuts": int,
          "started_epoch": (int, float), "iteration_started_at": str}


def host_cap() -> int:
    try:
        return max(1, int(os.environ.get(CAP_VARIABLE) or HOST_CAP_DEFAULT))
    except ValueError:
        return HOST_CAP_DEFAULT


def _path(state: Any, session_id: object) -> Any:
    from clavain.sprint.typed_request import checked_session_id

    return state.root / LOOPS / f"{checked_session_id(session_id)}.json"


def start(state: Any, session_id: object, task: str = "", *, max_iterations: int | None = None,
          automation: str | None = None, graph: str | None = None) -> dict[str, Any]:
    """Register a loop for this session; {"run_id", "prompt"} (iteration 1's prompt)."""
    import time

    from clavain import config as config_mod
    from clavain.clock import now_iso
    from clavain.errors import ClavainError
    from clavain.loop import decide, records
    from clavain.loop.iterate import RULES, iterate
    from clavain.workgraph.runner_env import new_run_id

    path = _path(state, session_id)
    if path.exists():
        raise ClavainError(f"a loop is already registered for session {session_id} ({path}): "
                           "/clavain:loop --cancel first")
    cfg = config_mod.load(state.config)
    automation = automation or config_mod.get(cfg, "loop.automation")
    if automation not in RULES:
        raise ClavainError(f"automation {automation!r} is not one of {', '.join(RULES)}")
    too_long = checks_too_long(config_mod.get(cfg, "checks", []))
    if too_long:
        raise ClavainError(too_long)
    graph_id = decide.current_graph(state, graph)
    breaker = decide.admit_session(state, graph_id, task, cfg)  # the task's, across runs
    run_id = new_run_id("loop")
    folder = records.loop_dir(state, run_id)
    folder.mkdir(parents=True, exist_ok=True)
    offered = iterate(state, graph_id=graph_id, automation=automation, iteration=1,
                      log_dir=folder / "checks-1", deadline=checks_deadline())
    limit = max_iterations or int(config_mod.get(cfg, "loop.maxIterations"))
    data = {"version": FORMAT_VERSION, "session_id": session_id, "run_id": run_id,
            "graph_id": graph_id, "task": task, "iteration": 1, "max_iterations": limit,
            "automation": automation, "blocked": [], "items": [], "actionable": False,
            "last_status": None, "snapshot": {}, "breaker": breaker,
            "blocks_in_row": 0, "host_block_cap": host_cap(), "host_cuts": 0,
            "started_at": now_iso(), "started_epoch": time.time(),
            "iteration_started_at": now_iso()}
    records.write_loop(state, run_id, {
        "run_id": run_id, "graph_id": graph_id, "runner": "session", "session_id": session_id,
        "task": task, "automation": automation, "max_iterations": limit,
        "started_at": data["started_at"], "status": "running", "blocked": []})
    return {"run_id": run_id, "prompt": _next(state, data, offered, count=False)}


def checks_too_long(checks: list[dict[str, Any]]) -> str | None:
    """Why these checks cannot run in a Stop hook (one line), or None: every check run to its
    timeout, MAX_PARALLEL at a time, must fit in CHECKS_SECONDS."""
    from clavain.loop.checks import MAX_PARALLEL, worst_case_seconds

    worst = worst_case_seconds(checks)
    if worst <= CHECKS_SECONDS:
        return None
    return (f"the checks in .clavain/config.json may take {worst:g} s together (each to its "
            f"timeout, {MAX_PARALLEL} at a time), more than the {CHECKS_SECONDS} s a Stop hook "
            f"gives them (Claude Code stops it at {STOP_HOOK_SECONDS} s): lower their "
            "timeouts or keep fewer checks (`clavain loop` in a terminal has no such limit)")


def checks_deadline() -> float:
    """When this Stop hook's checks must be done (`time.monotonic()`): CHECKS_SECONDS from the
    hook's start (bin/clavain-hook's, when known). A check still running then is stopped and
    reported as not finished (`checks.run_checks`)."""
    import time

    from clavain.clock import launcher_started

    started = launcher_started()
    elapsed = max(0.0, time.perf_counter() - started) if started is not None else 0.0
    return time.monotonic() + CHECKS_SECONDS - elapsed


def cancel(state: Any, session_id: object) -> dict[str, Any]:
    """End this session's loop (state removed, loop.json finished); the run's summary."""
    from clavain.errors import ClavainError
    from clavain.loop import records

    path = _path(state, session_id)
    data = _load(path, session_id)
    if data is None:
        if path.exists():
            path.unlink()
            raise ClavainError(f"the loop state {path} was damaged; removed")
        raise ClavainError(f"no loop registered for session {session_id}")
    _end(state, data, "cancelled", f"cancelled during iteration {data['iteration']}")
    return records.summary(state, data["run_id"])


def _end(state: Any, data: dict[str, Any], status: str, message: str) -> dict[str, Any] | None:
    import contextlib
    import time

    from clavain.clock import now_iso
    from clavain.fsutil import read_json_object
    from clavain.loop import decide, records

    with contextlib.suppress(FileNotFoundError):
        _path(state, data["session_id"]).unlink()
    loop = read_json_object(records.loop_dir(state, data["run_id"]) / records.LOOP_NAME) or {
        "run_id": data["run_id"]}
    loop.update(status=status, message=message, exit_code=decide.EXIT_CODES[status],
                blocked=data["blocked"], items_left=data.get("items_left"),
                finished_at=now_iso(), host_cuts=data["host_cuts"],
                wall_seconds=round(time.time() - data["started_epoch"], 3))
    records.write_loop(state, data["run_id"], loop)
    if status == "done":
        return None
    return {"systemMessage": f"Clavain loop {status.replace('_', ' ')}: {message} "
                             f"(`clavain loop summary {data['run_id']}`)"}


def on_stop(payload: dict[str, Any]) -> dict[str, Any] | None:
    """The Stop hook's answer for a session with a loop (module docstring). Anything that goes
    wrong ends the loop with a message (and a line in hooks.log), never a traceback."""
    import contextlib

    from clavain.hook_log import log_failure
    from clavain.locate import payload_cwd
    from clavain.paths import StatePaths

    state = StatePaths.discover(payload_cwd(payload))
    try:
        path = _path(state, payload.get("session_id"))
    except Exception:
        return None  # not a session id: never looped
    try:
        return _on_stop(state, path, payload)
    except Exception as exc:
        problem = f"{type(exc).__name__}: {str(exc)[:300]}"
        log_failure("Stop", f"loop: {problem}", payload)
        with contextlib.suppress(Exception):  # the run's record says how it ended, if it can
            data = _load(path, payload.get("session_id"))
            if data is not None:
                _end(state, data, "error", problem)
        with contextlib.suppress(OSError):
            path.unlink()
        return {"systemMessage": f"Clavain loop ended: {problem} (.clavain/logs/hooks.log)"}


def _on_stop(state: Any, path: Any, payload: dict[str, Any]) -> dict[str, Any] | None:
    from clavain.errors import ClavainError
    from clavain.loop.status_block import parse

    data = _load(path, payload.get("session_id"))
    if data is None:
        path.unlink()
        return {"systemMessage": f"Clavain loop ended: its state file {path} was damaged "
                                 "(removed)."}
    resumed = not payload.get("stop_hook_active") and data["blocks_in_row"] > 0
    if not payload.get("stop_hook_active"):
        data["blocks_in_row"] = 0
    text = payload.get("last_assistant_message")
    try:
        status, problem = parse(text[-MESSAGE_MAX_CHARS:] if isinstance(text, str) else ""), None
    except ClavainError as exc:
        status, problem = None, f"bad status block: {exc}"
    if resumed:
        data["host_cuts"] += 1
        if status is None:  # the person's own turn, not an iteration: ask for it again
            note = ("Resumed: Claude Code ended the previous turn before this iteration ended "
                    f"(its cap on Stop-hook continuations, or an interruption; "
                    f"{data['host_cuts']} so far).")
            offered = _iterate(state, data, data["iteration"])
            return {"decision": "block", "systemMessage": f"Clavain loop: {note}",
                    "reason": _next(state, data, offered, note=note, keep_snapshot=True)}
    return _after_iteration(state, data, status, problem)


def _after_iteration(state: Any, data: dict[str, Any], status: dict[str, Any] | None,
                     problem: str | None) -> dict[str, Any] | None:
    """Record the iteration that just ended, then end the loop or ask for the next one."""
    from clavain.clock import now_iso
    from clavain.loop import decide, records
    from clavain.loop.progress import Snapshot, progress_between, snapshot

    number = data["iteration"]
    moved = progress_between(Snapshot(**data["snapshot"]), snapshot(state, data["graph_id"]),
                             status["files_modified"] if status else 0)
    decide.release_leftovers(state, data["run_id"], data["graph_id"])
    breaker = decide.breaker_for(state, data["run_id"])
    breaker.record(progress=moved["progress"], error=problem)
    data["last_problem"] = problem
    if status is not None:
        data["last_status"] = status
        decide.note_blocked(data["blocked"], status, data["items"])
    records.write_iteration(state, data["run_id"], number, {
        "iteration": number, "started_at": data["iteration_started_at"],
        "finished_at": now_iso(), "graph_id": data["graph_id"], "items": data["items"],
        "actionable": data["actionable"], "status": status, "status_error": problem,
        "runner_error": None, "rate_limited": False, "progress": moved,
        "breaker": breaker.state, "tokens": 0, "cost_usd": 0.0, "permission_denials": 0,
        "session_id": data["session_id"]})
    data["graph_id"] = decide.current_graph(state, None)  # a graph may have begun meanwhile
    offered = _iterate(state, data, number + 1)
    data["items_left"] = [item["id"] for item in offered["items"]]  # what confirms claims
    end = decide.ending(state, offered, graph_id=data["graph_id"],
                        last_status=data["last_status"], breaker_state=breaker.state,
                        done_iterations=number, max_iterations=data["max_iterations"])
    if end is not None and "wait" in end:  # a Stop hook cannot wait out a backoff
        return _end(state, data, "blocked", f"{end['message']}; run /clavain:loop again "
                    "after it")
    if end is not None:
        message = (decide.breaker_message(breaker, data["run_id"])
                   if end["status"] == "breaker_open" else end["message"])
        return _end(state, data, end["status"], message)
    refused = decide.session_call(state)  # the project's calls per hour
    if refused:
        return _end(state, data, "blocked", refused)
    data.update(iteration=number + 1, iteration_started_at=now_iso())
    return {"decision": "block", "reason": _next(state, data, offered)}


def _iterate(state: Any, data: dict[str, Any], number: int) -> dict[str, Any]:
    from clavain.loop import records
    from clavain.loop.iterate import iterate

    return iterate(state, graph_id=data["graph_id"], automation=data["automation"],
                   iteration=number, skip=frozenset(data["blocked"]),
                   previous_error=data.get("last_problem"), run_id=data["run_id"],
                   log_dir=records.loop_dir(state, data["run_id"]) / f"checks-{number}",
                   deadline=checks_deadline())


def _next(state: Any, data: dict[str, Any], offered: dict[str, Any], *, count: bool = True,
          note: str | None = None, keep_snapshot: bool = False) -> str:
    """Save the state for the iteration about to run; its prompt, iteration count first."""
    from clavain.clock import now_iso
    from clavain.fsutil import write_json_atomic
    from clavain.loop.progress import snapshot

    if not keep_snapshot:
        taken = snapshot(state, data["graph_id"])
        data["snapshot"] = {"head": taken.head, "tree": taken.tree,
                            "done_nodes": taken.done_nodes}
    data.update(items=[item["id"] for item in offered["items"]],
                actionable=offered["actionable"], host_block_cap=host_cap(),
                blocks_in_row=data["blocks_in_row"] + (1 if count else 0), updated_at=now_iso())
    lines = [f"Clavain loop — iteration {data['iteration']} of {data['max_iterations']} "
             f"(run {data['run_id']}; /clavain:loop --cancel ends it). Work ONE item, end "
             "your reply with the status block; the Stop hook re-runs the checks."]
    if note:
        lines.append(note)
    if data["task"]:
        task = data["task"]
        lines.append("Task: " + (task if len(task) <= TASK_MAX_CHARS
                                 else task[:TASK_MAX_CHARS] + " […]"))
    if data["blocks_in_row"] >= data["host_block_cap"]:
        lines.append(f"Note: Claude Code ends a turn after {data['host_block_cap']} Stop-hook "
                     f"continuations in a row with no tool call ({CAP_VARIABLE} raises it); "
                     "if it does, the loop waits and any message resumes it.")
    text = "\n".join([*lines, "", offered["prompt"]])
    if len(text) > REASON_MAX_CHARS:
        text = text[:REASON_MAX_CHARS] + "\n[…cut: `clavain iterate` prints it all]"
    write_json_atomic(_path(state, data["session_id"]), data, inside=state.root)
    return text


def _load(path: Any, session_id: object) -> dict[str, Any] | None:
    """The state, or None when missing or damaged (a field missing or of the wrong kind)."""
    from clavain.fsutil import read_json_object
    from clavain.loop.iterate import RULES
    from clavain.paths import safe_path_part

    data = read_json_object(path)
    if data is None or data.get("version") != FORMAT_VERSION \
            or data.get("session_id") != session_id:
        return None
    if not all(isinstance(data.get(key), kind) and (kind is bool or not isinstance(
            data.get(key), bool)) for key, kind in _KINDS.items()):
        return None
    snap, last = data["snapshot"], data.get("last_status")
    if (safe_path_part(data["run_id"]) != data["run_id"] or data["automation"] not in RULES
            or data["iteration"] < 1 or data["max_iterations"] < 1
            or not all(isinstance(i, str) for i in data["blocked"] + data["items"])
            or set(snap) != {"head", "tree", "done_nodes"}
            or not isinstance(snap["done_nodes"], int)
            or not isinstance(data.get("graph_id"), (str, type(None)))
            or not (last is None or (isinstance(last, dict)
                                     and isinstance(last.get("exit_signal"), bool)))):
        return None
    return data
