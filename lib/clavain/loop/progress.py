"""Did an iteration move the work forward? Progress is what Clavain can see for itself: a new
commit (HEAD moved), a change in the working tree (staged or not, `tree.fingerprint`), or
workgraph nodes done since the iteration began. The status block's FILES_MODIFIED is the agent's
word: it is never progress, and a count above 0 with no commit and no changed file is noted as a
claim nothing backs (so a runner that only says it worked trips the no-progress breaker)."""

from __future__ import annotations

import json
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
    from clavain.store import queries
    from clavain.store.graph_db import graph_store_exists, open_graph_db

    if graph_id is None or not graph_store_exists(state):
        return 0
    conn = open_graph_db(state)
    try:
        return queries.run(conn, "progress.done_count", (graph_id,)).fetchone()[0]
    finally:
        conn.close()


def nodes_done(state: StatePaths, graph_id: str | None, ids: list[str]) -> set[str]:
    """Which of `ids` the graph says are done now (none without a graph or a database, or when
    the store cannot be read: unknown is not done)."""
    from clavain.store import queries
    from clavain.store.graph_db import graph_store_exists, open_graph_db

    if graph_id is None or not ids or not graph_store_exists(state):
        return set()
    try:
        conn = open_graph_db(state)
    except Exception:  # a summary must still print; the claim stays unconfirmed
        return set()
    try:
        rows = queries.run(conn, "progress.done_among", (graph_id, json.dumps(ids))).fetchall()
        return {row[0] for row in rows}
    finally:
        conn.close()


def snapshot(state: StatePaths, graph_id: str | None) -> Snapshot:
    return Snapshot(git_head(state.project), fingerprint(state.project, state_root=state.root),
                    _done_nodes(state, graph_id))


def progress_between(before: Snapshot, after: Snapshot,
                     files_modified: int = 0) -> dict[str, Any]:
    """{"progress": bool, "why": [what changed], "unconfirmed": [claims nothing backs]};
    `files_modified`: what the status block claimed (module docstring)."""
    why = []
    if after.head != before.head:
        why.append("new commit")
    if after.tree != before.tree:
        why.append("files changed")
    unconfirmed = []
    if files_modified > 0 and not why:
        unconfirmed.append(f"FILES_MODIFIED: {files_modified}, but no commit and no changed "
                           "file")
    if after.done_nodes > before.done_nodes:
        why.append(f"{after.done_nodes - before.done_nodes} node(s) done")
    return {"progress": bool(why), "why": why, "unconfirmed": unconfirmed}
