"""Stop: when a sprint is active and the tree has uncommitted changes, ask once per session for
a handoff note before the session ends (`decision: block` continues the turn with the reason).
Never when the host says this Stop already follows a Stop hook's block."""

from __future__ import annotations


def handle(payload: dict) -> dict | None:
    from clavain.hooks import payload_cwd
    from clavain.paths import StatePaths
    from clavain.session.handoff import ask_for_handoff

    reason = ask_for_handoff(StatePaths.discover(payload_cwd(payload)), payload)
    return {"decision": "block", "reason": reason} if reason else None
