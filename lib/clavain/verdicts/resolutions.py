"""A person's (or the sprint's) recorded answer to a verdict that needed attention, without a new
review: `clavain verdicts resolve DISPATCH --note TEXT`. The sprint's `resolve` and `ship` gates
accept a NEEDS_ATTENTION / BLOCKED verdict as answered when a later CLEAN verdict of the same
agent (lens) was filed, or when it has one of these records.

One small JSON file per answered dispatch beside the verdicts, `<agent>--<dispatch>.resolved`
(not `.json`: it is no verdict, and `parse_all` must not read it as one); it moves with the
verdicts when the sprint is archived. Stdlib only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clavain.clock import now_iso
from clavain.errors import ClavainError
from clavain.fsutil import write_json_atomic
from clavain.verdicts import files

SUFFIX = ".resolved"
ANSWERABLE = ("NEEDS_ATTENTION", "BLOCKED")
NOTE_MAX_CHARS = 2000


def resolve(folder: Path, dispatch: str, note: str, *, inside: Path,
            sprint_id: str | None = None) -> dict[str, Any]:
    """Record `note` as the answer to the verdict of `dispatch` (its file name's dispatch part,
    as `clavain verdicts ls` shows it). Refused for an unknown dispatch, a verdict that needs no
    answer, or an empty note."""
    note = " ".join(str(note).split())
    if not note:
        raise ClavainError("a resolution needs a note saying how the finding was answered")
    if len(note) > NOTE_MAX_CHARS:
        raise ClavainError(f"the note is {len(note)} characters; at most {NOTE_MAX_CHARS}")
    matches = [v for v in files.parse_all(folder) if v.get(files.DISPATCH) == dispatch]
    if not matches:
        raise ClavainError(f"no verdict with dispatch {dispatch!r} in {folder} "
                           "(`clavain verdicts ls` lists them)")
    verdict = max(matches, key=files.order_key)
    if verdict["status"] not in ANSWERABLE:
        raise ClavainError(f"verdict {dispatch} of {verdict['agent']} is {verdict['status']}; "
                           f"only {' or '.join(ANSWERABLE)} verdicts take a resolution")
    record = {"dispatch": dispatch, "agent": verdict["agent"], "status": verdict["status"],
              "summary": verdict["summary"], "note": note, "sprint_id": sprint_id,
              "resolved_at": now_iso()}
    write_json_atomic(files.verdict_path(folder, verdict["agent"], dispatch, SUFFIX), record,
                      inside=inside)
    return record


def resolved(folder: Path) -> dict[str, dict[str, Any]]:
    """dispatch → its resolution record. An unreadable record answers nothing (the gate then
    names the verdict again, and a person can resolve it anew)."""
    from clavain.fsutil import json_files

    return {record["dispatch"]: record for _, record in json_files(folder, SUFFIX)
            if isinstance(record.get("dispatch"), str)}


def unanswered(verdicts: list[dict[str, Any]],
               resolutions: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The NEEDS_ATTENTION / BLOCKED verdicts that no later CLEAN verdict of the same agent and
    no resolution record answers, oldest first."""
    ordered = sorted(verdicts, key=files.order_key)
    left = []
    for position, verdict in enumerate(ordered):
        if verdict["status"] not in ANSWERABLE:
            continue
        if verdict.get(files.DISPATCH) in resolutions:
            continue
        later = ordered[position + 1:]
        if any(v["agent"] == verdict["agent"] and v["status"] == "CLEAN" for v in later):
            continue
        left.append(verdict)
    return left
