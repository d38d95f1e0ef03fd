"""SubagentStart: record that one of this plugin's agents began (`clavain.verdicts.dispatches`),
so a review gate knows a reviewer is still running and waits for its verdict rather than
refusing (or, worse, a model reading "none yet" and moving on). Stdlib only; never fails the
host."""

from __future__ import annotations

from clavain.locate import payload_cwd

TYPE_CHECKING = False
if TYPE_CHECKING:  # `typing` imports `re`, `collections` and `contextlib`: a third of the hook
    from typing import Any


def handle(payload: dict[str, Any]) -> dict[str, Any] | None:
    try:
        from clavain.hooks.subagent_stop import plugin_agent
        from clavain.paths import StatePaths
        from clavain.sprint.checkpoint import active_sprint_id
        from clavain.verdicts import dispatches

        found = plugin_agent(payload.get("agent_type"))
        if found is None:
            return None
        state = StatePaths.discover(payload_cwd(payload))
        if not state.root.is_dir():  # not a Clavain project: nothing waits on this dispatch
            return None
        notes: list[str] = []
        dispatches.started(state, payload, active_sprint_id(state, notes), f"clavain:{found[0]}")
        if notes:
            from clavain.hook_log import log_failure  # only once something failed

            log_failure("SubagentStart", "; ".join(notes), payload)
    except Exception as exc:
        from clavain.hook_log import log_failure

        log_failure("SubagentStart", f"{type(exc).__name__}: {exc}", payload)
    return None
