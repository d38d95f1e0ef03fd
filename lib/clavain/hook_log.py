"""The hooks' failure log: one line in the project's `.clavain/logs/hooks.log`.

Below the hook dispatcher so that what a hook calls (guards, the session loop) logs the same
way without importing the dispatcher. Imported only when something went wrong: it costs the
common call nothing.
"""

from __future__ import annotations


def log_failure(event: str, problem: str, payload: object = None) -> None:
    """Append one line to the project's hooks.log, never through a symlink planted in the
    state folder; never raises."""
    try:
        from clavain.clock import utc_stamp
        from clavain.fsutil import open_inside
        from clavain.locate import payload_cwd
        from clavain.paths import StatePaths
        from clavain.textio import scrub

        state = StatePaths.discover(payload_cwd(payload))
        line = f"{utc_stamp()} {event or '-'} {problem}".replace("\n", " | ")[:2000]
        with open_inside(state.root, state.hooks_log, "ab") as handle:
            handle.write(scrub(line).encode("utf-8") + b"\n")
    except Exception:  # logging must not become the failure
        pass
