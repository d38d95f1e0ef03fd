"""Read-only views of the workgraphs: the `.clavain/workgraph.json` snapshot and a Mermaid chart.

The snapshot holds every active graph (the running sprint's, the default graph; a sprint's graph
leaves it when the sprint ends, and its own snapshot is archived with it), each node carrying its
`graph_id`. The document is assembled by SQLite's JSON functions in one query (no per-node
Python).
The rule for how fresh it is (`after_commit`, called after every committed change): the file is
never more than `defaults.snapshotMaxLagSeconds` (default 1 s) behind the database. A change is
written at once when the file is older than that; otherwise one detached writer process, started
by the first change that found none pending, rewrites it when that lag is reached. So a burst of
changes costs one rewrite per second instead of one per change (66 ms each at 10k nodes), and
the file is always valid JSON (atomic replace). A supervisor may also call `write_snapshot`
after each step. A lag of 0 writes after every change.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from clavain import config as config_mod
from clavain import notices
from clavain.clock import now_iso
from clavain.fsutil import open_inside, write_atomic
from clavain.paths import StatePaths
from clavain.store.graph_db import dialect
from clavain.workgraph.graphs import Graph
from clavain.workgraph.node_view import NODE_JSON, NODE_JSON_POSTGRESQL
from clavain.workgraph.status_colors import STATUS_COLORS

SNAPSHOT_VERSION = 3  # 2: snake_case keys; 3: graphs (a node's graph_id)

# Which graphs a snapshot holds: every active one, or the one named (a sprint's archive).
_CHOSEN = "(g.status = 'active' AND CAST(:graph AS TEXT) IS NULL OR g.id = :graph)"
# One node per line: still cheap (the text is joined inside SQLite) and diffable by people.
_SNAPSHOT_SQL = f"""SELECT '{{"version": ' || :version || ', "exported_at": ' || json_quote(:at)
  || ', "graphs": ' || (SELECT json_group_array(json_object('id', id, 'kind', kind,
       'status', status, 'title', title)) FROM (SELECT g.* FROM graphs g WHERE {_CHOSEN}
       ORDER BY g.created_at, g.id))
  || ', "nodes": [' || coalesce(char(10) || group_concat(node, ',' || char(10)), '')
  || char(10) || ']}}'
  FROM (SELECT {NODE_JSON} AS node FROM nodes n JOIN graphs g ON g.id = n.graph_id
        WHERE {_CHOSEN} ORDER BY g.created_at, n.graph_id, n.id)"""


# PostgreSQL has no group_concat over text in one pass of this shape; the two lists come back
# as text and Python joins them (still no per-node decoding).
_PG_GRAPHS_SQL = f"""SELECT coalesce(json_agg(json_build_object('id', g.id, 'kind', g.kind,
    'status', g.status, 'title', g.title) ORDER BY g.created_at, g.id), '[]'::json)::text
  FROM graphs g WHERE {_CHOSEN}"""
_PG_NODES_SQL = f"""SELECT {NODE_JSON_POSTGRESQL} FROM nodes n JOIN graphs g ON g.id = n.graph_id
  WHERE {_CHOSEN}
  ORDER BY g.created_at, n.graph_id, n.id"""


def snapshot_text(conn: sqlite3.Connection, graph_id: str | None = None) -> str:
    """`{version, exported_at, graphs: [...], nodes: [{graph_id, …, depends_on}]}` as compact
    JSON text: every active graph, or only `graph_id`."""
    at = now_iso()
    if dialect(conn) != "sqlite":
        graphs = conn.execute(_PG_GRAPHS_SQL, {"graph": graph_id}).fetchone()[0]
        nodes = [row[0] for row in conn.execute(_PG_NODES_SQL, {"graph": graph_id})]
        body = "".join("\n" + node + ("," if i < len(nodes) - 1 else "")
                       for i, node in enumerate(nodes))
        return (f'{{"version": {SNAPSHOT_VERSION}, "exported_at": {json.dumps(at)}, '
                f'"graphs": {graphs}, "nodes": [{body}\n]}}\n')
    row = conn.execute(_SNAPSHOT_SQL, {"version": SNAPSHOT_VERSION, "at": at,
                                       "graph": graph_id}).fetchone()
    return row[0] + "\n"


def snapshot(conn: sqlite3.Connection, graph_id: str | None = None) -> dict[str, Any]:
    return json.loads(snapshot_text(conn, graph_id))


def write_snapshot(conn: sqlite3.Connection, state: StatePaths, *,
                   create_root: bool = True) -> None:
    """Rewrite the snapshot atomically, now.

    Held under a file lock and read after taking it: writers that race finish in lock order, each
    with the database as of its turn, so the file on disk is never older than the last commit
    that was followed by a snapshot. `create_root=False` (a background writer): a state folder
    a person removed stays removed (FileNotFoundError).
    """
    with _file_lock(state, _LOCK_NAME, blocking=True, create_root=create_root):
        write_atomic(state.workgraph_json, snapshot_text(conn), inside=state.root,
                     create_root=create_root)


_LOCK_NAME = "workgraph.json.lock"
_PENDING_NAME = "workgraph.json.pending"


def after_commit(g: Graph, cfg: dict[str, Any] | None = None) -> None:
    """Keep the snapshot within its allowed lag after a committed change to `g` (module
    docstring). Never raises for the snapshot's sake: the change is already saved, so a problem
    is a warning (`notices`) naming how to rewrite the file."""
    conn, state = g.conn, g.state
    try:
        cfg = cfg if cfg is not None else config_mod.load(state.config)
        lag = float(config_mod.get(cfg, "defaults.snapshotMaxLagSeconds", 1.0))
        try:
            age = time.time() - os.stat(state.workgraph_json).st_mtime
        except FileNotFoundError:
            age = float("inf")
        if lag <= 0 or not 0 <= age < lag or not _can_defer():
            write_snapshot(conn, state)
        elif not _writer_pending(state):
            _start_deferred_writer(state, due=time.time() - age + lag)
    except Exception as exc:
        notices.warn(f"{state.workgraph_json} was not refreshed ({exc}); the change is saved; "
                     "`clavain graph export` rewrites the snapshot")


def _can_defer() -> bool:
    try:
        import fcntl  # noqa: F401
    except ImportError:
        return False
    return True


def _writer_pending(state: StatePaths) -> bool:
    try:
        with _file_lock(state, _PENDING_NAME, blocking=False):
            return False
    except BlockingIOError:
        return True


# What a deferred write takes after its wait (reading and replacing ~5 MB at 10k nodes), so it
# lands by its deadline rather than after it.
WRITE_SECONDS = 0.2


def _start_deferred_writer(state: StatePaths, *, due: float) -> None:
    """A detached `python -I` (isolated: the project's own modules cannot shadow ours) that
    rewrites the snapshot by the wall-clock time `due`."""
    lib = str(Path(__file__).resolve().parents[2])
    code = ("import sys; sys.path.insert(0, sys.argv[1]); "
            "from clavain.workgraph.export import deferred_write; deferred_write(sys.argv[2:])")
    # The store URL may hold a password: in the environment, never on a command line (`ps`).
    env = {**os.environ, "CLAVAIN_SNAPSHOT_STORE": state.store_url or ""}
    subprocess.Popen(
        [sys.executable, "-I", "-c", code, lib, str(state.root), str(state.project),
         str(state.db), f"{due:.3f}"], env=env,
        cwd=state.root, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)


def deferred_write(args: list[str]) -> None:
    """The deferred writer's body: hold the pending lock while waiting (so later changes start
    no second writer), let go of it BEFORE reading the database (a change committed after that
    starts its own writer or writes itself), then write."""
    from clavain.store.graph_db import open_graph_db

    root, project, db, due = args
    state = StatePaths(root, project=project, db=db,
                       store_url=os.environ.get("CLAVAIN_SNAPSHOT_STORE") or None)
    try:
        with _file_lock(state, _PENDING_NAME, blocking=False, create_root=False):
            time.sleep(max(0.0, float(due) - time.time() - WRITE_SECONDS))
    except FileNotFoundError:
        return  # removed before this writer began
    except BlockingIOError:
        return  # another writer is already waiting
    if not os.path.isdir(state.root) or (state.store_url is None
                                         and not os.path.isfile(state.db)):
        return  # the project (or its state) was removed meanwhile: never make it again
    try:
        conn = open_graph_db(state, migrate_schema=False)
        try:
            # The folder may go while the connection opens (a server is slow to answer).
            write_snapshot(conn, state, create_root=False)
        finally:
            conn.close()
    except Exception as exc:
        from clavain.clock import utc_stamp

        # A removed state folder: nothing to log into.
        with contextlib.suppress(OSError), open_inside(
                state.root, state.logs / "snapshot.log", "ab", create_root=False) as log:
            log.write(f"{utc_stamp()} deferred snapshot failed: {exc}\n".encode())


@contextmanager
def _file_lock(state: StatePaths, name: str, *, blocking: bool,
               create_root: bool = True) -> Iterator[None]:
    """flock on `<state>/<name>` (released by the kernel if the holder dies); `BlockingIOError`
    when not blocking and another process holds it. Without fcntl (not POSIX) filelock stands
    in; it costs ~80 ms of imports, paid by every mutating command, so it is the fallback."""
    try:
        import fcntl
    except ImportError:
        from filelock import FileLock, Timeout

        try:
            with FileLock(str(state.root / name), timeout=-1 if blocking else 0):
                yield
        except Timeout:
            raise BlockingIOError(f"{name} is held") from None
        return
    with open_inside(state.root, state.root / name, "ab", create_root=create_root) as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


# ---------------------------------------------------------------- Mermaid

_SAFE = re.compile(r"[^A-Za-z0-9_]")


def _label(text: str) -> str:
    """Mermaid labels break on quotes and angle brackets; use its entity codes."""
    return (text.replace("&", "#amp;").replace('"', "#quot;")
            .replace("<", "#lt;").replace(">", "#gt;"))


def mermaid(g: Graph) -> str:
    """`flowchart TD` with one box per node (id, title, type, status) and an arrow per dep."""
    nodes = g.conn.execute("SELECT id, title, type, status FROM nodes WHERE graph_id = ? "
                           "ORDER BY id", (g.id,)).fetchall()
    # Mermaid ids must be plain words; node ids may hold `-.:`, so number them.
    key = {row["id"]: f"n{i}_{_SAFE.sub('_', row['id'])}" for i, row in enumerate(nodes)}
    lines = ["flowchart TD"]
    for row in nodes:
        title = f"<br/>{_label(row['title'])}" if row["title"] else ""
        lines.append(f'  {key[row["id"]]}["{_label(row["id"])}{title}<br/>'
                     f'<i>{row["type"]} · {row["status"]}</i>"]:::{row["status"]}')
    for dep in g.conn.execute("SELECT node_id, depends_on_id, kind FROM deps WHERE graph_id = ? "
                              "ORDER BY node_id, depends_on_id", (g.id,)):
        arrow = "-.->" if dep["kind"] == "settled" else "-->"
        lines.append(f"  {key[dep['depends_on_id']]} {arrow} {key[dep['node_id']]}")
    lines += [f"  classDef {status} fill:{fill},stroke:{stroke}"
              for status, (fill, stroke) in STATUS_COLORS.items()]
    return "\n".join(lines) + "\n"
