"""The workgraph in SQLite: add nodes, read them, pick and claim the next one, release stale locks,
answer a checkpoint, reset a node.

Readiness is `nodes.unmet_deps = 0`, kept by triggers (migration 0001), so selection is one
index probe at any graph size. Writers run inside `store.db.transaction` (BEGIN IMMEDIATE).
Functions taking `state` rewrite `.clavain/workgraph.json` after they commit.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

from clavain import config as config_mod
from clavain.clock import now_iso
from clavain.errors import ClavainError
from clavain.paths import StatePaths
from clavain.store.db import transaction
from clavain.workgraph.node_view import NODE_JSON

# Only one of each: scaffolding owns them, so an added second one is refused.
SINGLETON_TYPES = ("integrate", "final_verify")
_CHUNK = 500  # bound parameters per IN (...) list, well under SQLite's limit

# The ready predicate must match the partial index `nodes_ready` word for word.
_NEXT_ID_SQL = """SELECT id FROM nodes INDEXED BY nodes_ready
  WHERE status = 'open' AND unmet_deps = 0 AND lock_run_id IS NULL
    AND (blocked_until IS NULL OR blocked_until <= :now)
  ORDER BY rank, id LIMIT 1"""

# The claim: one conditional UPDATE. Under BEGIN IMMEDIATE no other writer runs between the pick
# and the write; the repeated conditions keep it safe even if called outside one.
_CLAIM_SQL = f"""UPDATE nodes
  SET status = 'in_progress', lock_run_id = :run_id, lock_started_at = :now, lock_pid = :pid,
      lock_host = :host, updated_at = :now
  WHERE id = ({_NEXT_ID_SQL})
    AND status = 'open' AND unmet_deps = 0 AND lock_run_id IS NULL
  RETURNING id"""

_CLAIM_ONE_SQL = """UPDATE nodes
  SET status = 'in_progress', lock_run_id = :run_id, lock_started_at = :now, lock_pid = :pid,
      lock_host = :host, updated_at = :now
  WHERE id = :id AND status = 'open' AND unmet_deps = 0 AND lock_run_id IS NULL
  RETURNING id"""


def this_host() -> str:
    return socket.gethostname()


def record_event(conn: sqlite3.Connection, node_id: str, from_status: str | None,
                 to_status: str | None, *, at: str, run_id: str | None = None,
                 note: str = "") -> None:
    conn.execute(
        "INSERT INTO events (node_id, from_status, to_status, run_id, at, note) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (node_id, from_status, to_status, run_id, at, note),
    )


# ---------------------------------------------------------------- reading

def get_node(conn: sqlite3.Connection, node_id: str) -> dict[str, Any] | None:
    """Every column (JSON columns decoded, camelCase keys) plus `dependsOn`, or None."""
    row = conn.execute(f"SELECT {NODE_JSON} FROM nodes n WHERE n.id = ?", (node_id,)).fetchone()
    return json.loads(row[0]) if row else None


def require_node(conn: sqlite3.Connection, node_id: str) -> dict[str, Any]:
    node = get_node(conn, node_id)
    if node is None:
        raise ClavainError(f"unknown node {node_id!r}; `clavain graph ls` lists the nodes")
    return node


def list_nodes(conn: sqlite3.Connection, status: str | None = None) -> list[dict[str, Any]]:
    """All nodes (or those with `status`), in selection order."""
    where, params = ("WHERE n.status = ?", (status,)) if status else ("", ())
    rows = conn.execute(
        f"SELECT {NODE_JSON} FROM nodes n {where} ORDER BY n.rank, n.id", params
    ).fetchall()
    return [json.loads(r[0]) for r in rows]


def existing_ids(conn: sqlite3.Connection, ids: Iterable[str]) -> set[str]:
    wanted = list(dict.fromkeys(ids))
    found: set[str] = set()
    for start in range(0, len(wanted), _CHUNK):
        chunk = wanted[start:start + _CHUNK]
        marks = ", ".join("?" * len(chunk))
        found.update(r[0] for r in conn.execute(
            f"SELECT id FROM nodes WHERE id IN ({marks})", chunk))
    return found


# ---------------------------------------------------------------- adding

def validate_specs(specs: Sequence[dict[str, Any]]) -> list[Any]:
    """Pydantic-validate raw specs; the first problem becomes one line naming the node."""
    from pydantic import ValidationError

    from clavain.models.node import NodeSpec

    if not isinstance(specs, (list, tuple)):
        raise ClavainError("nodes must be a JSON array of node objects")
    models = []
    for index, spec in enumerate(specs):
        label = spec.get("id") if isinstance(spec, dict) else None
        name = f"node {label!r}" if isinstance(label, str) else f"nodes[{index}]"
        try:
            models.append(NodeSpec.model_validate(spec))
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or "node"
            raise ClavainError(f"{name}: {where}: {err['msg']}") from None
    return models


def find_cycle(edges: dict[str, list[str]]) -> list[str] | None:
    """A dependency cycle among `edges` (node → deps) as a path ending where it began, or None."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = finished
    for root in edges:
        if state.get(root):
            continue
        path, stack = [root], [iter(edges.get(root, ()))]
        state[root] = 1
        while stack:
            step = next(stack[-1], None)
            if step is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(step) == 1:
                return [*path[path.index(step):], step]
            elif not state.get(step) and step in edges:
                state[step] = 1
                path.append(step)
                stack.append(iter(edges[step]))
    return None


def _check_batch(conn: sqlite3.Connection, models: list[Any], parent_id: str | None) -> None:
    """Everything that would make the batch wrong, before a single row is written."""
    seen: set[str] = set()
    for spec in models:
        if spec.id in seen:
            raise ClavainError(f"duplicate node id {spec.id!r} in the batch")
        seen.add(spec.id)
    taken = existing_ids(conn, seen)
    if taken:
        raise ClavainError(f"node {sorted(taken)[0]!r} already exists; pick another id")
    outside = {d for s in models for d in s.dependsOn if d not in seen}
    parents = {} if parent_id else {s.id: s.parent for s in models if s.parent}
    outside |= {p for p in parents.values() if p not in seen}
    known = existing_ids(conn, outside)
    for spec in models:
        for dep in spec.dependsOn:
            if dep not in seen and dep not in known:
                raise ClavainError(f"node {spec.id!r} depends on unknown node {dep!r}")
        parent = parents.get(spec.id)
        if parent and parent not in seen and parent not in known:
            raise ClavainError(f"node {spec.id!r} has unknown parent {parent!r}")
    cycle = find_cycle({s.id: [d for d in s.dependsOn if d in seen] for s in models})
    if cycle:
        raise ClavainError(f"node {cycle[0]!r} is in a dependency cycle: {' -> '.join(cycle)}")
    for kind in SINGLETON_TYPES:
        adding = [s.id for s in models if s.type == kind]
        present = conn.execute("SELECT id FROM nodes WHERE type = ? LIMIT 1", (kind,)).fetchone()
        if len(adding) + (1 if present else 0) > 1:
            raise ClavainError(
                f"node {adding[-1]!r}: the graph keeps exactly one {kind} node "
                "(`clavain graph scaffold` creates it); add tasks instead")


def _dumps(items: list[Any]) -> str:
    return json.dumps(items) if items else "[]"  # most lists are empty; skip the encoder


def insert_nodes(conn: sqlite3.Connection, cfg: dict[str, Any], models: list[Any], *,
                 parent_id: str | None = None, at: str, run_id: str | None = None,
                 dep_kind: dict[tuple[str, str], str] | None = None,
                 note: str | None = None) -> list[str]:
    """Check and insert validated specs. SQL only: the caller holds the transaction."""
    _check_batch(conn, models, parent_id)
    max_attempts = int(config_mod.get(cfg, "defaults.maxAttempts", 3))
    verify_runner = config_mod.get(cfg, "defaults.verifyRunner")
    # Parents may come later in the batch; checked at COMMIT (reset automatically then).
    conn.execute("PRAGMA defer_foreign_keys = ON")
    default_policy = json.dumps({"maxAttempts": max_attempts})
    rows, edges = [], []
    for s in models:
        runner = s.runner or (verify_runner if s.type == "verify" else None)
        policy = json.dumps(s.retryPolicy.model_dump()) if s.retryPolicy else default_policy
        rows.append((
            s.id, s.title, s.type, parent_id or s.parent, runner,
            _dumps([i.model_dump(by_alias=True, exclude_none=True) for i in s.inputs]),
            _dumps(s.ownership), _dumps(s.acceptance), _dumps(s.verify), policy, at, at,
        ))
        edges += [(s.id, d, (dep_kind or {}).get((s.id, d), "done"))
                  for d in dict.fromkeys(s.dependsOn)]
    conn.executemany(
        "INSERT INTO nodes (id, title, type, parent_id, runner, inputs_json, ownership_json, "
        "acceptance_json, verify_json, retry_policy_json, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    conn.executemany("INSERT INTO deps (node_id, depends_on_id, kind) VALUES (?, ?, ?)", edges)
    note = note or (f"added by {parent_id}" if parent_id else "added")
    conn.executemany(
        "INSERT INTO events (node_id, from_status, to_status, run_id, at, note) "
        "VALUES (?, NULL, 'open', ?, ?, ?)", [(s.id, run_id, at, note) for s in models])
    return [s.id for s in models]


def add_nodes(conn: sqlite3.Connection, state: StatePaths | None, specs: list[dict[str, Any]],
              *, parent_id: str | None = None, snapshot: bool = True) -> list[str]:
    """Validate and add `specs` in one transaction: all of them, or none and a ClavainError."""
    models = validate_specs(specs)
    cfg = config_mod.load(state.config) if state else config_mod.DEFAULTS
    with transaction(conn):
        if parent_id is not None:
            require_node(conn, parent_id)
        added = insert_nodes(conn, cfg, models, parent_id=parent_id, at=now_iso())
    _snapshot(conn, state, snapshot)
    return added


def import_specs(document: Any) -> list[Any]:
    """The node specs of an import document, checking its shape."""
    if not isinstance(document, dict) or not isinstance(document.get("nodes"), list):
        raise ClavainError('the import file must be a JSON object {"nodes": [...]}')
    extra = sorted(set(document) - {"nodes", "version"})
    if extra:
        raise ClavainError(f"unexpected top-level key {extra[0]!r} in the import file")
    return document["nodes"]


def import_nodes(conn: sqlite3.Connection, state: StatePaths | None, document: Any) -> list[str]:
    """`{"nodes": [...]}` as read by `clavain graph import`."""
    return add_nodes(conn, state, import_specs(document))


def _snapshot(conn: sqlite3.Connection, state: StatePaths | None, enabled: bool = True) -> None:
    if state is not None and enabled:
        from clavain.workgraph.export import write_snapshot

        write_snapshot(conn, state)


# ---------------------------------------------------------------- selection and claim

def select_next(conn: sqlite3.Connection, *, now: datetime | None = None) -> str | None:
    """The id of the next runnable node, without claiming it."""
    row = conn.execute(_NEXT_ID_SQL, {"now": now_iso(now)}).fetchone()
    return row[0] if row else None


def claim_next(conn: sqlite3.Connection, *, run_id: str, pid: int | None = None,
               host: str | None = None, now: datetime | None = None) -> dict[str, Any] | None:
    """Atomically lock the next runnable node for `run_id`; None when nothing is runnable."""
    return _claim(conn, _CLAIM_SQL, {}, run_id=run_id, pid=pid, host=host, now=now)


def claim_node(conn: sqlite3.Connection, node_id: str, *, run_id: str, pid: int | None = None,
               host: str | None = None, now: datetime | None = None) -> dict[str, Any] | None:
    """Lock one given node; None when it is not runnable (already claimed, blocked, done…)."""
    return _claim(conn, _CLAIM_ONE_SQL, {"id": node_id}, run_id=run_id, pid=pid, host=host,
                  now=now)


def _claim(conn: sqlite3.Connection, sql: str, extra: dict[str, Any], *, run_id: str,
           pid: int | None, host: str | None, now: datetime | None) -> dict[str, Any] | None:
    if not run_id:
        raise ClavainError("a claim needs a run id; pass --run-id RUN")
    at = now_iso(now)
    params = {"run_id": run_id, "now": at, "pid": pid, "host": host or this_host(), **extra}
    with transaction(conn):
        rows = conn.execute(sql, params).fetchall()
        if not rows:
            return None
        node_id = rows[0][0]
        record_event(conn, node_id, "open", "in_progress", at=at, run_id=run_id, note="claimed")
        return get_node(conn, node_id)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


def _stale_reason(row: sqlite3.Row, cutoff: str, host: str) -> str | None:
    if (row["lock_started_at"] or "") < cutoff:  # no start time: treat as expired
        return f"lease expired (locked at {row['lock_started_at']})"
    if row["lock_host"] == host and row["lock_pid"] and not pid_alive(row["lock_pid"]):
        return f"lock holder pid {row['lock_pid']} is gone"
    return None


def release_stale_locks(conn: sqlite3.Connection, *, lease_seconds: float,
                        now: datetime | None = None, host: str | None = None) -> list[str]:
    """Reopen nodes whose lock holder died on this host or whose lease ran out. Returns ids."""
    at_dt = now or datetime.now(timezone.utc)
    try:
        cutoff = now_iso(at_dt - timedelta(seconds=lease_seconds))
    except OverflowError:  # a lease longer than the calendar: no lock ever expires
        cutoff = ""
    host = host or this_host()
    query = ("SELECT id, lock_run_id, lock_pid, lock_host, lock_started_at FROM nodes "
             "WHERE lock_run_id IS NOT NULL")
    # Look first without the write lock: the common case is that nothing is stale.
    if not any(_stale_reason(r, cutoff, host) for r in conn.execute(query).fetchall()):
        return []
    released, at = [], now_iso(at_dt)
    with transaction(conn):
        for row in conn.execute(query).fetchall():
            reason = _stale_reason(row, cutoff, host)
            if reason is None:
                continue
            conn.execute(
                "UPDATE nodes SET status = 'open', lock_run_id = NULL, lock_started_at = NULL, "
                "lock_pid = NULL, lock_host = NULL, updated_at = ? "
                "WHERE id = ? AND lock_run_id = ?", (at, row["id"], row["lock_run_id"]))
            record_event(conn, row["id"], "in_progress", "open", at=at,
                         run_id=row["lock_run_id"], note=f"stale lock released: {reason}")
            released.append(row["id"])
    return released


# ---------------------------------------------------------------- answer and reset

def answer(conn: sqlite3.Connection, state: StatePaths | None, node_id: str,
           text: str) -> dict[str, Any]:
    """A needs_human node goes back to open with the answer kept in its checkpoint."""
    if not text.strip():
        raise ClavainError("the answer is empty; pass --answer TEXT")
    at = now_iso()
    with transaction(conn):
        node = require_node(conn, node_id)
        if node["status"] != "needs_human":
            raise ClavainError(f"node {node_id!r} is {node['status']}, not needs_human; "
                               "only a checkpointed node takes an answer")
        checkpoint = {**(node["checkpoint"] or {}), "answer": text, "answeredAt": at}
        conn.execute(
            "UPDATE nodes SET status = 'open', checkpoint_json = ?, blocked_until = NULL, "
            "lock_run_id = NULL, lock_started_at = NULL, lock_pid = NULL, lock_host = NULL, "
            "updated_at = ? WHERE id = ?", (json.dumps(checkpoint), at, node_id))
        record_event(conn, node_id, "needs_human", "open", at=at, note="answered")
        node = get_node(conn, node_id)
    _snapshot(conn, state)
    return node


def reopen(conn: sqlite3.Connection, node_id: str, from_status: str, *, at: str,
           note: str, auto: bool = False) -> None:
    """Back to open with a clean slate (attempts, backoff, lock). SQL only."""
    conn.execute(
        "UPDATE nodes SET status = 'open', attempts = 0, blocked_until = NULL, "
        "completed_at = NULL, lock_run_id = NULL, lock_started_at = NULL, lock_pid = NULL, "
        "lock_host = NULL, auto_resets = auto_resets + ?, updated_at = ? WHERE id = ?",
        (1 if auto else 0, at, node_id))
    record_event(conn, node_id, from_status, "open", at=at, note=note)


def reset(conn: sqlite3.Connection, state: StatePaths | None, node_id: str) -> dict[str, Any]:
    """Reopen any node by hand (a failed one to retry, a done one to redo)."""
    at = now_iso()
    with transaction(conn):
        node = require_node(conn, node_id)
        reopen(conn, node_id, node["status"], at=at, note=f"reset by hand (was {node['status']})")
        node = get_node(conn, node_id)
    _snapshot(conn, state)
    return node
