"""A headless run keeps the sprint's gates: `clavain run`, `clavain loop` and `clavain iterate`
on the active sprint's graph are refused while the sprint has not reached its execute step — a
plan review still open (or the plan itself not recorded yet) is passed by its own command,
never by starting a run.

Asked by the supervisor before it claims anything and by the loop before it offers a node; a
graph that is not the active sprint's runs as before.
"""

from __future__ import annotations

from typing import Any

from clavain.errors import ClavainError
from clavain.paths import StatePaths
from clavain.sprint.route import GATED_STEPS

EXECUTE = "execute"


def step_before_execute(active: dict[str, Any]) -> str | None:
    """The sprint's current step when its route still runs it before execute, else None."""
    route = list(active.get("route") or [])
    current = active.get("current_step")
    if EXECUTE not in route or current not in route:
        return None
    return current if route.index(current) < route.index(EXECUTE) else None


def refuse_before_execute(state: StatePaths, graph_id: str) -> None:
    """Raise when `graph_id` is the active sprint's and its execute step has not begun."""
    from clavain.sprint.checkpoint import SPRINT_ID_PREFIX, DamagedCheckpoint, read_in

    try:
        active = read_in(state.root)
    except DamagedCheckpoint:
        if graph_id.startswith(f"{SPRINT_ID_PREFIX}-"):  # a sprint's graph bears its id
            raise  # it may be this graph's sprint: its gate cannot be told
        return  # a graph no sprint owns runs whatever the checkpoint holds
    if active is None or active.get("graph_id") != graph_id:
        return
    step = step_before_execute(active)
    if step is None:
        return
    if step in GATED_STEPS:
        how = (f"its gate passes with `clavain sprint done {step}` once the reviews are in; a "
               f"person may pass it on purpose: `/clavain:sprint --waive {step} REASON` "
               f"(`clavain sprint done {step} --waive REASON` in a terminal)")
    elif step == "plan":
        how = "record the plan first: `clavain sprint done plan --plan FILE`"
    else:
        how = f"finish it first: `clavain sprint done {step}`"
    raise ClavainError(f"graph {graph_id!r} is sprint {active['sprint_id']}'s, which is at step "
                       f"{step}, before execute: a headless run does not skip it; {how}")
