"""Did an iteration move the work forward? Progress is any of: a new commit, a change in the
working tree (staged or not), files the agent says it modified, or workgraph nodes done since the
iteration began. Read from git and the database, not from the agent's word alone — except
FILES_MODIFIED, which counts even when the change was later reverted."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from clavain.paths import StatePaths
from clavain.sprint.checkpoint import git_head
from clavain.tree import fingerprint


@dataclass(frozen=True)
class Snapshot:
    head: str | None
    tree: str | None
    done_nodes: int


def _done_nodes(state: StatePaths, graph_id: str | None) -> int:
    from clavain.store.graph_db import graph_store_exists, open_graph_db

    if graph_id is None or not graph_store_exists(state):
        return 0
    conn = open_graph_db(state)
    try:
        return conn.execute("SELECT count(*) FROM nodes WHERE graph_id = ? AND status = 'done'",
                            (graph_id,)).fetchone()[0]
    finally:
        conn.close()


def snapshot(state: StatePaths, graph_id: str | None) -> Snapshot:
    return Snapshot(git_head(state.project), fingerprint(state.project, state_root=state.root),
                    _done_nodes(state, graph_id))


def progress_between(before: Snapshot, after: Snapshot,
                     files_modified: int = 0) -> dict[str, Any]:
    """{"progress": bool, "why": [reasons]}."""
    why = []
    if after.head != before.head:
        why.append("new commit")
    if after.tree != before.tree:
        why.append("files changed")
    if files_modified > 0:
        why.append(f"{files_modified} file(s) modified (status block)")
    if after.done_nodes > before.done_nodes:
        why.append(f"{after.done_nodes - before.done_nodes} node(s) done")
    return {"progress": bool(why), "why": why}
