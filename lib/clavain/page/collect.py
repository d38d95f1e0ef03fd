"""What the HTML page of a sprint, a run, a loop run or a graph shows, gathered from the state
files and the database as they are now — the page keeps no data of its own, so it can never
disagree with `clavain report`, `sprint summary` or `loop summary`: it asks the same functions.

`choose` turns what the person named (or nothing: the active sprint, else the run, loop run or
sprint that started last) into a `Subject`; `gather` reads everything the page draws for it."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clavain.clock import now_iso
from clavain.errors import ClavainError
from clavain.fsutil import read_json_object
from clavain.paths import StatePaths

KINDS = ("sprint", "run", "loop", "graph")


@dataclass(frozen=True)
class Subject:
    kind: str  # one of KINDS
    id: str


def choose(state: StatePaths, conn: Any, *, run: str | None = None, sprint: str | None = None,
           graph: str | None = None) -> Subject:
    """The subject named (at most one of `run`, `sprint`, `graph`), else the active sprint,
    else whatever started last in `.clavain/runs/`, else the default graph."""
    from clavain.loop import records
    from clavain.supervisor import metrics, run_record
    from clavain.workgraph import graphs

    if run is not None:
        bare = run.removeprefix("run:")
        if bare.startswith("sprint:"):
            return choose(state, conn, sprint=bare.removeprefix("sprint:"))
        folder = run_record.run_dir(state, bare)
        if (folder / records.LOOP_NAME).is_file():
            return Subject("loop", bare)
        if (folder / run_record.RECORD_NAME).is_file() or (folder / metrics.METRICS_NAME).is_file():
            return Subject("run", bare)
        if (folder / "checkpoint.json").is_file():
            return Subject("sprint", bare)
        raise ClavainError(f"no run {bare!r} in {state.runs} (a `clavain run` leaves "
                           f"{run_record.RECORD_NAME}, a `clavain loop` {records.LOOP_NAME})")
    if sprint is not None:
        if _sprint_checkpoint(state, sprint) is None:
            raise ClavainError(f"no sprint {sprint!r}: not the active one, and "
                               f"{state.runs / sprint} holds no checkpoint.json")
        return Subject("sprint", sprint)
    if graph is not None:
        if graphs.get(conn, graphs.check_id(graph)) is None:
            known = ", ".join(g["id"] for g in graphs.list_graphs(conn)) or "none yet"
            raise ClavainError(f"no such graph {graph!r} (graphs: {known})")
        return Subject("graph", graph)
    active = _active_checkpoint(state, [])
    if active is not None:
        return Subject("sprint", active["sprint_id"])
    latest = _latest_started(state)
    return latest or Subject("graph", graphs.DEFAULT_GRAPH)


def gather(state: StatePaths, conn: Any, subject: Subject) -> dict[str, Any]:
    """Everything the page draws for `subject`, as plain JSON-ready data."""
    problems: list[str] = []
    page: dict[str, Any] = {"subject": {"kind": subject.kind, "id": subject.id},
                            "project": str(state.project), "state_root": str(state.root),
                            "generated_at": now_iso(), "graph": None, "runs": [], "loops": [],
                            "sprint": None, "verdicts": [], "budget": None,
                            "problems": problems}
    graph_id: str | None = None
    if subject.kind == "sprint":
        page["sprint"], page["verdicts"], page["budget"] = _sprint(state, subject.id, problems)
        graph_id = page["sprint"]["graph_id"]
        page["runs"] = _runs_of_graph(state, graph_id, problems)
        page["loops"] = _loops_of_graph(state, graph_id, problems)
    elif subject.kind == "run":
        found = _run(state, subject.id, problems)
        page["runs"] = [found]
        graph_id = found["graph_id"]
        page["budget"] = _budget_of_run(state, subject.id, problems)
    elif subject.kind == "loop":
        found = _loop(state, subject.id, problems)
        page["loops"] = [found]
        graph_id = found["graph_id"]
        page["budget"] = _budget_of_run(state, subject.id, problems)
    else:
        graph_id = subject.id
        page["runs"] = _runs_of_graph(state, graph_id, problems)
        page["loops"] = _loops_of_graph(state, graph_id, problems)
    if graph_id is not None:
        page["graph"] = _graph(conn, graph_id, problems)
    page["live"] = _live(page)
    return page


# ---------------------------------------------------------------- sprints

def _active_checkpoint(state: StatePaths, problems: list[str]) -> dict[str, Any] | None:
    from clavain.sprint import checkpoint

    try:
        return checkpoint.read(state)
    except (ClavainError, OSError) as exc:
        problems.append(f"the active sprint's checkpoint is unreadable: {exc}")
        return None


def _sprint_checkpoint(state: StatePaths, sprint_id: str) -> dict[str, Any] | None:
    active = _active_checkpoint(state, [])
    if active is not None and active["sprint_id"] == sprint_id:
        return active
    if "/" in sprint_id or sprint_id in ("", ".", ".."):
        return None
    return read_json_object(state.runs / sprint_id / "checkpoint.json")


def _sprint(state: StatePaths, sprint_id: str, problems: list[str]
            ) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any] | None]:
    """(the sprint: its checkpoint, route with gates, summary; its verdicts; its budgets)."""
    from clavain.sprint import checkpoint, gates, summary

    sprint = _sprint_checkpoint(state, sprint_id)
    if sprint is None:
        raise ClavainError(f"the sprint {sprint_id!r} is gone")
    active = sprint.get("outcome") is None
    folder = None if active else state.runs / sprint_id / "verdicts"
    verdicts = [{**verdict, "detail_file": _detail_file(state, verdict, folder)}
                for verdict in summary.sprint_verdicts(state, sprint, folder)]
    budget = summary.budget_report(state, sprint_id)
    try:
        found = summary.summarize(state, sprint, budget, verdicts_folder=folder)
    except (ClavainError, KeyError, TypeError, ValueError) as exc:
        problems.append(f"the sprint's summary could not be made: {exc}")
        found = None
    waived = {w.get("step"): w for w in sprint.get("waivers") or [] if isinstance(w, dict)}
    completed = set(sprint.get("completed_steps") or [])
    route = [{"step": step, "gate": gates.has_gate(step), "lenses": _lenses(sprint, step),
              "state": ("waived" if step in waived else "done" if step in completed
                        else "current" if step == sprint.get("current_step") else "pending"),
              "waiver": waived.get(step)}
             for step in sprint.get("route") or []]
    return ({"sprint_id": sprint_id, "description": sprint.get("description", ""),
             "complexity": sprint.get("complexity"), "outcome": sprint.get("outcome", "active"),
             "graph_id": checkpoint.graph_of(sprint), "route": route,
             "skipped": dict(sprint.get("skipped") or {}),
             "person_decisions": list(sprint.get("person_decisions") or []),
             "started_at": sprint.get("started_at"), "updated_at": sprint.get("updated_at"),
             "summary": found},
            verdicts, budget)


def _detail_file(state: StatePaths, verdict: dict[str, Any], folder: Path | None) -> str | None:
    """The verdict's detail file where it is now (an ended sprint's moved into its archive),
    when it is a regular file inside the state folder; else None (no link)."""
    named = verdict.get("detail_path")
    if not isinstance(named, str) or not named:
        return None
    root = Path(os.path.realpath(state.root))
    for candidate in (state.project / named, (folder or state.verdicts) / Path(named).name):
        real = Path(os.path.realpath(candidate))
        if root in real.parents and real.is_file():
            return str(real)
    return None


def _lenses(sprint: dict[str, Any], step: str) -> list[str]:
    from clavain.sprint import gates

    try:
        return gates.lenses_for(sprint, step)
    except (KeyError, TypeError):  # a hand-edited archive without its reviewers
        return []


# ---------------------------------------------------------------- runs and loop runs

def _run(state: StatePaths, run_id: str, problems: list[str]) -> dict[str, Any]:
    """A `clavain run`: its record (who drives it, how it ended) and its metrics (the
    timeline of every runner call)."""
    from clavain.supervisor import metrics, run_record

    folder = run_record.run_dir(state, run_id)
    record = read_json_object(folder / run_record.RECORD_NAME) or {}
    measured = metrics.load(folder / metrics.METRICS_NAME) or {}
    if not record and not measured:
        problems.append(f"run {run_id}: neither {run_record.RECORD_NAME} nor "
                        f"{metrics.METRICS_NAME} could be read")
    timeline = [entry for entry in measured.get("timeline") or [] if _timed(entry)]
    return {"run_id": run_id, "graph_id": measured.get("graph_id") or record.get("graph_id"),
            "status": measured.get("status") or record.get("status") or "unknown",
            "live": run_id in run_record.live_runs(state),
            "started_at": measured.get("started_at") or record.get("started_at"),
            "wall_seconds": measured.get("wall_seconds"),
            "peak_concurrency": metrics.peak_concurrency(timeline),
            "llm_invocations": measured.get("llm_invocations", 0),
            "tokens": measured.get("tokens", 0), "cost_usd": measured.get("cost_usd", 0.0),
            "nodes": measured.get("nodes") or {}, "crashes": measured.get("crashes") or {},
            "workers": (record.get("options") or {}).get("workers"),
            "running": [{"node": node, "started_at": runner.get("started_at")}
                        for node, runner in sorted((record.get("runners") or {}).items())
                        if isinstance(runner, dict)] if record.get("status") == "running"
            else [],
            "timeline": timeline}


def _timed(entry: Any) -> bool:
    return isinstance(entry, dict) and all(
        isinstance(entry.get(key), (int, float)) and not isinstance(entry.get(key), bool)
        for key in ("start_epoch", "end_epoch"))


def _loop(state: StatePaths, run_id: str, problems: list[str]) -> dict[str, Any]:
    """A `clavain loop` run: its summary (the one `loop summary` prints), every iteration, its
    breaker's transitions and the waits for the rate limit."""
    from clavain.loop import records

    loop = records.read_loop(state, run_id)
    try:
        found = records.summary(state, run_id)
    except ClavainError as exc:
        problems.append(f"loop {run_id}: {exc}")
        found = {"run_id": run_id, "status": loop.get("status")}
    iterations = records.iterations(state, run_id)
    transitions, before = [], "CLOSED"
    for record in iterations:
        now = str(record.get("breaker") or before)
        if now != before:
            transitions.append({"iteration": record.get("iteration"), "from": before, "to": now})
        before = now
    return {"run_id": run_id, "graph_id": loop.get("graph_id"),
            "status": loop.get("status"), "live": _loop_alive(loop),
            "task_label": loop.get("task_label"), "runner": loop.get("runner"),
            "summary": found, "iterations": iterations, "breaker_transitions": transitions,
            "waits": [w for w in loop.get("waits") or [] if isinstance(w, dict)]}


def _loop_alive(loop: dict[str, Any]) -> bool:
    """A loop run still at work: it says so and its process lives (a run killed with -9 says
    "running" for ever); an in-session loop has no process of its own."""
    from clavain.processes import pid_alive, same_process

    if loop.get("status") != "running":
        return False
    pid = loop.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool):
        return True
    return pid > 0 and pid_alive(pid) and same_process(pid, loop.get("identity"))


def _budget_of_run(state: StatePaths, run_id: str, problems: list[str]) -> dict[str, Any] | None:
    from clavain.supervisor.run_report import report_for

    try:
        return report_for(state, run_id, session_id=None)
    except (ClavainError, OSError) as exc:
        problems.append(f"the budgets of {run_id}: {exc}")
        return None


def _run_folders(state: StatePaths) -> list[Path]:
    try:
        return sorted(Path(entry.path) for entry in os.scandir(state.runs) if entry.is_dir())
    except OSError:
        return []


def _runs_of_graph(state: StatePaths, graph_id: str, problems: list[str]) -> list[dict[str, Any]]:
    from clavain.supervisor import run_record

    found = []
    for folder in _run_folders(state):
        record = read_json_object(folder / run_record.RECORD_NAME)
        if record is not None and record.get("graph_id") == graph_id:
            found.append(_run(state, folder.name, problems))
    return sorted(found, key=lambda run: str(run["started_at"] or ""))


def _loops_of_graph(state: StatePaths, graph_id: str, problems: list[str]
                    ) -> list[dict[str, Any]]:
    from clavain.loop import records

    found = []
    for folder in _run_folders(state):
        loop = read_json_object(folder / records.LOOP_NAME)
        if loop is not None and loop.get("graph_id") == graph_id:
            with contextlib.suppress(ClavainError):
                found.append(_loop(state, folder.name, problems))
    return found


def _latest_started(state: StatePaths) -> Subject | None:
    """The run, loop run or ended sprint that started last."""
    from clavain.loop import records
    from clavain.supervisor import run_record

    candidates = []
    for folder in _run_folders(state):
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


# ---------------------------------------------------------------- the graph

def _graph(conn: Any, graph_id: str, problems: list[str]) -> dict[str, Any] | None:
    from clavain.workgraph import export, graphs

    try:
        known = graphs.get(conn, graph_id)
        nodes = export.snapshot(conn, graph_id)["nodes"] if known else []
    except Exception as exc:  # a damaged store: the rest of the page still shows
        problems.append(f"the workgraph {graph_id}: {type(exc).__name__}: {exc}")
        return None
    return {"id": graph_id, "title": (known or {}).get("title"),
            "status": (known or {}).get("status"), "nodes": nodes}


def _live(page: dict[str, Any]) -> bool:
    """Whether the subject may still change: a run or loop run at work, or an active sprint."""
    sprint = page["sprint"]
    if sprint is not None and sprint["outcome"] == "active":
        return True
    return any(run["live"] for run in page["runs"]) or any(
        loop["live"] for loop in page["loops"])
