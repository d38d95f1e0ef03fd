"""The sprint's state in a few lines, for a model that lost its context: shown by SessionStart
(the `sprint` section at startup; the `recovery` note after a compaction or a resume) and
recorded by PreCompact in `.clavain/scratch/recovery.json`.

The note is built from the live state every time it is shown, so it can never name a step the
sprint has left; the recorded file adds what only the transcript knew before it was compacted
(the user's last request, shown only right after that compaction) and stands in for the live
state when that cannot be read. Stdlib only; every field is clipped, and `alternatives` gives
ever shorter versions, so the context cap trims the note before it would drop it.
"""

from __future__ import annotations

import os

from clavain.clock import now_iso
from clavain.errors import ClavainError
from clavain.paths import StatePaths
from clavain.textio import clip

TYPE_CHECKING = False
if TYPE_CHECKING:  # SessionStart imports this module: no `typing`; `json` where it is used
    from typing import Any

NOTE_NAME = "recovery.json"
SHOWN = 3  # nodes, verdicts, decisions
TRANSCRIPT_TAIL_BYTES = 512 * 1024
NOTE_MAX_BYTES = 256 * 1024
DB_WAIT_MS = 500


def sprint_lines(active: dict[str, Any]) -> list[str]:
    """Where the sprint stands and what to do next."""
    from clavain.sprint.guides import next_action

    done = len(active["completed_steps"])
    step = active["current_step"] or "complete"
    return [f"Clavain sprint {active['sprint_id']} \"{clip(active['description'], 80)}\": "
            f"step {step} ({done}/{len(active['route'])} steps done).",
            f"Next: {next_action(active)}.",
            "Where it stands: `clavain sprint resume` (after a crash the user types "
            "/clavain:sprint --resume)."]


def sprint_section(state: StatePaths) -> str:
    """The active sprint in three lines, a broken checkpoint in one, else ''."""
    from clavain.sprint import checkpoint

    try:
        active = checkpoint.read(state)
    except ClavainError as exc:
        return f"Clavain: the sprint checkpoint cannot be read: {clip(exc, 300)}"
    return "\n".join(sprint_lines(active)) if active else ""


def build(state: StatePaths, *, session_id: str | None = None,
          transcript_path: str | None = None, trigger: str | None = None) -> dict[str, Any]:
    """The note's fields from the live state (and the transcript, when given). A part that
    cannot be read is left out (an unreadable checkpoint is named), never the whole note."""
    from clavain.sprint import checkpoint

    note: dict[str, Any] = {"version": 1, "session_id": session_id, "trigger": trigger,
                            "recorded_at": now_iso(), "sprint": None, "sprint_problem": None,
                            "attention": [], "in_progress": [], "last_request": None}
    try:
        active = checkpoint.read(state)
    except ClavainError as exc:
        note["sprint_problem"] = clip(exc, 300)
        active = None
    if active:
        note["sprint"] = {key: active[key] for key in (
            "sprint_id", "description", "route", "completed_steps", "current_step",
            "plan_path", "decisions")}
    note["attention"] = _attention(state)
    note["in_progress"] = _in_progress(state, checkpoint.graph_of(active))
    if transcript_path:
        note["last_request"] = last_request(transcript_path)
    return note


def _attention(state: StatePaths) -> list[dict[str, Any]]:
    from clavain.verdicts.files import parse_all
    from clavain.verdicts.summary import get_attention

    if not state.verdicts.is_dir():
        return []
    return [{key: entry[key] for key in ("agent", "status", "summary", "detail_path")}
            for entry in get_attention(parse_all(state.verdicts))[:SHOWN]]


def _in_progress(state: StatePaths, graph_id: str) -> list[dict[str, Any]]:
    """The sprint graph's claimed nodes, read-only: no database is created, migrated or waited
    on for long."""
    if not os.path.exists(state.db):
        return []
    from clavain.store import db, queries

    try:
        conn = db.connect_readonly(state.db, timeout_ms=DB_WAIT_MS)
        try:
            rows = queries.run(conn, "status.claimed_shown", (graph_id, SHOWN)).fetchall()
        finally:
            conn.close()
    except (db.sqlite3.Error, OSError):  # busy, damaged, older than the graphs, a FIFO
        return []
    return [{"id": r["id"], "title": r["title"], "run_id": r["lock_run_id"],
             "attempts": r["attempts"]} for r in rows]


def last_request(transcript_path: str) -> str | None:
    """The user's last typed message in a session transcript (its tail only), or None."""
    from clavain.fsutil import read_regular

    tail = read_regular(transcript_path, TRANSCRIPT_TAIL_BYTES, from_end=True,
                        follow_symlinks=True)  # the host's file, outside the state folder
    if tail is None:
        return None
    for line in reversed(tail.decode("utf-8", errors="replace").splitlines()):
        text = _typed_text(line)
        if text:
            return clip(text, 300)
    return None


def _typed_text(line: str) -> str | None:
    """A transcript line's text if a person typed it: not a tool result, a command's output,
    a reminder or a compaction summary (they all start with `<` or are marked)."""
    import json

    try:
        entry = json.loads(line)
    except ValueError:
        return None
    if not isinstance(entry, dict) or entry.get("type") != "user" or entry.get("isMeta") \
            or entry.get("isCompactSummary") or entry.get("isSidechain"):
        return None
    from clavain.verdicts.transcript import user_text

    text = user_text(entry)
    return text if text and text.strip() and not text.lstrip().startswith("<") else None


def record(state: StatePaths, payload: dict[str, Any]) -> dict[str, Any]:
    """PreCompact: write the note for the SessionStart that follows the compaction."""
    from clavain import fastjson  # `json` imports `re`
    from clavain.fsutil import real_folder, write_atomic

    note = build(state, session_id=_text(payload.get("session_id")),
                 transcript_path=_text(payload.get("transcript_path")),
                 trigger=_text(payload.get("trigger")))
    real_folder(state.root, state.scratch)
    write_atomic(state.scratch / NOTE_NAME, fastjson.dumps(note, indent=2) + "\n",
                 inside=state.root)
    return note


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def load(state: StatePaths) -> dict[str, Any] | None:
    """The recorded note, or None when there is none or it is not one of ours."""
    from clavain import fastjson
    from clavain.fsutil import read_regular

    raw = read_regular(state.scratch / NOTE_NAME, NOTE_MAX_BYTES)
    try:
        note = fastjson.loads(raw.decode("utf-8")) if raw else None
    except (ValueError, RecursionError):
        return None
    return note if isinstance(note, dict) and note.get("version") == 1 else None


def for_session(state: StatePaths, session_id: str | None,
                source: str | None = None) -> dict[str, Any] | None:
    """The note to show after this session was compacted or resumed: the live state, plus (right
    after a compaction) the last request the recorded note kept for this session; the recorded
    note alone when the live state cannot be read. None when there is nothing to recover."""
    recorded = load(state)
    if recorded is not None and recorded.get("session_id") != session_id:
        recorded = None
    try:
        note = build(state, session_id=session_id)
    except (OSError, ValueError, ArithmeticError):
        note = recorded
    if not note:
        return None
    note["last_request"] = recorded.get("last_request") if recorded and source == "compact" \
        else None
    if not (note.get("sprint") or note.get("sprint_problem") or note.get("in_progress")
            or note.get("attention")):
        return None
    return note


def alternatives(note: dict[str, Any]) -> list[str]:
    """The note rendered from richest to leanest (the last is the sprint's own lines), for the
    context cap to pick the richest that fits."""
    trims = ("last_request", "attention", "in_progress", "decisions", "plan_path")
    versions = []
    for count in range(len(trims) + 1):
        versions.append(render(note, leave_out=trims[:count]))
    sprint = note.get("sprint")
    if sprint:
        versions.append("\n".join(sprint_lines(sprint)))
    return list(dict.fromkeys(versions))  # without repeats, in order


def render(note: dict[str, Any], leave_out: tuple[str, ...] = ()) -> str:
    lines = ["Clavain recovery note (this session's context was compacted or resumed; the state "
             "below is current):"]
    sprint = note.get("sprint")
    if sprint:
        lines += [f"- {line}" for line in sprint_lines(sprint)]
        if sprint.get("plan_path") and "plan_path" not in leave_out:
            lines.append(f"- Plan: {clip(sprint['plan_path'])}")
        if sprint.get("decisions") and "decisions" not in leave_out:
            lines.append("- Decisions: " + "; ".join(clip(d, 80)
                                                       for d in sprint["decisions"][-SHOWN:]))
    if note.get("sprint_problem"):
        lines.append(f"- The sprint checkpoint cannot be read: {note['sprint_problem']}")
    if "attention" not in leave_out:
        for verdict in note.get("attention") or []:
            detail = f" (detail: {clip(verdict['detail_path'])})" \
                if verdict.get("detail_path") else ""
            lines.append(f"- Needs attention: {verdict['agent']} {verdict['status']}: "
                         f"{clip(verdict['summary'], 80)}{detail}")
    if "in_progress" not in leave_out:
        for node in note.get("in_progress") or []:
            lines.append(f"- In progress: {clip(node['id'], 60)} (run {clip(node['run_id'], 40)}, "
                         f"attempt {node['attempts'] + 1}): {clip(node['title'], 60)}")
    if note.get("last_request") and "last_request" not in leave_out:
        lines.append(f"- Last request before compaction: \"{clip(note['last_request'], 200)}\"")
    return "\n".join(lines)
