"""Read-only views of the workgraphs: the `.clavain/workgraph.json` snapshot and a Mermaid chart.

The snapshot holds every active graph (the running sprint's, the default graph; a sprint's graph
leaves it when the sprint ends, and its own snapshot is archived with it), each node carrying its
`graph_id`. The document is assembled by the database's JSON functions in one query (no
per-node Python; `node_objects` gives each node's object).
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
from clavain.fsutil import open_inside, open_regular, write_atomic
from clavain.paths import StatePaths
from clavain.store import queries
from clavain.workgraph.graphs import Graph
from clavain.workgraph.status_colors import STATUS_COLORS

SNAPSHOT_VERSION = 3  # 2: snake_case keys; 3: graphs (a node's graph_id)


def snapshot_text(conn: sqlite3.Connection, graph_id: str | None = None) -> str:
    """`{version, exported_at, graphs: [...], nodes: [{graph_id, …, depends_on}]}` as compact
    JSON text: every active graph, or only `graph_id` (the `export.snapshot` query)."""
    row = queries.run(conn, "export.snapshot", {"version": SNAPSHOT_VERSION, "at": now_iso(),
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
    a person removed stays removed, and one being removed gets no new file (FileNotFoundError).
    """
    with _file_lock(state, _LOCK_NAME, blocking=True, create_root=create_root):
        text = snapshot_text(conn)  # the slow part, before the folder's last look
        if not create_root and not _state_intact(state):
            raise FileNotFoundError(f"{state.root} is being removed")
        write_atomic(state.workgraph_json, text, inside=state.root, create_root=create_root)


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
            # Both lock files exist before the writer starts: it never creates one (a file
            # made in a folder being removed fails the removal: "Directory not empty").
            open_inside(state.root, state.root / _LOCK_NAME, "ab").close()
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


def _state_intact(state: StatePaths) -> bool:
    """Whether the state folder still holds what it held when the deferred writer was started
    (the folder, both lock files, the snapshot, a SQLite database). A missing one means a
    person removed it or is removing the folder (`shutil.rmtree` unlinks file by file, then
    the folder): the writer then writes nothing, since a file it made there would fail that
    removal ("Directory not empty") or make the folder again."""
    files = [state.root / _LOCK_NAME, state.root / _PENDING_NAME, state.workgraph_json]
    if state.store_url is None:
        files.append(Path(state.db))
    return os.path.isdir(state.root) and all(os.path.isfile(path) for path in files)


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
        return  # removed (or being removed) before this writer began
    except BlockingIOError:
        return  # another writer is already waiting
    if not _state_intact(state):
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

        if not _state_intact(state):
            return  # removed meanwhile: nothing to log into, and no log to make there
        with contextlib.suppress(OSError), open_inside(
                state.root, state.logs / "snapshot.log", "ab", create_root=False) as log:
            log.write(f"{utc_stamp()} deferred snapshot failed: {exc}\n".encode())


@contextmanager
def _file_lock(state: StatePaths, name: str, *, blocking: bool,
               create_root: bool = True) -> Iterator[None]:
    """flock on `<state>/<name>` (released by the kernel if the holder dies); `BlockingIOError`
    when not blocking and another process holds it. Without fcntl (not POSIX) filelock stands
    in; it costs ~80 ms of imports, paid by every mutating command, so it is the fallback.
    `create_root=False` (the deferred writer): the lock file is not created either; a missing
    one is FileNotFoundError (see `_state_intact`)."""
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
    path = state.root / name
    with (open_inside(state.root, path, "ab") if create_root
          else os.fdopen(open_regular(path, os.O_WRONLY | os.O_APPEND), "ab")) as handle:
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
    nodes = queries.run(g.conn, "export.chart_nodes", (g.id,)).fetchall()
    # Mermaid ids must be plain words; node ids may hold `-.:`, so number them.
    key = {row["id"]: f"n{i}_{_SAFE.sub('_', row['id'])}" for i, row in enumerate(nodes)}
    lines = ["flowchart TD"]
    for row in nodes:
        title = f"<br/>{_label(row['title'])}" if row["title"] else ""
        lines.append(f'  {key[row["id"]]}["{_label(row["id"])}{title}<br/>'
                     f'<i>{row["type"]} · {row["status"]}</i>"]:::{row["status"]}')
    for dep in queries.run(g.conn, "export.chart_dependencies", (g.id,)):
        arrow = "-.->" if dep["kind"] == "settled" else "-->"
        lines.append(f"  {key[dep['depends_on_id']]} {arrow} {key[dep['node_id']]}")
    lines += [f"  classDef {status} fill:{fill},stroke:{stroke}"
              for status, (fill, stroke) in STATUS_COLORS.items()]
    return "\n".join(lines) + "\n"
