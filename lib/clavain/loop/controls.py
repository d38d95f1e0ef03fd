"""A person's levers on the loop's limits: read or close the circuit breaker of a run's task,
read or empty the project's calls-per-hour window. The callers ask `clavain.authority` first;
these record who decided."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from clavain.errors import ClavainError
from clavain.loop import limits, records
from clavain.loop.decide import breaker_for, call_rate
from clavain.paths import StatePaths


def circuit(state: StatePaths, run_id: str | None, *,
            reset_by: dict[str, Any] | None = None) -> dict[str, Any]:
    """The breaker of the task a loop run works on (shared by every run of that task);
    `reset_by`: a person's provenance (`clavain.authority`) closing it, recorded in its
    history."""
    run_id = run_id or records.latest_loop(state)
    if run_id is None:
        raise ClavainError("no loop run yet in this project (`clavain loop` starts one)")
    loop = records.read_loop(state, run_id)
    breaker = breaker_for(state, run_id)
    if reset_by is not None:
        from clavain.authority import describe

        breaker.reset(f"reset by {describe(reset_by)}")
    graph, task = loop.get("graph_id"), loop.get("task")
    label = loop.get("task_label") or limits.task_label(
        graph if isinstance(graph, str) else None, task if isinstance(task, str) else "")
    return {"run_id": run_id, "task_key": records.task_key_of(loop), "task_label": label,
            **breaker.status()}


def rate(state: StatePaths, *, reset_by: dict[str, Any] | None = None) -> dict[str, Any]:
    """The project's calls-per-hour window (at loop.callsPerHour); `reset_by`: a person's
    provenance emptying it."""
    window = call_rate(state)
    if reset_by is not None:
        from clavain.authority import describe

        window.reset(describe(reset_by))
    return window.status()


def _at(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%H:%M:%S UTC")


def render_circuit(status: dict[str, Any]) -> str:
    lines = [f"Loop {status['run_id']} ({status.get('task_label')}): circuit {status['state']}"
             + (f" — {status['reason']}" if status.get("reason") else "")]
    if status["state"] == "OPEN" and status.get("opened_at"):
        lines.append(f"  open since {_at(status['opened_at'])}: every run of this task stops "
                     "until a person closes it")
    for step in (status.get("history") or [])[-5:]:
        lines.append(f"  {step.get('from')} → {step.get('to')}: {step.get('reason')}")
    return "\n".join(lines) + "\n"


def render_rate(status: dict[str, Any]) -> str:
    free = status.get("next_free_at")
    line = (f"Loop calls in this project in the last hour: {status['calls_in_window']} of "
            f"{status['per_hour']}" + (f"; the next may start at {_at(free)}" if free else ""))
    reset = status.get("last_reset")
    if reset:
        line += f"\n  last emptied by {reset.get('by')} at {reset.get('at')}"
    return line + "\n"
