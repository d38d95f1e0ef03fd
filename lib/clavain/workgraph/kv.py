"""Node-scoped key/value context: `kv_latest` is the current view, `kv_history` the newest few.

Keys belong to a node (`node_id`) of a graph, or to the graph's run-wide namespace `__run__`.
Values larger than `defaults.kvArtifactThresholdBytes` live in `.clavain/artifacts/<sha256>`;
the row keeps the file's path (`artifacts/<sha256>`, relative to the state folder so a moved
project keeps its values) and hash instead of the text, so the database stays small.

An artifact is only ever read from this state folder's `artifacts/<sha256>` and checked against
that hash: the database is a file anyone with the project can edit, and a row must not turn
`kv get` into a way to hand an agent any file on the machine.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import stat
from pathlib import Path, PurePosixPath
from typing import Any

from clavain import config as config_mod
from clavain.clock import now_iso
from clavain.errors import ClavainError
from clavain.fsutil import UnsafePathError, real_folder, write_atomic
from clavain.paths import StatePaths
from clavain.store import queries
from clavain.store.db import transaction
from clavain.workgraph.graphs import Graph
from clavain.workgraph.nodes import FenceError, require_node
from clavain.workgraph.runner_env import refuse_other_node
from clavain.workgraph.statuses import NodeStatus

RUN_NAMESPACE = "__run__"
HISTORY_KEEP = 5
MAX_KEY_LENGTH = 200
_SHA256 = re.compile(r"[0-9a-f]{64}")


# What the shell verifier records beside a verify node's result; never written by hand.
VERIFIER_KEYS = ("out.tree", "out.tree_before", "out.verified_run")


def check_key(key: str) -> None:
    """Keys are short dotted names (`out.summary`, `ctx.decisions`); reject what cannot be one."""
    if not key or not key.strip():
        raise ClavainError("the key is empty (keys look like out.summary)")
    if len(key) > MAX_KEY_LENGTH:
        raise ClavainError(f"key {key[:40]!r}… is longer than {MAX_KEY_LENGTH} characters")
    if any(ch.isspace() or ord(ch) < 32 for ch in key):
        raise ClavainError(f"key {key!r} contains whitespace or control characters")


def require_owner(g: Graph, node_id: str) -> None:
    """A node id that exists, or the run namespace (which is no node)."""
    if node_id != RUN_NAMESPACE:
        require_node(g, node_id)


def artifact_threshold(cfg: dict[str, Any]) -> int:
    return int(config_mod.get(cfg, "defaults.kvArtifactThresholdBytes", 16384))


def _artifacts_name(state: StatePaths) -> str:
    """The artifacts folder relative to the state folder, as rows record it (`artifacts`)."""
    return state.artifacts.relative_to(state.root).as_posix()


def _read_no_follow(path: Path) -> bytes:
    """The bytes of `path`, refusing (`fsutil.open_regular`, never blocking) a symlink at its
    last component, a FIFO or a device."""
    from clavain.fsutil import open_regular

    with os.fdopen(open_regular(path, os.O_RDONLY), "rb") as handle:
        return handle.read()


def _holds(path: Path, digest: str) -> bool:
    try:
        return hashlib.sha256(_read_no_follow(path)).hexdigest() == digest
    except OSError:
        return False


def _store_artifact(state: StatePaths, raw: bytes) -> tuple[str, str]:
    """Content-addressed, so writing the same value twice costs one file and a crash between this
    and the SQL leaves only an unreferenced file, never a row pointing at nothing. A file that is
    there but not intact (edited, or a planted symlink) is replaced, not trusted."""
    digest = hashlib.sha256(raw).hexdigest()
    path = state.artifacts / digest
    try:
        real_folder(state.root, state.artifacts)
        if not _holds(path, digest):
            write_atomic(path, raw, inside=state.root)
    except UnsafePathError as exc:
        raise ClavainError(f"cannot store a large value: {exc}") from None
    except OSError as exc:
        raise ClavainError(f"cannot store a large value in {path} ({exc.strerror})") from None
    return f"{_artifacts_name(state)}/{digest}", digest


def write(
    g: Graph,
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
    cfg = cfg if cfg is not None else config_mod.load(g.state.config)
    # A file keeps every byte; PostgreSQL's text refuses NUL (SQLite would keep it, and both
    # stores must give back the same value).
    if len(raw) > artifact_threshold(cfg) or b"\x00" in raw:
        artifact_path, artifact_sha256 = _store_artifact(g.state, raw)
        value_text = None
    fingerprint_json = None if fingerprint is None else json.dumps(fingerprint, sort_keys=True)
    now = now_iso()
    params = (g.id, node_id, key, value_text, artifact_path, artifact_sha256, fingerprint_json,
              run_id, attempt, now)
    queries.run(g.conn, "kv.insert_history", params)
    queries.run(g.conn, "kv.upsert_latest", params)
    queries.run(g.conn, "kv.prune_history",
                (g.id, node_id, key, g.id, node_id, key, HISTORY_KEEP))
    return {
        "node_id": node_id,
        "key": key,
        "value": value,
        "bytes": len(raw),
        "artifact_path": artifact_path,
        "artifact_sha256": artifact_sha256,
        "fingerprint": fingerprint,
        "run_id": run_id,
        "attempt": attempt,
        "updated_at": now,
    }


def check_write_allowed(node_id: str, writer_node: str | None) -> None:
    """A runner's agent (`writer_node` set) writes its own node or `__run__`; a person (no writer)
    may write anywhere. Keeps one agent from rewriting another's output."""
    if writer_node is None or node_id == RUN_NAMESPACE:
        return
    refuse_other_node(node_id, "write the keys of", own=writer_node)


def put(
    g: Graph,
    node_id: str,
    key: str,
    value: str,
    *,
    writer_node: str | None = None,
    run_id: str | None = None,
    attempt: int | None = None,
    fingerprint: Any = None,
    fence: int | None = None,
) -> dict[str, Any]:
    """Check the write rule and the node, then `write` in its own transaction. `fence`: the
    writer's claim generation; a runner whose claim was taken again writes nothing."""
    check_write_allowed(node_id, writer_node)
    check_key(key)
    if key in VERIFIER_KEYS:
        raise ClavainError(f"key {key!r} is written by the shell verifier only (it proves which "
                           "files a check ran on)")
    with transaction(g.conn):
        require_owner(g, node_id)
        if fence is not None and node_id != RUN_NAMESPACE:
            node = require_node(g, node_id)
            if node["status"] != NodeStatus.IN_PROGRESS or node["lock_generation"] != fence:
                raise FenceError(node, fence)
        return write(g, node_id, key, value, run_id=run_id, attempt=attempt,
                     fingerprint=fingerprint)


def _row(row: sqlite3.Row, time_column: str) -> dict[str, Any]:
    fingerprint = row["fingerprint_json"]
    return {
        "node_id": row["node_id"],
        "key": row["key"],
        "value": row["value_text"],
        "artifact_path": row["artifact_path"],
        "artifact_sha256": row["artifact_sha256"],
        "fingerprint": None if fingerprint is None else json.loads(fingerprint),
        "run_id": row["run_id"],
        "attempt": row["attempt"],
        time_column: row[time_column],
    }


def artifact_file(state: StatePaths, artifact_path: str, sha256: str | None) -> Path:
    """Where a row's artifact is: always `<state>/artifacts/<sha256>`.

    The recorded path must be `artifacts/<sha256>`; an absolute one (rows written before paths
    were relative) counts only for its file name, which must be the sha256, so an old database
    or a moved project still reads its own files and nothing else.
    """
    if not sha256:
        raise ClavainError(f"artifact row has no sha256; refusing to read {artifact_path!r} "
                           "unchecked")
    if not _SHA256.fullmatch(sha256):
        raise ClavainError(f"artifact row's recorded sha256 {sha256[:80]!r} is not a sha256 "
                           "(64 lowercase hex digits)")
    recorded = PurePosixPath(artifact_path)
    expected = PurePosixPath(_artifacts_name(state), sha256)
    if recorded != expected and not (recorded.is_absolute() and recorded.name == sha256
                                     and ".." not in recorded.parts):
        raise ClavainError(f"artifact path {artifact_path[:200]!r} is not artifacts/<sha256> "
                           f"(sha256 {sha256}); refusing to read it")
    return state.artifacts / sha256


def _check_artifacts_folder(state: StatePaths) -> None:
    """A symlinked `artifacts/` (say, committed to the repository) is refused as a whole."""
    try:
        mode = os.lstat(state.artifacts).st_mode
    except OSError:
        return  # missing: the read below says which file is missing
    if stat.S_ISLNK(mode) or not stat.S_ISDIR(mode):
        raise ClavainError(f"{state.artifacts} is a symlink or a file, not a folder; Clavain "
                           "reads artifacts only from a real folder in its state")


def read_artifact(state: StatePaths, artifact_path: str, sha256: str | None) -> str:
    """The text of an artifact, checked against its recorded hash so a stale or edited file is
    reported rather than passed to an agent as if it were the stored value."""
    path = artifact_file(state, artifact_path, sha256)
    _check_artifacts_folder(state)
    try:
        raw = _read_no_follow(path)
    except OSError as exc:
        if path.is_symlink():
            raise ClavainError(f"artifact {path} is a symlink; Clavain reads only real files "
                               "in its artifacts folder") from None
        raise ClavainError(f"artifact {path} is missing or unreadable "
                           f"({exc.strerror or exc})") from None
    if hashlib.sha256(raw).hexdigest() != sha256:
        raise ClavainError(f"artifact {path} does not match its recorded sha256 {sha256}")
    return raw.decode("utf-8")


def get(g: Graph, node_id: str, key: str) -> dict[str, Any] | None:
    """The newest value of `(node_id, key)`, read back from its artifact file when it has one."""
    row = queries.run(g.conn, "kv.get", (g.id, node_id, key)).fetchone()
    if row is None:
        return None
    entry = _row(row, "updated_at")
    if entry["artifact_path"] is not None or entry["artifact_sha256"] is not None:
        entry["value"] = read_artifact(g.state, entry["artifact_path"] or "",
                                       entry["artifact_sha256"])
    return entry


def ls(g: Graph, node_id: str | None = None, prefix: str | None = None) -> list[dict[str, Any]]:
    """Latest entries, ordered by node then key. Artifact-backed values are not read: `value` is
    None and `artifact_path` says where the text is."""
    params = {"graph": g.id, "node": node_id, "prefix": prefix or None,
              "prefix_length": len(prefix or "")}
    rows = queries.run(g.conn, "kv.list_graph" if node_id is None else "kv.list_node",
                       params).fetchall()
    return [_row(row, "updated_at") for row in rows]


def history(g: Graph, node_id: str, key: str) -> list[dict[str, Any]]:
    """Retained history of `(node_id, key)`, newest first (at most `HISTORY_KEEP` rows)."""
    rows = queries.run(g.conn, "kv.history", (g.id, node_id, key)).fetchall()
    return [_row(row, "created_at") for row in rows]
