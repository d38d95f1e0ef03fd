"""SubagentStop: turn a Clavain agent's final answer into `.clavain/verdicts/<agent>.json` + `.md`.

Only this plugin's agents (`clavain:<name>`, or `clavain:<folder>:<name>` as Claude Code names
agents kept in sub-folders) are recorded, as `clavain:<name>`; every other agent is ignored. The
header is parsed from `last_assistant_message`, TOKENS_SPENT is replaced by what the agent's
transcript measures, and an agent whose Output Contract owes a header but sent none (or a broken
one) gets an ERROR verdict. Stdlib only; the dispatcher turns any exception into a log line.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from clavain.hooks import log_failure
from clavain.paths import StatePaths, plugin_root
from clavain.project import ensure_state
from clavain.verdicts import files as verdict_files
from clavain.verdicts.parser import VerdictParseError, parse_header

CONTRACT_HEADING = re.compile(r"^##\s+Output Contract\s*$", re.MULTILINE)
_AGENT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
NO_HEADER_SUMMARY = "no verdict header"


def plugin_agent(agent_type: object) -> tuple[str, str | None] | None:
    """(name, folder) of one of this plugin's agents, else None. Claude Code 2.1.330 namespaces
    agents by their folder: `clavain:review:fd-quality` → ("fd-quality", "review");
    `clavain:fd-quality` → ("fd-quality", None)."""
    if not isinstance(agent_type, str) or not agent_type.startswith(verdict_files.PLUGIN_PREFIX):
        return None
    parts = agent_type[len(verdict_files.PLUGIN_PREFIX):].split(":")
    if len(parts) > 2 or not all(_AGENT_NAME.match(part) for part in parts):
        return None
    return (parts[-1], parts[0] if len(parts) == 2 else None)


def owes_verdict(name: str, folder: str | None = None, root: Path | None = None) -> bool:
    """True when this plugin's `agents/<folder or any>/<name>.md` has an `## Output Contract`."""
    if not _AGENT_NAME.match(name) or (folder is not None and not _AGENT_NAME.match(folder)):
        return False
    agents = (root or plugin_root()) / "agents"
    for path in sorted(agents.glob(f"{folder or '*'}/{name}.md")):
        try:
            if CONTRACT_HEADING.search(path.read_text(encoding="utf-8")):
                return True
        except OSError:
            continue
    return False


def _inside(project: Path, candidate: str) -> Path | None:
    """The existing file `candidate` names, if it lies inside the project; else None."""
    try:
        path = (project / candidate).resolve()
        path.relative_to(project.resolve())
    except (ValueError, OSError):
        return None
    return path if path.is_file() else None


def _relative(project: Path, path: Path) -> str:
    try:
        return path.resolve().relative_to(project.resolve()).as_posix()
    except ValueError:
        return str(path)


TRANSCRIPT_WAIT_SECONDS = 5.0
_TAIL_BYTES = 256 * 1024


def transcript_has(path: Path, message: str) -> bool:
    """Whether the transcript already holds the agent's final message. The host can fire
    SubagentStop before it has flushed that line (seen on 2.1.330: a 3 KB file that later grew
    to 33 KB), and measuring then would miss the last turn's usage."""
    needle = json.dumps(message.strip()[-80:], ensure_ascii=False)[1:-1]
    try:
        with open(path, "rb") as handle:
            handle.seek(max(0, path.stat().st_size - _TAIL_BYTES))
            tail = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return False
    return needle in tail


def _wait_for_transcript(path: Path, message: str) -> bool:
    deadline = time.monotonic() + TRANSCRIPT_WAIT_SECONDS
    while not (not message.strip() or transcript_has(path, message)):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def _measure(payload: dict[str, Any], verdict: dict[str, Any], message: str) -> None:
    """Replace reported tokens (and a missing model) with what the transcript shows."""
    transcript = payload.get("agent_transcript_path")
    if not isinstance(transcript, str) or not transcript or not Path(transcript).is_file():
        return
    if not _wait_for_transcript(Path(transcript), message):
        log_failure("SubagentStop", f"transcript {transcript} lacks the final message after "
                    f"{TRANSCRIPT_WAIT_SECONDS:g}s; measuring what is there", payload)
    from clavain.verdicts.transcript import transcript_usage

    try:
        usage = transcript_usage(Path(transcript))
    except OSError as exc:
        log_failure("SubagentStop", f"transcript unreadable, keeping reported tokens: {exc}",
                    payload)
        return
    if usage.messages:
        verdict["tokens_spent"] = usage.total
        verdict["tokens_source"] = "measured"
        if not verdict.get("model") and usage.main_model:
            verdict["model"] = usage.main_model[: verdict_files.MAX_MODEL_CHARS]


def record(payload: dict[str, Any], *, root: Path | None = None) -> Path | None:
    """Write the verdict for this SubagentStop; the JSON file's path, or None when ignored."""
    found = plugin_agent(payload.get("agent_type"))
    if found is None:
        return None
    name, folder = found
    # One name per agent whatever the host's namespacing: `clavain:fd-quality`.
    agent = verdict_files.PLUGIN_PREFIX + name
    message = payload.get("last_assistant_message")
    message = message if isinstance(message, str) else ""
    session_id = payload.get("session_id")
    session_id = session_id if isinstance(session_id, str) and session_id else None
    try:
        fields = parse_header(message)
    except VerdictParseError as exc:
        if not owes_verdict(name, folder, root):
            return None
        no_header = exc.problems[0].startswith(NO_HEADER_SUMMARY)
        reason = NO_HEADER_SUMMARY if no_header else f"bad verdict header: {exc}"
        verdict = verdict_files.error_verdict(agent, reason, session_id=session_id)
    else:
        try:
            verdict = verdict_files.build(fields, agent=agent, session_id=session_id)
        except ValueError as exc:  # parsed, but out of the schema's bounds (e.g. a huge MODEL)
            verdict = verdict_files.error_verdict(agent, f"bad verdict header: {exc}",
                                             session_id=session_id)

    state = ensure_state(StatePaths.discover(payload.get("cwd") or None))
    project = state.project
    _measure(payload, verdict, message)
    claimed = verdict.get("detail_path")
    existing = _inside(project, claimed) if claimed else None
    own_files = {verdict_files.verdict_path(state.verdicts, agent, suffix).resolve()
                 for suffix in (".md", ".json")}
    # The agent's own file counts only if it is not our `<agent>.md` (left over from an earlier
    # run, to be replaced by this answer) or `<agent>.json` (the verdict this call overwrites).
    if existing is None or existing in own_files:
        detail = verdict_files.write_detail(state.verdicts, agent,
                                       message or "(the agent sent no final message)")
        verdict["detail_path"] = _relative(project, detail)
    else:
        verdict["detail_path"] = _relative(project, existing)
    return verdict_files.write(state.verdicts, verdict)


def handle(payload: dict[str, Any]) -> dict[str, Any] | None:
    record(payload)
    return None
