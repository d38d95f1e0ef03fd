"""PreCompact: record where the work stands (`.clavain/scratch/recovery.json`) before the host
compacts the context; the SessionStart that follows the compaction shows it to the model.
Writes nothing in a project where Clavain keeps no state (no `.clavain/` folder)."""

from __future__ import annotations


def handle(payload: dict) -> None:
    from clavain.locate import payload_cwd
    from clavain.paths import StatePaths
    from clavain.session import recovery

    state = StatePaths.discover(payload_cwd(payload))
    if state.root.is_dir():
        recovery.record(state, payload)
