"""Read-only views of the workgraph: the `.clavain/workgraph.json` snapshot and a Mermaid chart.

The snapshot document is assembled by SQLite's JSON functions in one query (no per-node Python),
so it stays cheap at ten thousand nodes.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from clavain.clock import now_iso
from clavain.fsutil import write_atomic
from clavain.paths import StatePaths
from clavain.workgraph.node_view import NODE_JSON

SNAPSHOT_VERSION = 1

# One node per line: still cheap (the text is joined inside SQLite) and diffable by people.
_SNAPSHOT_SQL = f"""SELECT '{{"version": ' || :version || ', "exportedAt": ' || json_quote(:at)
  || ', "nodes": [' || coalesce(char(10) || group_concat(node, ',' || char(10)), '')
  || char(10) || ']}}'
  FROM (SELECT {NODE_JSON} AS node FROM nodes n ORDER BY n.id)"""


def snapshot_text(conn: sqlite3.Connection) -> str:
    """`{version, exportedAt, nodes: [{…, dependsOn}]}` as compact JSON text."""
    row = conn.execute(_SNAPSHOT_SQL, {"version": SNAPSHOT_VERSION, "at": now_iso()}).fetchone()
    return row[0] + "\n"


def snapshot(conn: sqlite3.Connection) -> dict[str, Any]:
    return json.loads(snapshot_text(conn))


def write_snapshot(conn: sqlite3.Connection, state: StatePaths) -> None:
    """Rewrite the snapshot atomically.

    Held under a file lock and read after taking it: writers that race finish in lock order, each
    with the database as of its turn, so the file on disk is never older than the last commit
    that was followed by a snapshot.
    """
    path = state.workgraph_json
    path.parent.mkdir(parents=True, exist_ok=True)
    with _file_lock(path.parent / "workgraph.json.lock"):
        write_atomic(path, snapshot_text(conn))


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """flock where there is one (released by the kernel if the holder dies); filelock elsewhere.
    filelock costs ~80 ms of imports (asyncio), paid by every mutating command."""
    try:
        import fcntl
    except ImportError:
        from filelock import FileLock

        with FileLock(str(path)):
            yield
        return
    with open(path, "a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


# ---------------------------------------------------------------- Mermaid

_STATUS_STYLE = {
    "open": "fill:#fff,stroke:#888",
    "in_progress": "fill:#dbeafe,stroke:#2563eb",
    "done": "fill:#dcfce7,stroke:#16a34a",
    "failed": "fill:#fee2e2,stroke:#dc2626",
    "needs_human": "fill:#fef9c3,stroke:#ca8a04",
}
_SAFE = re.compile(r"[^A-Za-z0-9_]")


def _label(text: str) -> str:
    """Mermaid labels break on quotes and angle brackets; use its entity codes."""
    return (text.replace("&", "#amp;").replace('"', "#quot;")
            .replace("<", "#lt;").replace(">", "#gt;"))


def mermaid(conn: sqlite3.Connection) -> str:
    """`flowchart TD` with one box per node (id, title, type, status) and an arrow per dep."""
    nodes = conn.execute("SELECT id, title, type, status FROM nodes ORDER BY id").fetchall()
    # Mermaid ids must be plain words; node ids may hold `-.:`, so number them.
    key = {row["id"]: f"n{i}_{_SAFE.sub('_', row['id'])}" for i, row in enumerate(nodes)}
    lines = ["flowchart TD"]
    for row in nodes:
        title = f"<br/>{_label(row['title'])}" if row["title"] else ""
        lines.append(f'  {key[row["id"]]}["{_label(row["id"])}{title}<br/>'
                     f'<i>{row["type"]} · {row["status"]}</i>"]:::{row["status"]}')
    for dep in conn.execute("SELECT node_id, depends_on_id, kind FROM deps "
                            "ORDER BY node_id, depends_on_id"):
        arrow = "-.->" if dep["kind"] == "settled" else "-->"
        lines.append(f"  {key[dep['depends_on_id']]} {arrow} {key[dep['node_id']]}")
    lines += [f"  classDef {status} {style}" for status, style in _STATUS_STYLE.items()]
    return "\n".join(lines) + "\n"
