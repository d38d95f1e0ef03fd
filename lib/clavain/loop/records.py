"""What a loop run leaves in `.clavain/runs/<run>/`: `loop.json` (its options, where it stands,
the items it marked BLOCKED, how it ended), one `iteration-N.json` per iteration (the items it
was offered, the status block or why there was none, progress and why, the breaker after it,
tokens, dollars), `breaker.json` and `calls.json`; and `clavain loop summary` over them."""

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


def latest_loop(state: StatePaths) -> str | None:
    runs = [(str(record.get("started_at") or ""), path.parent.name)
            for path in (state.runs.glob(f"*/{LOOP_NAME}") if state.runs.is_dir() else [])
            if (record := read_json_object(path)) is not None]
    return max(runs)[1] if runs else None


def summary(state: StatePaths, run_id: str | None = None) -> dict[str, Any]:
    """A loop run for a person: iterations, items done and blocked, breaker trips, tokens,
    dollars, wall time, how it ended."""
    run_id = run_id or latest_loop(state)
    if run_id is None:
        raise ClavainError("no loop run yet in this project (`clavain loop` starts one)")
    loop = read_json_object(loop_dir(state, run_id) / LOOP_NAME)
    if loop is None:
        raise ClavainError(f"no loop run {run_id!r} ({loop_dir(state, run_id)} has no "
                           f"{LOOP_NAME})")
    records = iterations(state, run_id)
    statuses = [it.get("status") if isinstance(it.get("status"), dict) else {}
                for it in records]  # a damaged record counts as an iteration that said nothing
    done = [status for status in statuses if status.get("status") == "COMPLETE"]
    breaker = read_json_object(loop_dir(state, run_id) / "breaker.json") or {}
    history = breaker.get("history") if isinstance(breaker.get("history"), list) else []
    trips = sum(1 for step in history if isinstance(step, dict) and step.get("to") == "OPEN")
    return {"run_id": run_id, "status": loop.get("status"), "reason": loop.get("reason"),
            "message": loop.get("message"), "exit_code": loop.get("exit_code"),
            "iterations": len(records),
            "items_done": [str(status["task_completed"]) for status in done
                           if status.get("task_completed")],
            "blocked": loop.get("blocked") or [], "breaker_trips": trips,
            "breaker_state": breaker.get("state", "CLOSED"),
            "tokens": sum(_number(it.get("tokens"), int) for it in records),
            "cost_usd": round(sum(_number(it.get("cost_usd"), float) for it in records), 6),
            "wall_seconds": loop.get("wall_seconds"), "started_at": loop.get("started_at"),
            "finished_at": loop.get("finished_at")}


def _number(value: Any, kind: type) -> Any:
    return kind(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else kind(0)


def render_summary(data: dict[str, Any]) -> str:
    lines = [f"Loop {data['run_id']}: {data['status']} — {data.get('message') or ''}",
             f"  iterations: {data['iterations']}; items done: "
             f"{', '.join(data['items_done']) or 'none'}",
             f"  blocked (for a person): {', '.join(data['blocked']) or 'none'}",
             f"  breaker: {data['breaker_state']}, tripped {data['breaker_trips']} time(s)",
             f"  tokens: {data['tokens']:,}; cost: ${data['cost_usd']:.4f}; wall: "
             f"{float(data.get('wall_seconds') or 0):.1f}s"]
    return "\n".join(lines) + "\n"
