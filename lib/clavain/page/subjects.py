"""What a report is about when nobody names it: the active sprint, else the run, loop run or
sprint that started last in `.clavain/runs/`. One answer for the page (`report --html`) and
the text report, so both show the same thing."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clavain.fsutil import read_json_object
from clavain.paths import StatePaths

KINDS = ("sprint", "run", "loop", "graph")


@dataclass(frozen=True)
class Subject:
    kind: str  # one of KINDS
    id: str


def run_folders(state: StatePaths) -> list[Path]:
    try:
        return sorted(Path(entry.path) for entry in os.scandir(state.runs) if entry.is_dir())
    except OSError:
        return []


def run_ids_of_graph(state: StatePaths, graph_id: str) -> list[str]:
    """The `clavain run`s of a graph, the first started first."""
    from clavain.supervisor import run_record

    found = []
    for folder in run_folders(state):
        record = read_json_object(folder / run_record.RECORD_NAME)
        if record is not None and record.get("graph_id") == graph_id:
            found.append((str(record.get("started_at") or ""), folder.name))
    return [run_id for _, run_id in sorted(found)]


def last_subject(state: StatePaths) -> Subject | None:
    """The active sprint (a damaged checkpoint: none), else what started last."""
    from clavain.sprint import checkpoint

    try:
        active = checkpoint.read(state)
    except checkpoint.DamagedCheckpoint:
        active = None
    if active is not None:
        return Subject("sprint", active["sprint_id"])
    return latest_started(state)


def latest_started(state: StatePaths) -> Subject | None:
    """The run, loop run or ended sprint that started last."""
    from clavain.loop import records
    from clavain.supervisor import run_record

    candidates = []
    for folder in run_folders(state):
        for name, kind in ((run_record.RECORD_NAME, "run"), (records.LOOP_NAME, "loop"),
                           ("checkpoint.json", "sprint")):
            record = read_json_object(folder / name)
            if record is not None:
                candidates.append((str(record.get("started_at") or ""), folder.name, kind))
                break
    if not candidates:
        return None
    _, found, kind = max(candidates)
    return Subject(kind, found)


def last_run_keys(state: StatePaths) -> list[str]:
    """`last_subject` as the budget runs the text report reads: a sprint's own run
    (`sprint:<id>`) and the `clavain run`s of its graph, or the one run or loop run."""
    subject = last_subject(state)
    if subject is None:
        return []
    if subject.kind == "sprint":
        return [f"sprint:{subject.id}", *run_ids_of_graph(state, subject.id)]
    return [subject.id]


def report_shown(state: StatePaths, run: str | None, *,
                 session_id: str | None) -> dict[str, Any]:
    """`clavain report`'s subject: the run named, else inside a session the session's run,
    else what the page shows — a sprint's own run with the `clavain run`s of its graph
    (`graph_runs`: their metrics), or the run or loop run that started last."""
    from clavain.supervisor.run_report import report_for

    runs: list[str | None] = [run]
    if run is None and session_id is None:
        runs = list(last_run_keys(state)) or [None]
    report = report_for(state, runs[0], session_id=session_id)
    if len(runs) > 1:
        report["graph_runs"] = [report_for(state, other)["supervised_run"]
                                for other in runs[1:]]
    return report
