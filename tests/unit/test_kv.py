import hashlib
import json
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from clavain.errors import ClavainError
from clavain.paths import StatePaths
from clavain.store.db import connect, transaction
from clavain.workgraph import edits, kv
from clavain.workgraph.graphs import DEFAULT_GRAPH, Graph
from tests.sql import run_sql


@pytest.fixture
def g(g: Graph) -> Graph:
    """The default graph with two tasks; `conn` is its connection."""
    edits.add_nodes(g, [{"id": "task-a", "type": "task"}, {"id": "task-b", "type": "task"}])
    return g


def _count(conn: sqlite3.Connection, table: str) -> int:
    return run_sql(conn, f"SELECT COUNT(*) FROM {table}").fetchone()[0]


def test_put_then_get_round_trips(g) -> None:
    kv.put(g, "task-a", "out.summary", "did the thing", run_id="r1", attempt=2,
           fingerprint={"inputs": "abc"})
    entry = kv.get(g, "task-a", "out.summary")
    assert entry["value"] == "did the thing"
    assert entry["run_id"] == "r1" and entry["attempt"] == 2
    assert entry["fingerprint"] == {"inputs": "abc"}
    assert entry["artifact_path"] is None
    assert kv.get(g, "task-a", "out.other") is None
    assert kv.get(g, "task-b", "out.summary") is None


def test_history_keeps_the_newest_five_per_node_and_key(g, conn) -> None:
    for n in range(1, 8):
        kv.put(g, "task-a", "out.summary", f"v{n}")
    kv.put(g, "task-a", "out.other", "x")
    kv.put(g, "task-b", "out.summary", "b")

    assert kv.get(g, "task-a", "out.summary")["value"] == "v7"
    assert [h["value"] for h in kv.history(g, "task-a", "out.summary")] == [
        "v7", "v6", "v5", "v4", "v3"]
    # Pruning one (node, key) leaves the others alone.
    assert [h["value"] for h in kv.history(g, "task-a", "out.other")] == ["x"]
    assert [h["value"] for h in kv.history(g, "task-b", "out.summary")] == ["b"]
    assert _count(conn, "kv_history") == 7
    assert _count(conn, "kv_latest") == 3


def test_run_namespace_needs_no_node(g) -> None:
    kv.put(g, kv.RUN_NAMESPACE, "ctx.decisions", "use sqlite", writer_node="task-a")
    assert kv.get(g, "__run__", "ctx.decisions")["value"] == "use sqlite"


def test_agent_may_write_its_own_node_and_the_run(g) -> None:
    kv.put(g, "task-a", "out.x", "1", writer_node="task-a")
    kv.put(g, "__run__", "ctx.x", "2", writer_node="task-a")
    assert kv.get(g, "task-a", "out.x")["value"] == "1"


def test_cross_node_write_is_refused_and_writes_nothing(g, conn) -> None:
    with pytest.raises(ClavainError, match="may not write the keys of") as excinfo:
        kv.put(g, "task-b", "out.summary", "overwritten", writer_node="task-a")
    assert excinfo.value.exit_code == 2
    assert "\n" not in str(excinfo.value)
    assert _count(conn, "kv_latest") == 0
    assert _count(conn, "kv_history") == 0


def test_a_runner_writes_only_its_own_node_and_a_person_any(g) -> None:
    with pytest.raises(ClavainError, match=r"works on node 'task-a'.*may not write the keys "
                                           r"of node 'task-b'"):
        kv.put(g, "task-b", "out.a", "agent", writer_node="task-a")
    kv.put(g, "task-b", "out.b", "person", writer_node=None)
    kv.put(g, kv.RUN_NAMESPACE, "ctx.shared", "agent", writer_node="task-a")
    assert kv.get(g, "task-b", "out.a") is None
    assert kv.get(g, "task-b", "out.b")["value"] == "person"


def test_unknown_node_is_refused_and_writes_nothing(g, conn) -> None:
    with pytest.raises(ClavainError, match="unknown node 'task-zz'"):
        kv.put(g, "task-zz", "out.summary", "x")
    assert _count(conn, "kv_history") == 0


@pytest.mark.parametrize("key", ["", "   ", "has space", "tab\tkey", "k" * 201])
def test_bad_keys_are_refused(g, conn, key) -> None:
    with pytest.raises(ClavainError):
        kv.put(g, "task-a", key, "x")
    assert _count(conn, "kv_history") == 0


def test_value_must_be_text(g) -> None:
    with pytest.raises(ClavainError, match="must be text"):
        kv.put(g, "task-a", "out.n", 42)  # type: ignore[arg-type]


def test_write_joins_the_callers_transaction(g, conn) -> None:
    # write() opening its own BEGIN would fail here ("cannot start a transaction within a
    # transaction"); and the rollback must take its rows with it.
    with pytest.raises(RuntimeError), transaction(conn):
        kv.write(g, "task-a", "out.summary", "in the batch", run_id="r")
        assert kv.get(g, "task-a", "out.summary")["value"] == "in the batch"
        raise RuntimeError("apply failed later")
    assert kv.get(g, "task-a", "out.summary") is None
    assert _count(conn, "kv_history") == 0


def _set_threshold(state: StatePaths, size: int) -> None:
    state.root.mkdir(parents=True, exist_ok=True)
    state.config.write_text(json.dumps({"defaults": {"kvArtifactThresholdBytes": size}}))


def test_large_values_go_to_an_artifact_file(g, conn, state) -> None:
    _set_threshold(state, 10)
    big = "line of log output\n" * 20
    written = kv.put(g, "task-a", "out.log", big)

    digest = hashlib.sha256(big.encode()).hexdigest()
    artifact = state.artifacts / digest
    # Relative to the state folder, so the project can move.
    assert written["artifact_path"] == f"artifacts/{digest}"
    assert written["artifact_sha256"] == digest
    assert artifact.read_text() == big
    row = run_sql(conn, "SELECT value_text, artifact_path, artifact_sha256 FROM kv_latest "
                       "WHERE node_id = 'task-a' AND key = 'out.log'").fetchone()
    assert row["value_text"] is None
    assert row["artifact_sha256"] == digest and row["artifact_path"] == f"artifacts/{digest}"
    assert kv.get(g, "task-a", "out.log")["value"] == big
    # ls does not read artifacts; it says where the text is.
    [listed] = kv.ls(g, "task-a")
    assert listed["value"] is None and listed["artifact_path"] == f"artifacts/{digest}"
    # Small values stay inline.
    kv.put(g, "task-a", "out.small", "tiny")
    assert kv.get(g, "task-a", "out.small")["artifact_path"] is None


def test_tampered_or_missing_artifact_is_reported(g, state) -> None:
    _set_threshold(state, 10)
    written = kv.put(g, "task-a", "out.log", "x" * 100)
    path = state.artifacts / written["artifact_sha256"]
    path.write_text("edited")
    with pytest.raises(ClavainError, match="does not match its recorded sha256"):
        kv.get(g, "task-a", "out.log")
    path.unlink()
    with pytest.raises(ClavainError, match="missing"):
        kv.get(g, "task-a", "out.log")


def test_writing_a_value_again_repairs_its_tampered_artifact(g, state) -> None:
    _set_threshold(state, 10)
    written = kv.put(g, "task-a", "out.log", "x" * 100)
    (state.artifacts / written["artifact_sha256"]).write_text("edited")
    kv.put(g, "task-a", "out.log", "x" * 100)
    assert kv.get(g, "task-a", "out.log")["value"] == "x" * 100


def _point_row_at(conn, path: str | None, sha256: str | None) -> None:
    run_sql(conn, "UPDATE kv_latest SET artifact_path = ?, artifact_sha256 = ? "
                 "WHERE node_id = 'task-a' AND key = 'out.log'", (path, sha256))


def _sha(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


@pytest.fixture
def artifact_row(g, state) -> str:
    """A large value in task-a / out.log; returns its sha256."""
    _set_threshold(state, 10)
    return kv.put(g, "task-a", "out.log", "y" * 100)["artifact_sha256"]


def test_a_row_pointing_at_a_system_file_is_refused(g, conn, artifact_row) -> None:
    # Even with the file's true hash recorded: the path alone decides.
    _point_row_at(conn, "/etc/passwd", _sha(Path("/etc/passwd").read_bytes()))
    with pytest.raises(ClavainError, match="'/etc/passwd' is not artifacts/<sha256>"):
        kv.get(g, "task-a", "out.log")


@pytest.mark.parametrize("how", ["other name", "dot-dot", "nested", "bare name"])
def test_a_row_pointing_outside_the_artifacts_is_refused(g, conn, artifact_row, tmp_path,
                                                         how) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = b"not for agents"
    digest = _sha(secret)
    (outside / "secret.txt").write_bytes(secret)
    (outside / digest).write_bytes(secret)
    path = {"other name": str(outside / "secret.txt"),
            "dot-dot": f"artifacts/../../outside/{digest}",
            "nested": f"artifacts/sub/{digest}",
            "bare name": digest}[how]
    _point_row_at(conn, path, digest)
    with pytest.raises(ClavainError, match="is not artifacts/<sha256>"):
        kv.get(g, "task-a", "out.log")


def test_an_absolute_path_is_read_from_this_projects_artifacts_only(g, conn, artifact_row,
                                                                    tmp_path) -> None:
    """An old row's absolute path counts only for its file name: the text comes from this state
    folder's artifacts, never from where the path points."""
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = b"not for agents"
    (outside / _sha(secret)).write_bytes(secret)
    _point_row_at(conn, str(outside / _sha(secret)), _sha(secret))
    with pytest.raises(ClavainError, match="missing"):
        kv.get(g, "task-a", "out.log")


def test_a_row_without_sha256_is_refused(g, conn, artifact_row) -> None:
    _point_row_at(conn, f"artifacts/{artifact_row}", None)
    with pytest.raises(ClavainError, match="artifact row has no sha256"):
        kv.get(g, "task-a", "out.log")


def test_a_malformed_sha256_is_refused(g, conn, artifact_row) -> None:
    _point_row_at(conn, "artifacts/..", "..")
    with pytest.raises(ClavainError, match="not a sha256"):
        kv.get(g, "task-a", "out.log")


def test_a_symlink_inside_the_artifacts_is_refused(g, state, artifact_row, tmp_path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("y" * 100)  # the same text, so only the symlink is wrong
    link = state.artifacts / artifact_row
    link.unlink()
    link.symlink_to(outside)
    with pytest.raises(ClavainError, match="symlink"):
        kv.get(g, "task-a", "out.log")


def test_a_symlinked_artifacts_folder_is_refused(g, state, artifact_row, tmp_path) -> None:
    moved = tmp_path / "elsewhere"
    state.artifacts.rename(moved)
    state.artifacts.symlink_to(moved)
    with pytest.raises(ClavainError, match="symlink"):
        kv.get(g, "task-a", "out.log")


def test_writing_never_follows_a_planted_symlink(g, state, tmp_path) -> None:
    _set_threshold(state, 10)
    big = "z" * 100
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    state.artifacts.mkdir(parents=True)
    (state.artifacts / _sha(big.encode())).symlink_to(victim)
    kv.put(g, "task-a", "out.log", big)
    assert victim.read_text() == "keep me"
    assert kv.get(g, "task-a", "out.log")["value"] == big

    # A symlinked artifacts folder is refused as a whole, and nothing is recorded.
    (state.artifacts / _sha(big.encode())).unlink()
    state.artifacts.rmdir()
    state.artifacts.symlink_to(tmp_path)
    with pytest.raises(ClavainError, match="symlink"):
        kv.put(g, "task-a", "out.other", big)
    assert kv.get(g, "task-a", "out.other") is None
    assert not (tmp_path / _sha(big.encode())).exists()


@pytest.mark.parametrize("old_style", [False, True])
def test_a_moved_project_keeps_its_large_values(tmp_path, old_style) -> None:
    here = StatePaths(tmp_path / "here" / ".clavain")
    _set_threshold(here, 10)
    big = "large value\n" * 50
    with closing(connect(here.db)) as conn:
        g = Graph(conn, DEFAULT_GRAPH, here)
        edits.add_nodes(g, [{"id": "task-a", "type": "task"}])
        digest = kv.put(g, "task-a", "out.log", big)["artifact_sha256"]
        if old_style:  # databases written before paths were relative hold absolute ones
            _point_row_at(conn, str((here.artifacts / digest).resolve()), digest)
    shutil.move(tmp_path / "here", tmp_path / "there")

    there = StatePaths(tmp_path / "there" / ".clavain")
    with closing(connect(there.db)) as conn:
        assert kv.get(Graph(conn, DEFAULT_GRAPH, there), "task-a", "out.log")["value"] == big


def test_returned_entries_use_snake_case_keys(g, state) -> None:
    _set_threshold(state, 10)
    expected = {"node_id", "key", "value", "artifact_path", "artifact_sha256", "fingerprint",
                "run_id", "attempt"}
    written = kv.put(g, "task-a", "out.log", "w" * 100, run_id="r")
    assert set(written) == expected | {"bytes", "updated_at"}
    assert set(kv.get(g, "task-a", "out.log")) == expected | {"updated_at"}
    assert set(kv.ls(g)[0]) == expected | {"updated_at"}
    assert set(kv.history(g, "task-a", "out.log")[0]) == expected | {"created_at"}


def test_ls_filters_by_node_and_literal_prefix(g) -> None:
    for node, key in [("task-a", "out_a"), ("task-a", "outXa"), ("task-a", "ctx.z"),
                      ("task-b", "out_b"), ("__run__", "ctx.goal")]:
        kv.put(g, node, key, f"{node}:{key}")
    assert [e["key"] for e in kv.ls(g, "task-a")] == ["ctx.z", "outXa", "out_a"]
    # `_` is a LIKE wildcard; the prefix must match it literally.
    assert [(e["node_id"], e["key"]) for e in kv.ls(g, prefix="out_")] == [
        ("task-a", "out_a"), ("task-b", "out_b")]
    assert [e["node_id"] for e in kv.ls(g)] == [
        "__run__", "task-a", "task-a", "task-a", "task-b"]
    assert kv.ls(g, "task-a", "nothing.") == []


def test_keys_belong_to_one_graph(g, conn, state) -> None:
    """Node ids repeat across graphs (one per sprint); their keys, history and run namespace
    must not."""
    other = Graph(conn, "sprint-2", state)
    edits.add_nodes(other, [{"id": "task-a", "type": "task"}])
    kv.put(g, "task-a", "out.summary", "default's")
    kv.put(g, kv.RUN_NAMESPACE, "ctx.goal", "default goal")
    kv.put(other, "task-a", "out.summary", "sprint's")

    assert kv.get(g, "task-a", "out.summary")["value"] == "default's"
    assert kv.get(other, "task-a", "out.summary")["value"] == "sprint's"
    assert kv.get(other, kv.RUN_NAMESPACE, "ctx.goal") is None
    assert [h["value"] for h in kv.history(other, "task-a", "out.summary")] == ["sprint's"]
    assert [(e["node_id"], e["key"]) for e in kv.ls(other)] == [("task-a", "out.summary")]
    # A node of another graph is unknown here.
    with pytest.raises(ClavainError, match="unknown node 'task-b'"):
        kv.put(other, "task-b", "out.summary", "x")
