"""Agents still running in this project: subagent transcripts, of any session, the host wrote to
in the last two minutes (`<projects>/<project>/<session>/subagents/agent-<id>.jsonl`).

A new or compacted session that knows another agent is editing the tree does not start the same
work twice. Stdlib only; a session whose own transcript has not moved for a day is not searched,
so a project with years of sessions costs a few directory reads.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:  # `typing` costs SessionStart an import (and `re`)
    from typing import Any

RECENT_SECONDS = 120.0
SESSION_IDLE_SECONDS = 86400.0
SHOWN = 3
PROMPT_CHARS = 80


def transcripts_dir(project: Path, transcript_path: object = None) -> Path:
    """The host's folder of this project's transcripts: the one the session's own transcript is
    in, else the host's naming (every character but a letter or digit becomes `-`)."""
    if isinstance(transcript_path, str) and transcript_path.endswith(".jsonl"):
        return Path(transcript_path).parent
    name = "".join(c if c.isascii() and c.isalnum() else "-" for c in str(project))
    from clavain.paths import claude_config_dir

    return claude_config_dir() / "projects" / name


def running_agents(folder: Path, now: float | None = None) -> list[dict[str, Any]]:
    """Recently written subagent transcripts, newest first."""
    now = time.time() if now is None else now
    found = []
    try:
        sessions = [entry for entry in os.scandir(folder) if entry.is_dir(follow_symlinks=False)]
    except OSError:
        return []
    for session in sessions:
        if not _recent(folder / f"{session.name}.jsonl", now, SESSION_IDLE_SECONDS) and \
                not _recent(Path(session.path), now, SESSION_IDLE_SECONDS):
            continue
        try:
            agents = list(os.scandir(os.path.join(session.path, "subagents")))
        except OSError:
            continue
        for agent in agents:
            if not (agent.name.startswith("agent-") and agent.name.endswith(".jsonl")):
                continue
            try:
                age = now - agent.stat(follow_symlinks=False).st_mtime
            except OSError:
                continue
            if age <= RECENT_SECONDS:
                found.append({"agent_id": agent.name[len("agent-"):-len(".jsonl")],
                              "session_id": session.name, "seconds_ago": max(0, int(age)),
                              "path": agent.path})
    return sorted(found, key=lambda item: item["seconds_ago"])


def _recent(path: Path, now: float, window: float) -> bool:
    try:
        return now - path.stat().st_mtime <= window
    except OSError:
        return False


def _reported(project: Path) -> set[str]:
    """Agent ids whose verdict is filed (`<agent>--<agent id>.json`): such an agent is done,
    whatever its transcript's last write says."""
    from clavain.fsutil import names_ending
    from clavain.paths import StatePaths
    from clavain.verdicts.names import split_name  # not `files`: its parser needs `re`

    stems = [name[:-len(".json")]
             for name in names_ending(StatePaths.discover(project).verdicts, ".json")]

    return {dispatch for stem in stems for dispatch in [split_name(stem)[1]] if dispatch}


def agents_section(project: Path, transcript_path: object = None,
                   now: float | None = None) -> str:
    from clavain.verdicts.transcript import first_user_text

    reported = _reported(project)
    agents = [a for a in running_agents(transcripts_dir(project, transcript_path), now)
              if a["agent_id"] not in reported]
    if not agents:
        return ""
    lines = [f"Agents at work in this project ({len(agents)} wrote in the last "
             f"{int(RECENT_SECONDS)} s; do not start the same work):"]
    for agent in agents[:SHOWN]:
        prompt = " ".join(first_user_text(agent["path"]).split())
        if len(prompt) > PROMPT_CHARS:
            prompt = prompt[:PROMPT_CHARS - 1] + "…"
        lines.append(f"- agent {agent['agent_id'][:12]} (session {agent['session_id'][:8]}, "
                     f"{agent['seconds_ago']} s ago): {prompt or '(no prompt yet)'}")
    if len(agents) > SHOWN:
        lines.append(f"- and {len(agents) - SHOWN} more")
    return "\n".join(lines)
