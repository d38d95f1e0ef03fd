"""Move workgraphs between stores: a project's SQLite file to a team's PostgreSQL server and back
(`clavain db migrate --to`). Nodes, edges, KV with its history, events and graph rows are copied;
artifacts travel by reference (their paths). The copy is one transaction on the target, checked
before it commits: row counts and a checksum per table must match the source, or nothing is
written. So an interrupted copy leaves the target as it was and can simply be run again; a graph
already copied (same checksum) is left alone; one that differs is never overwritten unless asked.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from clavain.errors import ClavainError
from clavain.store import queries
from clavain.store.db import transaction

# The tables copied, parents first, and their columns as `transfer.read_<table>` reads them (no
# surrogate ids: the target numbers history and events itself, in the source's order; `rank` is
# derived; unmet_deps is recomputed by the target's triggers from the copied edges and then
# checked like every other column). tests/unit/test_named_queries checks the two agree.
COLUMNS = {
    "graphs": ("id", "kind", "status", "title", "created_at", "closed_at"),
    "nodes": ("graph_id", "id", "title", "type", "status", "parent_id", "runner", "inputs_json",
              "ownership_json", "acceptance_json", "verify_json", "retry_policy_json",
              "attempts", "auto_resets", "unmet_deps", "blocked_until", "lock_run_id",
              "lock_started_at", "lock_pid", "lock_host", "human_question_json", "created_at",
              "updated_at", "completed_at", "lock_renewed_at", "escalations", "superseded_by",
              "verifies", "commands_json", "lock_generation", "lock_lease_ms",
              "lock_runner_pid", "lock_runner_identity", "crashes", "origin_json"),
    "deps": ("graph_id", "node_id", "depends_on_id", "kind"),
    "kv_latest": ("graph_id", "node_id", "key", "value_text", "artifact_path",
                  "artifact_sha256", "fingerprint_json", "run_id", "attempt", "updated_at"),
    "kv_history": ("graph_id", "node_id", "key", "value_text", "artifact_path",
                   "artifact_sha256", "fingerprint_json", "run_id", "attempt", "created_at"),
    "events": ("graph_id", "node_id", "from_status", "to_status", "run_id", "at", "note"),
}


def _rows(conn: Any, table: str, graph_id: str) -> list[tuple[Any, ...]]:
    rows = [tuple(row) for row in queries.run(conn, f"transfer.read_{table}", (graph_id,))]
    # Tables read without an order are sorted here: by value, not by either side's collation.
    if table in ("kv_history", "events"):
        return rows
    return sorted(rows, key=lambda row: json.dumps(row, default=str))


def fingerprint(conn: Any, graph_id: str) -> dict[str, dict[str, Any]]:
    """{table: {"rows": n, "sha256": …}} of one graph's content."""
    report = {}
    for table in COLUMNS:
        rows = _rows(conn, table, graph_id)
        digest = hashlib.sha256(json.dumps(rows, separators=(",", ":")).encode()).hexdigest()
        report[table] = {"rows": len(rows), "sha256": digest}
    return report


def graph_ids(conn: Any) -> list[str]:
    return [row[0] for row in queries.run(conn, "transfer.graph_ids")]


def _is_empty(fp: dict[str, dict[str, Any]]) -> bool:
    """Nothing but (at most) the graph's own row: the default graph every store starts with."""
    return all(part["rows"] == 0 for table, part in fp.items() if table != "graphs")


class GraphConflict(ClavainError):
    """The target holds a graph of the same id with other content: overwriting it could lose
    someone's work, so it takes an explicit choice."""

    def __init__(self, graph_id: str, there: int, here: int) -> None:
        super().__init__(f"graph {graph_id!r} is already in the target store with other "
                         f"content ({there} nodes there, {here} here); nothing was copied")
        self.graph_id = graph_id


def _action(graph_id: str, have: dict[str, Any], there: dict[str, Any], replace: bool) -> str:
    if there == have:
        return "unchanged"
    if there["graphs"]["rows"] == 0 or _is_empty(there):
        return "copied"
    if replace:
        return "replaced"
    raise GraphConflict(graph_id, there["nodes"]["rows"], have["nodes"]["rows"])


def copy_graphs(source: Any, target: Any, *, only: list[str] | None = None,
                replace: bool = False) -> dict[str, Any]:
    """Copy every graph of `source` (or those in `only`) into `target`; returns per graph what
    happened ("copied", "unchanged", "replaced", "skipped": an empty graph not asked for) with
    its counts. Refuses a graph the target already holds with other content unless
    `replace`, deciding again inside the copy's transaction (nothing written meanwhile is
    overwritten unseen)."""
    wanted = only or graph_ids(source)
    known = set(graph_ids(source))
    missing = [graph_id for graph_id in wanted if graph_id not in known]
    if missing:
        raise ClavainError(f"no graph {missing[0]!r} in the source store")
    plan: list[tuple[str, str, dict[str, Any]]] = []
    for graph_id in wanted:
        have = fingerprint(source, graph_id)
        if only is None and _is_empty(have):
            plan.append((graph_id, "skipped", have))  # nothing to share: never blocks
            continue
        plan.append((graph_id, _action(graph_id, have, fingerprint(target, graph_id),
                                       replace), have))
    with transaction(target):
        for index, (graph_id, action, have) in enumerate(plan):
            if action == "skipped":
                continue
            action = _action(graph_id, have, fingerprint(target, graph_id), replace)
            plan[index] = (graph_id, action, have)
            if action == "unchanged":
                continue
            _delete(target, graph_id)
            _insert(source, target, graph_id)
            got = fingerprint(target, graph_id)
            if got != have:
                bad = next(t for t in COLUMNS if got[t] != have[t])
                raise ClavainError(f"graph {graph_id!r}: table {bad} does not match after the "
                                   f"copy ({got[bad]['rows']} rows there, {have[bad]['rows']} "
                                   "here); nothing was written")
    return {"graphs": [{"graph_id": graph_id, "action": action,
                        "counts": {table: part["rows"] for table, part in have.items()},
                        "sha256": {table: part["sha256"] for table, part in have.items()}}
                       for graph_id, action, have in plan]}


def _delete(conn: Any, graph_id: str) -> None:
    # Edges before nodes (the triggers keep counts; nodes reference one another by parent).
    for step in ("delete_deps", "delete_kv_latest", "delete_kv_history", "delete_events",
                 "unlink_parents", "delete_nodes", "delete_graph"):
        queries.run(conn, f"transfer.{step}", (graph_id,))


def _insert(source: Any, target: Any, graph_id: str) -> None:
    queries.run(target, "store.defer_foreign_keys")  # parents may come after their children
    for table in COLUMNS:
        rows = _rows(source, table, graph_id)
        if table == "nodes":  # counted again by the target's triggers as the edges arrive
            at = COLUMNS[table].index("unmet_deps")
            rows = [(*row[:at], 0, *row[at + 1:]) for row in rows]
        if rows:
            queries.run_many(target, f"transfer.insert_{table}", rows)


def migrate(state: Any, to: str | None, *, only: list[str] | None = None,
            replace: bool = False) -> dict[str, Any]:
    """`clavain db migrate`: without `to`, bring the configured workgraph store's schema up to
    date; with `to` (a PostgreSQL URL or an SQLite file path), copy this project's graphs
    there as `copy_graphs` does."""
    from clavain.store import graph_db

    source = graph_db.open_graph_db(state)
    try:
        if to is None:
            return {"store": graph_db.describe(state, source), "graphs": []}
        _refuse_missing_folder(to)
        target = graph_db.open_store(to)
        try:
            if graph_db.same_store(source, target):
                raise ClavainError(f"{graph_db.redact_target(to)} is the store this project "
                                   "already uses; name another one")
            report = copy_graphs(source, target, only=only, replace=replace)
        finally:
            target.close()
    finally:
        source.close()
    return {"from": graph_db.redact_target(graph_db.store_url(state) or str(state.db)),
            "to": graph_db.redact_target(to), **report}


def _refuse_missing_folder(to: str) -> None:
    """A copy goes into an existing folder: a mistyped path is refused rather than made, so
    the graphs never land somewhere the person did not mean."""
    from clavain.locate import looks_like_url

    if looks_like_url(to):
        return
    folder = Path(os.path.abspath(os.path.expanduser(to))).parent
    if not folder.is_dir():
        raise ClavainError(f"--to {to}: the folder {folder} does not exist; create it first, "
                           "or name a file in an existing folder")
