"""What the HTML page of a sprint, a run, a loop run or a graph shows, gathered from the state
files and the database as they are now — the page keeps no data of its own, so it can never
disagree with `clavain report`, `sprint summary` or `loop summary`: it asks the same functions.

`choose` turns what the person named (or nothing: the active sprint, else the run, loop run or
sprint that started last) into a `Subject`; `gather` reads everything the page draws for it."""

from __future__ import annotations

import contextlib
import math
import os
from pathlib import Path
from typing import Any

from clavain.clock import now_iso
from clavain.errors import ClavainError
from clavain.fsutil import read_json_object
from clavain.page.subjects import Subject, last_subject, run_folders, run_ids_of_graph
from clavain.paths import StatePaths


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
        from clavain.current_graph import require_known

        require_known(graphs.Graph(conn, graphs.check_id(graph), state), graph)
        return Subject("graph", graph)
    return last_subject(state) or Subject("graph", graphs.DEFAULT_GRAPH)


def gather(state: StatePaths, conn: Any, subject: Subject) -> dict[str, Any]:
    """Everything the page draws for `subject`, as plain JSON-ready data."""
    problems: list[str] = []
    page: dict[str, Any] = {"subject": {"kind": subject.kind, "id": subject.id},
                            "project": str(state.project), "state_root": str(state.root),
                            "generated_at": now_iso(), "graph": None, "runs": [], "loops": [],
                            "sprint": None, "verdicts": [], "budget": None,
                            "problems": problems}
    graph_id: str | None = None
    if subject.kind != "sprint":  # a damaged active sprint is named, whatever is shown
        _active_checkpoint(state, problems)
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
    from clavain.page import standing

    page.update(standing.gather(state, conn, page, problems))
    return page


# ---------------------------------------------------------------- sprints

def _active_checkpoint(state: StatePaths, problems: list[str]) -> dict[str, Any] | None:
    from clavain.sprint import checkpoint

    try:
        return checkpoint.read(state)
    except checkpoint.DamagedCheckpoint as exc:
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
    from clavain.sprint import checkpoint, summary
    from clavain.sprint.route import GATED_STEPS

    sprint = _sprint_checkpoint(state, sprint_id)
    if sprint is None:
        raise ClavainError(f"the sprint {sprint_id!r} is gone")
    active = sprint.get("outcome") is None
    folder = state.verdicts if active else state.runs / sprint_id / "verdicts"
    verdicts = [{**verdict, "detail_file": _detail_file(verdict, folder)}
                for verdict in summary.sprint_verdicts(state, sprint, folder)]
    budget = summary.budget_report(state, sprint_id)
    waived = {w["step"]: {**w, "decided_by": _provenance(w.get("decided_by"))}
              for w in _list(sprint.get("waivers"))
              if isinstance(w, dict) and isinstance(w.get("step"), str)}
    completed = {step for step in _list(sprint.get("completed_steps")) if isinstance(step, str)}
    route = [{"step": step, "gate": step in GATED_STEPS, "lenses": _lenses(sprint, step),
              "state": ("waived" if step in waived else "done" if step in completed
                        else "current" if step == sprint.get("current_step") else "pending"),
              "waiver": waived.get(step)}
             for step in _list(sprint.get("route")) if isinstance(step, str)]
    graph_id = sprint.get("graph_id")
    return ({"sprint_id": sprint_id, "description": str(sprint.get("description") or ""),
             "complexity": sprint.get("complexity"),
             "outcome": str(sprint.get("outcome") or "active"),
             "graph_id": graph_id if isinstance(graph_id, str) else checkpoint.graph_of(None),
             "route": route,
             "skipped": {str(k): str(v) for k, v in _dict(sprint.get("skipped")).items()},
             "person_decisions": [{"what": str(d.get("what")),
                                   "decided_by": _provenance(d.get("decided_by"))}
                                  for d in _list(sprint.get("person_decisions"))
                                  if isinstance(d, dict)],
             "started_at": sprint.get("started_at"), "updated_at": sprint.get("updated_at")},
            verdicts, budget)


def _provenance(value: Any) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


def _detail_file(verdict: dict[str, Any], folder: Path) -> str | None:
    """The verdict's detail file in the folder its verdicts are in now (an ended sprint's were
    moved into its archive), when it is a regular file there; else None (no link)."""
    named = verdict.get("detail_path")
    if not isinstance(named, str) or not named.endswith(".md"):
        return None
    real = Path(os.path.realpath(folder / Path(named).name))
    if real.parent == Path(os.path.realpath(folder)) and real.is_file():
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
    timeline = [_entry(entry) for entry in _list(measured.get("timeline")) if _timed(entry)]
    graph_id = measured.get("graph_id") or record.get("graph_id")
    return {"run_id": run_id, "graph_id": graph_id if isinstance(graph_id, str) else None,
            "status": str(measured.get("status") or record.get("status") or "unknown"),
            "reason": str(measured.get("reason") or ""),
            "live": run_id in run_record.live_runs(state),
            "started_at": str(measured.get("started_at") or record.get("started_at") or ""),
            "finished_at": str(record.get("finished_at") or ""),
            "wall_seconds": _number(measured.get("wall_seconds")),
            "peak_concurrency": metrics.peak_concurrency(timeline),
            **_spend(state, run_id, measured, problems),
            "workers": _dict(record.get("options")).get("workers"),
            "running": [{"node": str(node), "started_at": runner.get("started_at"),
                         "worker": runner.get("worker")}
                        for node, runner in sorted(_dict(record.get("runners")).items())
                        if isinstance(runner, dict)] if record.get("status") == "running"
            else [],
            "timeline": timeline,
            "waits": [dict(w) for w in _list(measured.get("waits")) if _timed(w)]}


def _spend(state: StatePaths, run_id: str, measured: dict[str, Any], problems: list[str]
           ) -> dict[str, Any]:
    """The run's tokens and dollars: its budget ledger (measured + charged, the one figure
    `clavain run` and `clavain budget status` say), else what its metrics last said."""
    from clavain.supervisor.run_budget import run_key
    from clavain.supervisor.run_reserve import ledger_of

    if state.db.is_file():
        try:
            spend = ledger_of(state, run_key(run_id))
            return {"tokens": spend["tokens"], "cost_usd": spend["cost_usd"]}
        except Exception as exc:  # a damaged file: the metrics' figure, and why
            problems.append(f"run {run_id}: its budget ledger: {type(exc).__name__}: {exc}")
    return {"tokens": int(_number(measured.get("tokens"))),
            "cost_usd": _number(measured.get("cost_usd"))}


def _timed(entry: Any) -> bool:
    return isinstance(entry, dict) and all(
        isinstance(entry.get(key), (int, float)) and not isinstance(entry.get(key), bool)
        and math.isfinite(entry[key]) for key in ("start_epoch", "end_epoch"))


def _entry(entry: dict[str, Any]) -> dict[str, Any]:
    """A runner call as the page reads it: texts as text, figures as finite numbers."""
    worker = entry.get("worker")
    return {**entry, "node": str(entry.get("node") or "?"),
            "role": str(entry.get("role") or "?"), "outcome": str(entry.get("outcome") or "?"),
            "worker": worker if isinstance(worker, (int, str)) and not isinstance(worker, bool)
            else "?", "tokens": int(_number(entry.get("tokens"))),
            "cost_usd": _number(entry.get("cost_usd")),
            "start_epoch": float(entry["start_epoch"]),
            "end_epoch": max(float(entry["end_epoch"]), float(entry["start_epoch"]))}


def _number(value: Any) -> float:
    """A finite figure, else 0 (a hand-edited file may hold anything)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return 0.0


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _loop(state: StatePaths, run_id: str, problems: list[str]) -> dict[str, Any]:
    """A `clavain loop` run: its summary (the one `loop summary` prints), every iteration, its
    breaker's transitions and the waits for the rate limit."""
    from clavain.loop import records

    loop = records.read_loop(state, run_id)
    try:
        found = records.summary(state, run_id)
    except Exception as exc:  # the loop's own summary of a damaged record
        problems.append(f"loop {run_id}: {type(exc).__name__}: {exc}")
        found = {"run_id": run_id, "status": loop.get("status")}
    iterations = records.iterations(state, run_id)
    transitions, before = [], "CLOSED"
    for record in iterations:
        now = str(record.get("breaker") or before)
        if now != before:
            transitions.append({"iteration": record.get("iteration"), "from": before, "to": now})
        before = now
    graph_id = loop.get("graph_id")
    return {"run_id": run_id, "graph_id": graph_id if isinstance(graph_id, str) else None,
            "status": str(loop.get("status")), "live": _loop_alive(state, loop),
            "task_label": loop.get("task_label"), "runner": loop.get("runner"),
            "started_at": str(loop.get("started_at") or ""),
            "finished_at": str(loop.get("finished_at") or ""),
            "wall_seconds": _number(loop.get("wall_seconds")),
            "summary": found, "iterations": iterations, "breaker_transitions": transitions,
            "waits": [w for w in _list(loop.get("waits")) if isinstance(w, dict)]}


def _loop_alive(state: StatePaths, loop: dict[str, Any]) -> bool:
    """A loop run still at work: it says so and its process lives (a run killed with -9 says
    "running" for ever); an in-session loop, while its session's registration is there."""
    from clavain.loop.session_state import state_file
    from clavain.processes import pid_alive, same_process

    if loop.get("status") != "running":
        return False
    if loop.get("runner") == "session":
        return state_file(str(state.root), loop.get("session_id")) is not None
    pid = loop.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool):
        return False
    return pid > 0 and pid_alive(pid) and same_process(pid, loop.get("identity"))


def _budget_of_run(state: StatePaths, run_id: str, problems: list[str]) -> dict[str, Any] | None:
    from clavain.supervisor.run_report import report_for

    try:
        return report_for(state, run_id, session_id=None)
    except (ClavainError, OSError) as exc:
        problems.append(f"the budgets of {run_id}: {exc}")
        return None


def _runs_of_graph(state: StatePaths, graph_id: str, problems: list[str]) -> list[dict[str, Any]]:
    return [_run(state, run_id, problems) for run_id in run_ids_of_graph(state, graph_id)]


def _loops_of_graph(state: StatePaths, graph_id: str, problems: list[str]
                    ) -> list[dict[str, Any]]:
    from clavain.loop import records

    found = []
    for folder in run_folders(state):
        loop = read_json_object(folder / records.LOOP_NAME)
        if loop is not None and loop.get("graph_id") == graph_id:
            with contextlib.suppress(ClavainError):
                found.append(_loop(state, folder.name, problems))
    return found


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
