import hashlib
import json
import sqlite3
from pathlib import Path

import pytest

from clavain.errors import ClavainError
from clavain.paths import StatePaths
from clavain.store.db import connect, transaction
from clavain.workgraph import graph, kv


@pytest.fixture
def conn(state: StatePaths) -> sqlite3.Connection:
    connection = connect(state.db)
    graph.add_nodes(connection, state, [{"id": "task-a", "type": "task"},
                                        {"id": "task-b", "type": "task"}])
    yield connection
    connection.close()


def _count(conn: sqlite3.Connection, table: str) -> int:
    return conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]


def test_put_then_get_round_trips(conn, state) -> None:
    kv.put(conn, state, "task-a", "out.summary", "did the thing", run_id="r1", attempt=2,
           fingerprint={"inputs": "abc"})
    entry = kv.get(conn, "task-a", "out.summary")
    assert entry["value"] == "did the thing"
    assert entry["runId"] == "r1" and entry["attempt"] == 2
    assert entry["fingerprint"] == {"inputs": "abc"}
    assert entry["artifactPath"] is None
    assert kv.get(conn, "task-a", "out.other") is None
    assert kv.get(conn, "task-b", "out.summary") is None


def test_history_keeps_the_newest_five_per_node_and_key(conn, state) -> None:
    for n in range(1, 8):
        kv.put(conn, state, "task-a", "out.summary", f"v{n}")
    kv.put(conn, state, "task-a", "out.other", "x")
    kv.put(conn, state, "task-b", "out.summary", "b")

    assert kv.get(conn, "task-a", "out.summary")["value"] == "v7"
    assert [h["value"] for h in kv.history(conn, "task-a", "out.summary")] == [
        "v7", "v6", "v5", "v4", "v3"]
    # Pruning one (node, key) leaves the others alone.
    assert [h["value"] for h in kv.history(conn, "task-a", "out.other")] == ["x"]
    assert [h["value"] for h in kv.history(conn, "task-b", "out.summary")] == ["b"]
    assert _count(conn, "kv_history") == 7
    assert _count(conn, "kv_latest") == 3


def test_run_namespace_needs_no_node(conn, state) -> None:
    kv.put(conn, state, kv.RUN_NAMESPACE, "ctx.decisions", "use sqlite", writer_node="task-a")
    assert kv.get(conn, "__run__", "ctx.decisions")["value"] == "use sqlite"


def test_agent_may_write_its_own_node_and_the_run(conn, state) -> None:
    kv.put(conn, state, "task-a", "out.x", "1", writer_node="task-a")
    kv.put(conn, state, "__run__", "ctx.x", "2", writer_node="task-a")
    assert kv.get(conn, "task-a", "out.x")["value"] == "1"


def test_cross_node_write_is_refused_and_writes_nothing(conn, state) -> None:
    with pytest.raises(ClavainError, match="allow-cross-node-write") as excinfo:
        kv.put(conn, state, "task-b", "out.summary", "overwritten", writer_node="task-a")
    assert excinfo.value.exit_code == 2
    assert "\n" not in str(excinfo.value)
    assert _count(conn, "kv_latest") == 0
    assert _count(conn, "kv_history") == 0


def test_cross_node_write_with_override_or_by_a_person(conn, state) -> None:
    kv.put(conn, state, "task-b", "out.a", "agent", writer_node="task-a", allow_cross_node=True)
    kv.put(conn, state, "task-b", "out.b", "person", writer_node=None)
    assert kv.get(conn, "task-b", "out.a")["value"] == "agent"
    assert kv.get(conn, "task-b", "out.b")["value"] == "person"


def test_unknown_node_is_refused_and_writes_nothing(conn, state) -> None:
    with pytest.raises(ClavainError, match="unknown node 'task-zz'"):
        kv.put(conn, state, "task-zz", "out.summary", "x")
    assert _count(conn, "kv_history") == 0


@pytest.mark.parametrize("key", ["", "   ", "has space", "tab\tkey", "k" * 201])
def test_bad_keys_are_refused(conn, state, key) -> None:
    with pytest.raises(ClavainError):
        kv.put(conn, state, "task-a", key, "x")
    assert _count(conn, "kv_history") == 0


def test_value_must_be_text(conn, state) -> None:
    with pytest.raises(ClavainError, match="must be text"):
        kv.put(conn, state, "task-a", "out.n", 42)  # type: ignore[arg-type]


def test_write_joins_the_callers_transaction(conn, state) -> None:
    # write() opening its own BEGIN would fail here ("cannot start a transaction within a
    # transaction"); and the rollback must take its rows with it.
    with pytest.raises(RuntimeError), transaction(conn):
        kv.write(conn, state, "task-a", "out.summary", "in the batch", run_id="r")
        assert kv.get(conn, "task-a", "out.summary")["value"] == "in the batch"
        raise RuntimeError("apply failed later")
    assert kv.get(conn, "task-a", "out.summary") is None
    assert _count(conn, "kv_history") == 0


def _set_threshold(state: StatePaths, size: int) -> None:
    state.root.mkdir(parents=True, exist_ok=True)
    state.config.write_text(json.dumps({"defaults": {"kvArtifactThresholdBytes": size}}))


def test_large_values_go_to_an_artifact_file(conn, state) -> None:
    _set_threshold(state, 10)
    big = "line of log output\n" * 20
    written = kv.put(conn, state, "task-a", "out.log", big)

    digest = hashlib.sha256(big.encode()).hexdigest()
    artifact = state.artifacts / digest
    assert Path(written["artifactPath"]) == artifact.resolve()
    assert artifact.read_text() == big
    row = conn.execute("SELECT value_text, artifact_path, artifact_sha256 FROM kv_latest "
                       "WHERE node_id = 'task-a' AND key = 'out.log'").fetchone()
    assert row["value_text"] is None
    assert row["artifact_sha256"] == digest and row["artifact_path"] == str(artifact.resolve())
    assert kv.get(conn, "task-a", "out.log")["value"] == big
    # ls does not read artifacts; it says where the text is.
    [listed] = kv.ls(conn, "task-a")
    assert listed["value"] is None and listed["artifactPath"] == str(artifact.resolve())
    # Small values stay inline.
    kv.put(conn, state, "task-a", "out.small", "tiny")
    assert kv.get(conn, "task-a", "out.small")["artifactPath"] is None


def test_tampered_or_missing_artifact_is_reported(conn, state) -> None:
    _set_threshold(state, 10)
    written = kv.put(conn, state, "task-a", "out.log", "x" * 100)
    path = Path(written["artifactPath"])
    path.write_text("edited")
    with pytest.raises(ClavainError, match="does not match its recorded sha256"):
        kv.get(conn, "task-a", "out.log")
    path.unlink()
    with pytest.raises(ClavainError, match="missing"):
        kv.get(conn, "task-a", "out.log")


def test_ls_filters_by_node_and_literal_prefix(conn, state) -> None:
    for node, key in [("task-a", "out_a"), ("task-a", "outXa"), ("task-a", "ctx.z"),
                      ("task-b", "out_b"), ("__run__", "ctx.goal")]:
        kv.put(conn, state, node, key, f"{node}:{key}")
    assert [e["key"] for e in kv.ls(conn, "task-a")] == ["ctx.z", "outXa", "out_a"]
    # `_` is a LIKE wildcard; the prefix must match it literally.
    assert [(e["nodeId"], e["key"]) for e in kv.ls(conn, prefix="out_")] == [
        ("task-a", "out_a"), ("task-b", "out_b")]
    assert [e["nodeId"] for e in kv.ls(conn)] == [
        "__run__", "task-a", "task-a", "task-a", "task-b"]
    assert kv.ls(conn, "task-a", "nothing.") == []
