"""UserPromptSubmit: when the prompt is `/clavain:sprint …`, `/clavain:loop …` or
`/clavain:budget …`, record what follows the command for this session
(`clavain.sprint.typed_request`) with a one-time value whose hash the state database keeps
(`typed_once`), so the command's `clavain … --from-prompt` gets what the person typed without
any shell parsing it, once, in this turn, and `clavain.authority` knows a person asked.
bin/clavain-hook starts no interpreter for any other prompt. Never fails the host: a failure is
one line in hooks.log, and the command then says the request was not recorded."""

from __future__ import annotations

from typing import Any

from clavain.locate import payload_cwd


def handle(payload: dict[str, Any]) -> dict[str, Any] | None:
    try:
        from clavain.paths import StatePaths
        from clavain.project import ensure_state
        from clavain.sprint import typed_request

        for kind, command in typed_request.COMMANDS.items():
            arguments = typed_request.arguments_of(payload.get("prompt"), command)
            if arguments is not None:
                state = ensure_state(StatePaths.discover(payload_cwd(payload)))
                typed_request.record(state, payload.get("session_id"), arguments, kind,
                                     payload.get("prompt_id"))
                break
    except Exception as exc:
        from clavain.hook_log import log_failure  # only once something failed

        log_failure("UserPromptSubmit", f"{type(exc).__name__}: {exc}", payload)
    return None
