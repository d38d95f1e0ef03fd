"""Where the page's subject stands, asked of the owners that say it elsewhere: the "Needs you /
Blocked / Next" lines of `clavain status` (`status.collect`, `status.next_steps`), every node's
last error (the `err.summary` its last failed attempt recorded) and the projected cost to
finish (`supervisor.projection.project`, what `clavain run --dry-run` prints). Nothing here is
computed again: a page and `clavain status` can never say different things."""

from __future__ import annotations

from typing import Any

from clavain.errors import ClavainError
from clavain.paths import StatePaths
from clavain.workgraph.statuses import SETTLED


def gather(state: StatePaths, conn: Any, page: dict[str, Any], problems: list[str]
           ) -> dict[str, Any]:
    """{"status": what `clavain status` collects for the page's graph, with its `next_steps`,
    or None; "errors": node → last error; "projection": the cost to finish, or None}."""
    graph = page["graph"]
    if graph is None or not graph["nodes"]:
        return {"status": None, "errors": {}, "projection": None}
    return {"status": _status(state, conn, page, problems),
            "errors": _errors(conn, graph["id"]),
            "projection": _projection(state, page, problems)}


def _status(state: StatePaths, conn: Any, page: dict[str, Any], problems: list[str]
            ) -> dict[str, Any] | None:
    from clavain import status
    from clavain.workgraph.graphs import Graph

    sprint = page["sprint"]
    try:
        active = None
        if sprint is not None and sprint["outcome"] == "active":  # its step and gate
            from clavain.sprint import checkpoint

            active = checkpoint.read(state)
        report = status.collect(Graph(conn, page["graph"]["id"], state), active)
    except (ClavainError, OSError, KeyError, ValueError) as exc:
        problems.append(f"what `clavain status` says: {type(exc).__name__}: {exc}")
        return None
    return {**report, "next_steps": status.next_steps(report)}


def _errors(conn: Any, graph_id: str) -> dict[str, str]:
    from clavain.store import queries

    rows = queries.run(conn, "status.last_errors", (graph_id,)).fetchall()
    return {str(row[0]): str(row[1]) for row in rows if row[1]}


def _projection(state: StatePaths, page: dict[str, Any], problems: list[str]
                ) -> dict[str, Any] | None:
    """What the nodes not yet done would cost by the runs' measured history (the projection
    `clavain run --dry-run` prints), against the run's own budget when the page is a run's."""
    from clavain.supervisor import projection

    if not any(node.get("status") not in SETTLED
               for node in page["graph"]["nodes"]):
        return None
    run_id = page["subject"]["id"] if page["subject"]["kind"] == "run" else "dry-run"
    try:
        found = projection.project(state, page["graph"]["id"], run_id=run_id)
    except Exception as exc:  # a damaged history must not cost the page
        problems.append(f"the projected cost to finish: {type(exc).__name__}: {exc}")
        return None
    return {"nodes": found["totals"]["nodes"], "cost_usd": found["totals"]["cost_usd"],
            "tokens": found["totals"]["tokens"], "source": found["source"]}
