"""A person's levers on a loop run: read or reset its circuit breaker."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from clavain.errors import ClavainError
from clavain.loop import records
from clavain.loop.decide import breaker_for
from clavain.paths import StatePaths


def circuit(state: StatePaths, run_id: str | None, *,
            reset_by: dict[str, Any] | None = None) -> dict[str, Any]:
    """The breaker of a loop run; `reset_by`: a person's provenance (`clavain.authority`)
    closing it, recorded in its history."""
    run_id = run_id or records.latest_loop(state)
    if run_id is None:
        raise ClavainError("no loop run yet in this project (`clavain loop` starts one)")
    path = records.loop_dir(state, run_id) / "breaker.json"
    if not path.parent.joinpath(records.LOOP_NAME).exists():
        raise ClavainError(f"no loop run {run_id!r}")
    breaker = breaker_for(state, run_id)
    if reset_by is not None:
        from clavain.authority import describe

        breaker.reset(f"reset by {describe(reset_by)}")
    return {"run_id": run_id, **breaker.status()}


def render_circuit(status: dict[str, Any]) -> str:
    until = status.get("cooldown_until")
    lines = [f"Loop {status['run_id']}: circuit {status['state']}"
             + (f" — {status['reason']}" if status.get("reason") else "")]
    if until:
        lines.append("  probe allowed after "
                     + datetime.fromtimestamp(until, timezone.utc).strftime("%H:%M:%S UTC"))
    for step in (status.get("history") or [])[-5:]:
        lines.append(f"  {step.get('from')} → {step.get('to')}: {step.get('reason')}")
    return "\n".join(lines) + "\n"
