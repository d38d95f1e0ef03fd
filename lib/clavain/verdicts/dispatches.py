"""Which of this plugin's agent dispatches are still running: SubagentStart records each one
(`.clavain/dispatches/<agent_id>.json`), SubagentStop removes the record once the verdict is
filed. A review gate that finds a lens missing waits while a dispatch that may bring it runs:
Claude Code 2.1.330 runs Agent calls in the background, so a model often records a step before
its reviewers report.

A record whose agent has written nothing for STALE_SECONDS counts as dead (the session was
killed and SubagentStop never came). The lens is read from the subagent's transcript (its
prompt's first line) when the gate asks, since SubagentStart does not carry the prompt.
Stdlib only (hooks write these).
"""

from __future__ import annotations

import os
import time

from clavain.paths import StatePaths

TYPE_CHECKING = False
if TYPE_CHECKING:  # SubagentStop imports this: no `typing` (nor contextlib) import
    from pathlib import Path
    from typing import Any

FOLDER = "dispatches"
STALE_SECONDS = 600.0


def folder(state: StatePaths) -> Path:
    return state.root / FOLDER


def subagent_transcript(payload: dict[str, Any]) -> str | None:
    """Where the host writes this subagent's transcript:
    `<session transcript folder>/<session>/subagents/agent-<agent_id>.jsonl`."""
    parent, session, agent = (payload.get("transcript_path"), payload.get("session_id"),
                              payload.get("agent_id"))
    if not all(isinstance(v, str) and v and "/" not in v for v in (session, agent)):
        return None
    if not isinstance(parent, str) or not parent.endswith(".jsonl"):
        return None
    return os.path.join(os.path.dirname(parent), session, "subagents", f"agent-{agent}.jsonl")


def started(state: StatePaths, payload: dict[str, Any], sprint_id: str | None,
            agent: str) -> Path | None:
    """Record a dispatch that began; None when the host sent no usable agent_id."""
    from clavain.clock import now_iso
    from clavain.fsutil import write_json_atomic
    from clavain.verdicts.files import safe_dispatch

    agent_id = payload.get("agent_id")
    if not isinstance(agent_id, str) or not agent_id:
        return None
    path = folder(state) / f"{safe_dispatch(agent_id)}.json"
    write_json_atomic(path, {"agent_id": agent_id, "agent": agent, "sprint_id": sprint_id,
                             "session_id": payload.get("session_id"),
                             "transcript": subagent_transcript(payload),
                             "started_at": now_iso(), "started_epoch": time.time()},
                      inside=state.root)
    return path


def finished(state: StatePaths, agent_id: object) -> None:
    """The dispatch reported (its verdict is filed): it no longer runs."""
    from clavain.verdicts.files import safe_dispatch

    if not isinstance(agent_id, str) or not agent_id:
        return
    try:  # noqa: SIM105 - contextlib is one more import for SubagentStop
        os.unlink(folder(state) / f"{safe_dispatch(agent_id)}.json")
    except (OSError, ValueError):
        pass


def started_under(state: StatePaths, agent_id: object) -> tuple[bool, str | None]:
    """(whether SubagentStart recorded this dispatch, the sprint it started under): a verdict
    belongs to the sprint its review was asked for, not to whichever is active when it ends."""
    from clavain.fsutil import read_json_object
    from clavain.verdicts.files import safe_dispatch

    if not isinstance(agent_id, str) or not agent_id:
        return False, None
    try:
        record = read_json_object(folder(state) / f"{safe_dispatch(agent_id)}.json", 1 << 16)
    except ValueError:  # an agent id with no usable characters
        return False, None
    if record is None:
        return False, None
    sprint = record.get("sprint_id")
    return True, sprint if isinstance(sprint, str) else None


def running(state: StatePaths, *, sprint_id: str | None = None,
            now: float | None = None) -> list[dict[str, Any]]:
    """Dispatches started and not yet reported (of `sprint_id` when given), each with its
    `lens` (None until its transcript names one) and `seconds` since it last wrote."""
    from clavain.fsutil import json_files
    from clavain.verdicts.lens import prompt_lens

    now = time.time() if now is None else now
    found = []
    for _, record in json_files(folder(state), ".json"):
        if sprint_id is not None and record.get("sprint_id") != sprint_id:
            continue
        last = _last_write(record)
        if now - last > STALE_SECONDS:
            continue
        transcript = record.get("transcript")
        lens = prompt_lens(transcript) if isinstance(transcript, str) else None
        found.append({**record, "lens": lens, "seconds": max(0, int(now - last))})
    return found


def _last_write(record: dict[str, Any]) -> float:
    """When the dispatch last showed life: its transcript's last write, else its start."""
    started_epoch = record.get("started_epoch")
    last = float(started_epoch) if isinstance(started_epoch, (int, float)) else 0.0
    transcript = record.get("transcript")
    if isinstance(transcript, str):
        import contextlib

        with contextlib.suppress(OSError):
            last = max(last, os.stat(transcript).st_mtime)
    return last
