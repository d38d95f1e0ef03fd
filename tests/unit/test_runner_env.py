import os
import subprocess
import sys
from pathlib import Path

import pytest

from clavain.paths import StatePaths, plugin_root
from clavain.store.db import connect
from clavain.workgraph import graph, kv, nodes
from clavain.workgraph.runner_env import RUNNER_ENV_VARS, runner_env


@pytest.fixture
def state(project: Path) -> StatePaths:
    state = StatePaths.discover()
    conn = connect(state.db)
    graph.add_nodes(conn, state, [
        {"id": "plan-1", "type": "plan", "title": "the plan"},
        {"id": "task-a", "type": "task", "parent": "plan-1"},
        {"id": "task-b", "type": "task", "parent": "plan-1"},
    ])
    conn.close()
    return state


def _node(state: StatePaths, node_id: str) -> dict:
    conn = connect(state.db)
    try:
        return nodes.get_node(conn, node_id)
    finally:
        conn.close()


def test_pointers_for_a_child_node(state: StatePaths) -> None:
    env = runner_env(state, _node(state, "task-a"), "run-7")
    assert tuple(env) == RUNNER_ENV_VARS
    assert env["CLAVAIN_DB"] == str(state.db.resolve())
    assert env["CLAVAIN_NODE_ID"] == "task-a"
    assert env["CLAVAIN_RUN_ID"] == "run-7"
    assert env["CLAVAIN_PARENT_NODE_ID"] == "plan-1"
    assert env["CLAVAIN_ARTIFACTS_DIR"] == str(state.artifacts.resolve())
    assert env["CLAVAIN_STATE_DIR"] == str(state.root.resolve())
    assert env["CLAVAIN_BIN"] == str(plugin_root() / "bin" / "clavain")
    assert Path(env["CLAVAIN_BIN"]).is_file() and os.access(env["CLAVAIN_BIN"], os.X_OK)
    assert all(Path(env[name]).is_absolute()
               for name in ("CLAVAIN_DB", "CLAVAIN_ARTIFACTS_DIR", "CLAVAIN_BIN"))


def test_root_node_gets_an_empty_parent(state: StatePaths) -> None:
    assert runner_env(state, _node(state, "plan-1"), "r")["CLAVAIN_PARENT_NODE_ID"] == ""


def _run_in_runner(state: StatePaths, node_id: str, script: str, cwd: Path):
    # Only what a runner really gets: no test-only project pointer.
    inherited = {k: v for k, v in os.environ.items() if k != "CLAVAIN_PROJECT_DIR"}
    env = {**inherited, **runner_env(state, _node(state, node_id), "run-42"),
           "CLAVAIN_PYTHON": sys.executable}
    return subprocess.run(["bash", "-c", script], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=60)


def test_a_real_runner_process_sees_the_pointers(state: StatePaths, tmp_path: Path) -> None:
    script = 'for v in ' + " ".join(RUNNER_ENV_VARS) + '; do printf "%s=%s\\n" "$v" "${!v}"; done'
    # Run from elsewhere: the pointers are absolute, so they hold from any directory.
    result = _run_in_runner(state, "task-a", script, cwd=tmp_path)
    seen = dict(line.split("=", 1) for line in result.stdout.splitlines())
    assert seen == runner_env(state, _node(state, "task-a"), "run-42")


def test_runner_agent_writes_its_node_through_the_pointers(state: StatePaths) -> None:
    script = ('"$CLAVAIN_BIN" kv put --key out.notes --value "from the agent" && '
              '"$CLAVAIN_BIN" kv put --run --key ctx.shared --value "for everyone"')
    result = _run_in_runner(state, "task-a", script, cwd=state.project)
    assert result.returncode == 0, result.stderr

    refused = _run_in_runner(
        state, "task-a", '"$CLAVAIN_BIN" kv put --node task-b --key out.x --value no',
        cwd=state.project)
    assert refused.returncode == 2
    assert "may write only its own keys" in refused.stderr

    conn = connect(state.db)
    try:
        entry = kv.get(conn, state, "task-a", "out.notes")
        assert entry["value"] == "from the agent"
        assert entry["run_id"] == "run-42"  # the writer's run, taken from CLAVAIN_RUN_ID
        assert kv.get(conn, state, "__run__", "ctx.shared")["value"] == "for everyone"
        assert kv.ls(conn, "task-b") == []
    finally:
        conn.close()


def test_runner_elsewhere_stores_large_values_in_the_projects_artifacts(
        state: StatePaths, tmp_path: Path) -> None:
    """CLAVAIN_STATE_DIR keeps a runner that left the project writing into the project."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    big = "x" * 40_000
    (elsewhere / "big.txt").write_text(big)
    result = _run_in_runner(state, "task-a",
                            '"$CLAVAIN_BIN" kv put --key out.log --value-file big.txt',
                            cwd=elsewhere)
    assert result.returncode == 0, result.stderr
    assert not (elsewhere / ".clavain").exists()
    conn = connect(state.db)
    try:
        entry = kv.get(conn, state, "task-a", "out.log")
    finally:
        conn.close()
    assert entry["value"] == big
    assert (state.artifacts / entry["artifact_sha256"]).read_text() == big


def test_current_run_id_prefers_explicit_then_inherited_then_new(monkeypatch) -> None:
    from clavain.workgraph.runner_env import current_run_id

    monkeypatch.delenv("CLAVAIN_RUN_ID", raising=False)
    assert current_run_id("given") == "given"
    fresh = current_run_id(prefix="verify")
    assert fresh.startswith("verify-") and fresh != current_run_id(prefix="verify")
    monkeypatch.setenv("CLAVAIN_RUN_ID", "run-42")
    assert current_run_id() == "run-42" and current_run_id("given") == "given"
