"""Node-scoped key/value context: `kv_latest` is the current view, `kv_history` the newest few.

Keys belong to a node (`node_id`) or to the run-wide namespace `__run__`. Values larger than
`defaults.kvArtifactThresholdBytes` live in `.clavain/artifacts/<sha256>`; the row keeps the
file's path and hash instead of the text, so the database stays small.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

from clavain import config as config_mod
from clavain.clock import now_iso
from clavain.errors import ClavainError
from clavain.fsutil import write_atomic
from clavain.paths import StatePaths
from clavain.store.db import transaction

RUN_NAMESPACE = "__run__"
HISTORY_KEEP = 5
MAX_KEY_LENGTH = 200

_COLUMNS = ("node_id, key, value_text, artifact_path, artifact_sha256, fingerprint_json, "
            "run_id, attempt")


def check_key(key: str) -> None:
    """Keys are short dotted names (`out.summary`, `ctx.decisions`); reject what cannot be one."""
    if not key or not key.strip():
        raise ClavainError("the key is empty; pass --key NAME (e.g. out.summary)")
    if len(key) > MAX_KEY_LENGTH:
        raise ClavainError(f"key {key[:40]!r}… is longer than {MAX_KEY_LENGTH} characters")
    if any(ch.isspace() or ord(ch) < 32 for ch in key):
        raise ClavainError(f"key {key!r} contains whitespace or control characters")


def require_node(conn: sqlite3.Connection, node_id: str) -> None:
    """A node id that exists, or the run namespace (which is no node)."""
    if node_id != RUN_NAMESPACE:
        from clavain.workgraph.nodes import require_node as require_graph_node

        require_graph_node(conn, node_id)


def artifact_threshold(cfg: dict[str, Any]) -> int:
    return int(config_mod.get(cfg, "defaults.kvArtifactThresholdBytes", 16384))


def _store_artifact(state: StatePaths, raw: bytes) -> tuple[str, str]:
    """Content-addressed, so writing the same value twice costs one file and a crash between this
    and the SQL leaves only an unreferenced file, never a row pointing at nothing."""
    digest = hashlib.sha256(raw).hexdigest()
    path = state.artifacts / digest
    if not path.exists():
        write_atomic(path, raw)
    return str(path.resolve()), digest


def write(
    conn: sqlite3.Connection,
    state: StatePaths,
    node_id: str,
    key: str,
    value: str,
    *,
    run_id: str | None = None,
    attempt: int | None = None,
    fingerprint: Any = None,
    cfg: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Record `value` as the newest `(node_id, key)` and prune history to the newest five.

    SQL only and never opens a transaction: callers run it inside theirs (`put`, or the graph's
    apply of a runner result), so a key and the status change it belongs to commit together.
    `cfg` saves a caller that already loaded the config from reading it again per key.
    """
    check_key(key)
    if not isinstance(value, str):
        raise ClavainError(f"value for {key!r} must be text, got {type(value).__name__}")
    try:
        raw = value.encode("utf-8")
    except UnicodeEncodeError as exc:  # undecodable bytes from argv or stdin (surrogateescape)
        raise ClavainError(f"value for {key!r} is not UTF-8 text (character {exc.start} "
                           "stands for an undecodable byte)") from None
    value_text: str | None = value
    artifact_path = artifact_sha256 = None
    if len(raw) > artifact_threshold(cfg if cfg is not None else config_mod.load(state.config)):
        artifact_path, artifact_sha256 = _store_artifact(state, raw)
        value_text = None
    fingerprint_json = None if fingerprint is None else json.dumps(fingerprint, sort_keys=True)
    now = now_iso()
    params = (node_id, key, value_text, artifact_path, artifact_sha256, fingerprint_json,
              run_id, attempt, now)
    conn.execute(
        f"INSERT INTO kv_history ({_COLUMNS}, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        params,
    )
    conn.execute(
        f"INSERT INTO kv_latest ({_COLUMNS}, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (node_id, key) DO UPDATE SET value_text = excluded.value_text, "
        "artifact_path = excluded.artifact_path, artifact_sha256 = excluded.artifact_sha256, "
        "fingerprint_json = excluded.fingerprint_json, run_id = excluded.run_id, "
        "attempt = excluded.attempt, updated_at = excluded.updated_at",
        params,
    )
    conn.execute(
        "DELETE FROM kv_history WHERE node_id = ? AND key = ? AND id NOT IN "
        "(SELECT id FROM kv_history WHERE node_id = ? AND key = ? ORDER BY id DESC LIMIT ?)",
        (node_id, key, node_id, key, HISTORY_KEEP),
    )
    return {
        "nodeId": node_id,
        "key": key,
        "value": value,
        "bytes": len(raw),
        "artifactPath": artifact_path,
        "artifactSha256": artifact_sha256,
        "fingerprint": fingerprint,
        "runId": run_id,
        "attempt": attempt,
        "updatedAt": now,
    }


def check_write_allowed(node_id: str, writer_node: str | None, allow_cross_node: bool) -> None:
    """A runner's agent (`writer_node` set) writes its own node or `__run__`; a person (no writer)
    or an explicit override may write anywhere. Keeps one agent from rewriting another's output."""
    if writer_node is None or allow_cross_node or node_id in (writer_node, RUN_NAMESPACE):
        return
    raise ClavainError(
        f"node {writer_node!r} may write only its own keys or {RUN_NAMESPACE}, not node "
        f"{node_id!r}; pass --allow-cross-node-write if this is intended"
    )


def put(
    conn: sqlite3.Connection,
    state: StatePaths,
    node_id: str,
    key: str,
    value: str,
    *,
    writer_node: str | None = None,
    allow_cross_node: bool = False,
    run_id: str | None = None,
    attempt: int | None = None,
    fingerprint: Any = None,
) -> dict[str, Any]:
    """Check the write rule and the node, then `write` in its own transaction."""
    check_write_allowed(node_id, writer_node, allow_cross_node)
    check_key(key)
    with transaction(conn):
        require_node(conn, node_id)
        return write(conn, state, node_id, key, value, run_id=run_id, attempt=attempt,
                     fingerprint=fingerprint)


def _row(row: sqlite3.Row, *, time_key: str, time_column: str) -> dict[str, Any]:
    fingerprint = row["fingerprint_json"]
    return {
        "nodeId": row["node_id"],
        "key": row["key"],
        "value": row["value_text"],
        "artifactPath": row["artifact_path"],
        "artifactSha256": row["artifact_sha256"],
        "fingerprint": None if fingerprint is None else json.loads(fingerprint),
        "runId": row["run_id"],
        "attempt": row["attempt"],
        time_key: row[time_column],
    }


def read_artifact(path: str, sha256: str | None) -> str:
    """The text of an artifact, checked against its recorded hash so a stale or edited file is
    reported rather than passed to an agent as if it were the stored value."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise ClavainError(f"artifact {path} is missing or unreadable ({exc.strerror})") from exc
    if sha256 and hashlib.sha256(raw).hexdigest() != sha256:
        raise ClavainError(f"artifact {path} does not match its recorded sha256 {sha256}")
    return raw.decode("utf-8")


def get(conn: sqlite3.Connection, node_id: str, key: str) -> dict[str, Any] | None:
    """The newest value of `(node_id, key)`, read back from its artifact file when it has one."""
    row = conn.execute(
        f"SELECT {_COLUMNS}, updated_at FROM kv_latest WHERE node_id = ? AND key = ?",
        (node_id, key),
    ).fetchone()
    if row is None:
        return None
    entry = _row(row, time_key="updatedAt", time_column="updated_at")
    if entry["artifactPath"]:
        entry["value"] = read_artifact(entry["artifactPath"], entry["artifactSha256"])
    return entry


def ls(
    conn: sqlite3.Connection, node_id: str | None = None, prefix: str | None = None
) -> list[dict[str, Any]]:
    """Latest entries, ordered by node then key. Artifact-backed values are not read: `value` is
    None and `artifactPath` says where the text is."""
    clauses, params = [], []
    if node_id is not None:
        clauses.append("node_id = ?")
        params.append(node_id)
    if prefix:
        # substr instead of LIKE: keys often hold `_` and `%`, which LIKE treats as wildcards.
        clauses.append("substr(key, 1, ?) = ?")
        params.extend([len(prefix), prefix])
    where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
    rows = conn.execute(
        f"SELECT {_COLUMNS}, updated_at FROM kv_latest {where} ORDER BY node_id, key", params
    ).fetchall()
    return [_row(row, time_key="updatedAt", time_column="updated_at") for row in rows]


def history(conn: sqlite3.Connection, node_id: str, key: str) -> list[dict[str, Any]]:
    """Retained history of `(node_id, key)`, newest first (at most `HISTORY_KEEP` rows)."""
    rows = conn.execute(
        f"SELECT {_COLUMNS}, created_at FROM kv_history WHERE node_id = ? AND key = ? "
        "ORDER BY id DESC",
        (node_id, key),
    ).fetchall()
    return [_row(row, time_key="createdAt", time_column="created_at") for row in rows]
