"""Stop: a session running `/clavain:loop` gets its loop's answer (`clavain.loop.session_loop`:
the next iteration, or the loop's end) and nothing else. Otherwise, when a sprint is active and
the tree has uncommitted changes, ask once per session for a handoff note before the session
ends (`decision: block` continues the turn with the reason), never when the host says this Stop
already follows a Stop hook's block. Stop runs after every turn: without a loop for this session
(one `os.path.exists`) and without an active sprint (`sprint.checkpoint.read_in`, the one
reader) it returns before importing `pathlib` (`clavain.locate` and `loop.session_state` are
`os.path` only)."""

from __future__ import annotations


def handle(payload: dict) -> dict | None:
    from clavain import locate
    from clavain.locate import payload_cwd
    from clavain.loop.session_state import state_file

    root = locate.state_dir(locate.project_dir(payload_cwd(payload)))
    if state_file(root, payload.get("session_id")):
        from clavain.loop.session_loop import on_stop

        return on_stop(payload)
    if payload.get("stop_hook_active"):
        return None
    from clavain.sprint import checkpoint

    try:
        if checkpoint.read_in(root) is None:
            return None
    except checkpoint.DamagedCheckpoint:  # the next sprint command names it, not a Stop
        return None
    from clavain.paths import StatePaths
    from clavain.session.handoff import ask_for_handoff

    reason = ask_for_handoff(StatePaths.discover(payload_cwd(payload)), payload)
    return {"decision": "block", "reason": reason} if reason else None
