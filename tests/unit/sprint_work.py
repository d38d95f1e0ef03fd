"""Doing a sprint's steps the honest way in tests: a real plan file, the graph's tasks claimed and
applied, verify nodes run by the shell verifier, reviewer verdicts filed under the sprint. Each
gate test takes the shortcut first, then these."""

from __future__ import annotations

from typing import Any

from clavain.paths import StatePaths
from clavain.sprint import checkpoint, lifecycle
from clavain.store import db
from clavain.verdicts import files as verdict_files
from clavain.workgraph import results, schedule, verifier
from clavain.workgraph.graphs import Graph

PLAN = """# Plan: write a greeting

```json
{"nodes": [
  {"id": "task-hello", "type": "task", "title": "write hello.txt",
   "verify": ["test -f hello.txt"], "ownership": ["hello.txt"]}
]}
```
"""


def active(state: StatePaths) -> dict[str, Any]:
    found = checkpoint.read(state)
    assert found is not None
    return found


def graph(state: StatePaths) -> Graph:
    return Graph(db.connect(state.db), checkpoint.graph_of(active(state)), state)


def record_plan(state: StatePaths, text: str = PLAN, name: str = "plan.md") -> dict[str, Any]:
    (state.project / name).write_text(text)
    return lifecycle.done(state, "plan", plan_path=name)


def run_graph(state: StatePaths, *, stop_before: tuple[str, ...] = ()) -> list[str]:
    """Run every runnable node of the sprint's graph: tasks write the files they own and report
    success, verify and final-verify nodes run their commands. Returns the ids run."""
    g = graph(state)
    ran = []
    try:
        while True:
            found = schedule.next_node(g)["node"]
            if found is None or found["type"] in stop_before:
                return ran
            if found["type"] in ("verify", "final_verify"):
                verifier.run_verify(g, found["id"])
            else:
                claimed = schedule.next_node(g, claim=True)
                node = claimed["node"]
                for owned in node["ownership"]:
                    if "*" not in owned:
                        (state.project / owned).write_text("hello\n")
                results.apply_result(g, node["id"], {"status": "success", "summary": "done"},
                                     run_id=claimed["run_id"])
            ran.append(found["id"])
    finally:
        g.conn.close()


def file_verdict(state: StatePaths, lens: str, status: str = "CLEAN", *,
                 sprint_id: str | None = None, summary: str = "looked") -> dict[str, Any]:
    """A reviewer verdict for `lens`, filed under the active sprint (as SubagentStop files it)."""
    verdict = verdict_files.build({"type": "verdict", "status": status, "summary": summary},
                                  agent=f"clavain:reviewer/{lens}")
    verdict["sprint_id"] = sprint_id or active(state)["sprint_id"]
    path = verdict_files.write(state.verdicts, verdict)
    return {**verdict, "dispatch": verdict_files.split_name(path.stem)[1]}


def review(state: StatePaths, step: str) -> None:
    """A CLEAN verdict from every lens the step's gate asks for."""
    from clavain.sprint.gates import lenses_for

    for lens in lenses_for(active(state), step):
        file_verdict(state, lens)


def walk_to(state: StatePaths, step: str) -> None:
    """Walk the active sprint honestly up to (not through) `step`."""
    while (current := active(state)["current_step"]) != step:
        if current == "plan":
            record_plan(state)
            continue
        if current in ("execute", "test"):
            run_graph(state, stop_before=("integrate",))
        review(state, current)
        lifecycle.done(state, current, wait_seconds=0)


def walk_to_ship(state: StatePaths) -> dict[str, Any]:
    """Every step of the active sprint through its gate, the honest way; returns ship's report."""
    report: dict[str, Any] = {}
    while (step := active(state)["current_step"]) is not None:
        if step == "plan":
            record_plan(state)
            continue
        if step in ("execute", "test"):
            run_graph(state, stop_before=("integrate",))
        if step == "ship":
            run_graph(state)
        review(state, step)
        report = lifecycle.done(state, step)
        if report["archived"]:
            return report
    return report
