"""What a loop run leaves in `.clavain/runs/<run>/`: `loop.json` (its options, its task's key,
where it stands, the items it marked BLOCKED, the items still offered when it ended, how it
ended) and one `iteration-N.json` per iteration (the items it was offered, the status block or
why there was none, progress and why, the breaker after it, tokens, dollars); and `clavain loop
summary` over them. The breaker and the calls-per-hour window are not here: they outlive runs
(`limits`)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from clavain.errors import ClavainError
from clavain.fsutil import read_json_object, write_json_atomic
from clavain.paths import StatePaths
from clavain.supervisor.run_record import run_dir

LOOP_NAME = "loop.json"
_ITERATION = re.compile(r"^iteration-(\d+)\.json$")


def loop_dir(state: StatePaths, run_id: str) -> Path:
    return run_dir(state, run_id)


def write_loop(state: StatePaths, run_id: str, data: dict[str, Any]) -> None:
    write_json_atomic(loop_dir(state, run_id) / LOOP_NAME, data, inside=state.root)


def read_loop(state: StatePaths, run_id: str) -> dict[str, Any]:
    """The run's `loop.json`; ClavainError when there is none."""
    loop = read_json_object(loop_dir(state, run_id) / LOOP_NAME)
    if loop is None:
        raise ClavainError(f"no loop run {run_id!r} ({loop_dir(state, run_id)} has no "
                           f"{LOOP_NAME})")
    return loop


def task_key_of(loop: dict[str, Any]) -> str:
    """The key of the task a run worked on: recorded, or (a run recorded before keys were)
    worked out from its graph and task the same way."""
    from clavain.loop import limits

    key = loop.get("task_key")
    if key is None:
        graph, task = loop.get("graph_id"), loop.get("task")
        key = limits.task_key(graph if isinstance(graph, str) else None,
                              task if isinstance(task, str) else "")
    return limits.checked_key(key)


def write_iteration(state: StatePaths, run_id: str, number: int, data: dict[str, Any]) -> None:
    write_json_atomic(loop_dir(state, run_id) / f"iteration-{number}.json", data,
                      inside=state.root)


def iterations(state: StatePaths, run_id: str) -> list[dict[str, Any]]:
    folder = loop_dir(state, run_id)
    found = []
    for path in folder.iterdir() if folder.is_dir() else []:
        match = _ITERATION.match(path.name)
        record = read_json_object(path) if match else None
        if record is not None:
            found.append((int(match.group(1)), record))
    return [record for _, record in sorted(found, key=lambda pair: pair[0])]


def latest_loop(state: StatePaths, *, task_key: str | None = None) -> str | None:
    """The run started last (of the task `task_key`, when given)."""
    runs = []
    for path in state.runs.glob(f"*/{LOOP_NAME}") if state.runs.is_dir() else []:
        record = read_json_object(path)
        if record is None:
            continue
        if task_key is not None:
            try:
                if task_key_of(record) != task_key:
                    continue
            except ClavainError:
                continue
        runs.append((str(record.get("started_at") or ""), path.parent.name))
    return max(runs)[1] if runs else None


def summary(state: StatePaths, run_id: str | None = None) -> dict[str, Any]:
    """A loop run for a person: iterations, what checks confirmed done and what the agent
    only claimed, blocked items, breaker trips, tokens, dollars, wall time, how it ended."""
    run_id = run_id or latest_loop(state)
    if run_id is None:
        raise ClavainError("no loop run yet in this project (`clavain loop` starts one)")
    loop = read_loop(state, run_id)
    records = iterations(state, run_id)
    confirmed, claimed = _claims(state, loop, records)
    states = [str(it.get("breaker")) for it in records]
    trips = sum(1 for i, now in enumerate(states)
                if now == "OPEN" and (i == 0 or states[i - 1] != "OPEN"))
    return {"run_id": run_id, "status": loop.get("status"), "reason": loop.get("reason"),
            "message": loop.get("message"), "exit_code": loop.get("exit_code"),
            "iterations": len(records), "confirmed_done": confirmed,
            "claimed_not_confirmed": claimed,
            "blocked": loop.get("blocked") or [], "breaker_trips": trips,
            "breaker_state": _breaker_state(state, loop),
            "tokens": sum(_number(it.get("tokens"), int) for it in records),
            "cost_usd": round(sum(_number(it.get("cost_usd"), float) for it in records), 6),
            "wall_seconds": loop.get("wall_seconds"), "started_at": loop.get("started_at"),
            "finished_at": loop.get("finished_at")}


def _claims(state: StatePaths, loop: dict[str, Any], records: list[dict[str, Any]]
            ) -> tuple[list[str], list[str]]:
    """(items the agent reported COMPLETE that Clavain saw done, items it reported COMPLETE
    that nothing confirmed), each once, in the order first claimed. A check is confirmed when
    it was offered and the next prompt (or the run's end) no longer offered it — it passed; a
    workgraph node when the graph says it is done. A damaged record says nothing."""
    from clavain.loop.progress import nodes_done

    blocked = set(loop.get("blocked") or [])
    claims: list[tuple[str, bool | None]] = []  # (item, its check passed after; None: a node)
    for i, record in enumerate(records):
        status = record.get("status") if isinstance(record.get("status"), dict) else {}
        item = status.get("task_completed")
        if status.get("status") != "COMPLETE" or not item or not isinstance(item, str):
            continue
        if not item.startswith("check:"):
            claims.append((item, None))
            continue
        offered = record.get("items")
        after = records[i + 1].get("items") if i + 1 < len(records) else loop.get("items_left")
        passed = (isinstance(offered, list) and item in offered and isinstance(after, list)
                  and item not in after and item not in blocked)
        claims.append((item, passed))
    graph = loop.get("graph_id")
    nodes = [item for item, passed in claims if passed is None]
    done = nodes_done(state, graph if isinstance(graph, str) else None, nodes) if nodes \
        else set()
    confirmed: list[str] = []
    for item, passed in claims:
        if (passed or (passed is None and item in done)) and item not in confirmed:
            confirmed.append(item)
    claimed = list(dict.fromkeys(item for item, _ in claims if item not in confirmed))
    return confirmed, claimed


def _breaker_state(state: StatePaths, loop: dict[str, Any]) -> str:
    """Where the run's task's breaker stands now (it is shared with the task's other runs)."""
    from clavain.loop import limits

    try:
        saved = read_json_object(limits.breaker_path(state, task_key_of(loop))) or {}
    except ClavainError:
        saved = {}
    return str(saved.get("state") or "CLOSED")


def _number(value: Any, kind: type) -> Any:
    return kind(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else kind(0)


def render_summary(data: dict[str, Any]) -> str:
    lines = [f"Loop {data['run_id']}: {data['status']} — {data.get('message') or ''}",
             f"  iterations: {data['iterations']}",
             "  confirmed done (checks passed / graph says done): "
             f"{', '.join(data['confirmed_done']) or 'none'}",
             "  claimed by the agent, not confirmed: "
             f"{', '.join(data['claimed_not_confirmed']) or 'none'}",
             f"  blocked (for a person): {', '.join(data['blocked']) or 'none'}",
             f"  breaker: {data['breaker_state']}, tripped {data['breaker_trips']} time(s)",
             f"  tokens: {data['tokens']:,}; cost: ${data['cost_usd']:.4f}; wall: "
             f"{float(data.get('wall_seconds') or 0):.1f}s"]
    return "\n".join(lines) + "\n"
