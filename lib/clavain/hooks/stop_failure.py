"""StopFailure: the host ended a turn on an API error. Its structured `error` (one of the
host's names: `rate_limit`, `overloaded`, `billing_error`, …; never the message text, which
`error_details` carries) is recorded when it is `rate_limit` (`guards.window.record_stop`), so
`clavain budget status` can say the session was stopped by a limit and when. hooks.json runs
this only for `rate_limit` (the event's matcher is its `error`). Stdlib only; never fails the
host."""

from __future__ import annotations

from typing import Any

from clavain.locate import payload_cwd

RECORDED = ("rate_limit",)


def handle(payload: dict[str, Any]) -> dict[str, Any] | None:
    try:
        import os
        import time

        from clavain import locate
        from clavain.guards.window import record_stop

        error = payload.get("error")
        if error not in RECORDED:
            return None
        root = locate.state_dir(locate.project_dir(payload_cwd(payload)))
        if not os.path.isdir(root):  # not a Clavain project
            return None
        record_stop(root, error, payload.get("session_id"), time.time())
    except Exception as exc:
        from clavain.hook_log import log_failure  # only once something failed

        log_failure("StopFailure", f"{type(exc).__name__}: {exc}", payload)
    return None
