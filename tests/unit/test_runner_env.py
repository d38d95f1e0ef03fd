import os
import subprocess
import sys
from pathlib import Path

import pytest

from clavain.paths import StatePaths, plugin_root
from clavain.store.db import connect
from clavain.workgraph import edits, kv, nodes
from clavain.workgraph.graphs import DEFAULT_GRAPH, Graph
from clavain.workgraph.runner_env import RUNNER_ENV_VARS, runner_env

SPRINT = "sprint-9"


@pytest.fixture
def state(project: Path) -> StatePaths:
    state = StatePaths.discover()
    conn = connect(state.db)
    edits.add_nodes(Graph(conn, DEFAULT_GRAPH, state), [
        {"id": "plan-1", "type": "plan", "title": "the plan"},
        {"id": "task-a", "type": "task", "parent": "plan-1"},
        {"id": "task-b", "type": "task", "parent": "plan-1"},
    ])
    # Another graph (a sprint's) reusing a node id: the runner must stay on its own graph.
    edits.add_nodes(Graph(conn, SPRINT, state), [{"id": "task-a", "type": "task"}])
    conn.close()
    return state


def _node(state: StatePaths, node_id: str, graph_id: str = DEFAULT_GRAPH) -> dict:
    conn = connect(state.db)
    try:
        return nodes.get_node(Graph(conn, graph_id, state), node_id)
    finally:
        conn.close()


def _env(state: StatePaths, node_id: str, run_id: str,
         graph_id: str = DEFAULT_GRAPH) -> dict[str, str]:
    return runner_env(state, _node(state, node_id, graph_id), run_id, graph_id)


def test_pointers_for_a_child_node(state: StatePaths) -> None:
    env = _env(state, "task-a", "run-7")
    assert sorted(env) == sorted(RUNNER_ENV_VARS)
    assert env["CLAVAIN_DB"] == str(state.db.resolve())
    assert env["CLAVAIN_GRAPH"] == DEFAULT_GRAPH
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
    assert _env(state, "plan-1", "r")["CLAVAIN_PARENT_NODE_ID"] == ""


def _run_in_runner(state: StatePaths, node_id: str, script: str, cwd: Path,
                   graph_id: str = DEFAULT_GRAPH):
    # Only what a runner really gets: no test-only project pointer.
    inherited = {k: v for k, v in os.environ.items() if k != "CLAVAIN_PROJECT_DIR"}
    env = {**inherited, **_env(state, node_id, "run-42", graph_id),
           "CLAVAIN_PYTHON": sys.executable}
    return subprocess.run(["bash", "-c", script], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=60)


def test_a_real_runner_process_sees_the_pointers(state: StatePaths, tmp_path: Path) -> None:
    script = 'for v in ' + " ".join(RUNNER_ENV_VARS) + '; do printf "%s=%s\\n" "$v" "${!v}"; done'
    # Run from elsewhere: the pointers are absolute, so they hold from any directory.
    result = _run_in_runner(state, "task-a", script, cwd=tmp_path)
    seen = dict(line.split("=", 1) for line in result.stdout.splitlines())
    assert seen == _env(state, "task-a", "run-42")


def test_runner_agent_writes_its_node_through_the_pointers(state: StatePaths) -> None:
    script = ('"$CLAVAIN_BIN" kv put --key out.notes --value "from the agent" && '
              '"$CLAVAIN_BIN" kv put --run --key ctx.shared --value "for everyone"')
    result = _run_in_runner(state, "task-a", script, cwd=state.project)
    assert result.returncode == 0, result.stderr

    refused = _run_in_runner(
        state, "task-a", '"$CLAVAIN_BIN" kv put --node task-b --key out.x --value no',
        cwd=state.project)
    assert refused.returncode == 2
    assert "may not write the keys of node 'task-b'" in refused.stderr

    conn = connect(state.db)
    try:
        g = Graph(conn, DEFAULT_GRAPH, state)
        entry = kv.get(g, "task-a", "out.notes")
        assert entry["value"] == "from the agent"
        assert entry["run_id"] == "run-42"  # the writer's run, taken from CLAVAIN_RUN_ID
        assert kv.get(g, "__run__", "ctx.shared")["value"] == "for everyone"
        assert kv.ls(g, "task-b") == []
        # The sprint's task-a shares the id, not the keys.
        assert kv.ls(Graph(conn, SPRINT, state)) == []
    finally:
        conn.close()


def test_runner_of_another_graph_writes_that_graph(state: StatePaths) -> None:
    """CLAVAIN_GRAPH keeps a runner's commands on its node's graph, whatever graph the project
    would otherwise pick (here the default graph, which has a task-a too)."""
    env = _env(state, "task-a", "run-42", SPRINT)
    assert env["CLAVAIN_GRAPH"] == SPRINT and env["CLAVAIN_NODE_ID"] == "task-a"
    result = _run_in_runner(
        state, "task-a", '"$CLAVAIN_BIN" kv put --key out.notes --value "sprint work" && '
        '"$CLAVAIN_BIN" kv put --run --key ctx.shared --value "sprint-wide"',
        cwd=state.project, graph_id=SPRINT)
    assert result.returncode == 0, result.stderr
    # task-b exists only in the default graph: unknown to this runner's graph.
    missing = _run_in_runner(state, "task-a",
                             '"$CLAVAIN_BIN" kv get --node task-b --key out.x',
                             cwd=state.project, graph_id=SPRINT)
    assert missing.returncode != 0 and "unknown node 'task-b'" in missing.stderr

    conn = connect(state.db)
    try:
        sprint = Graph(conn, SPRINT, state)
        assert kv.get(sprint, "task-a", "out.notes")["value"] == "sprint work"
        assert kv.get(sprint, "__run__", "ctx.shared")["value"] == "sprint-wide"
        assert kv.ls(Graph(conn, DEFAULT_GRAPH, state)) == []
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
        entry = kv.get(Graph(conn, DEFAULT_GRAPH, state), "task-a", "out.log")
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


def test_a_runner_applies_and_renews_only_its_own_node(state: StatePaths) -> None:
    """With task-a's environment, task-b (a sibling of the same run) is out of reach: its
    result, its lease. The refusal names the real cause, and task-b's own runner is then
    recorded normally."""
    from clavain.workgraph import claims

    conn = connect(state.db)
    try:
        g = Graph(conn, DEFAULT_GRAPH, state)
        for node_id in ("task-a", "task-b"):
            claims.claim_node(g, node_id, run_id="run-42")
    finally:
        conn.close()
    ok = "echo '{\"status\":\"success\",\"summary\":\"done\"}' | "
    for script in (ok + '"$CLAVAIN_BIN" graph apply task-b --result -',
                   '"$CLAVAIN_BIN" graph heartbeat task-b',
                   ok + 'env -u CLAVAIN_FENCE "$CLAVAIN_BIN" graph apply task-b --result -',
                   '"$CLAVAIN_BIN" graph claim plan-1', '"$CLAVAIN_BIN" graph next --claim',
                   '"$CLAVAIN_BIN" verify task-b'):
        refused = _run_in_runner(state, "task-a", script, cwd=state.project)
        assert refused.returncode == 2, (script, refused.stdout)
        assert "works on node 'task-a'" in refused.stderr, script
        assert "lease ran out" not in refused.stderr
    assert _node(state, "plan-1")["status"] == "open"
    assert _node(state, "task-b")["status"] == "in_progress"
    own = _run_in_runner(state, "task-b", ok + '"$CLAVAIN_BIN" graph apply task-b --result -',
                         cwd=state.project)
    assert own.returncode == 0, own.stderr
    assert _node(state, "task-b")["status"] == "done"


def test_a_late_write_names_what_happened_to_the_claim(state: StatePaths) -> None:
    from clavain.workgraph import claims, results

    conn = connect(state.db)
    try:
        g = Graph(conn, DEFAULT_GRAPH, state)
        claim = claims.claim_node(g, "task-a", run_id="run-1")
        results.apply_result(g, "task-a", {"status": "success", "summary": "by someone"},
                             run_id="run-1")
        with pytest.raises(nodes.FenceError, match="is done already") as raised:
            results.apply_result(g, "task-a", {"status": "success", "summary": "late"},
                                 run_id="run-1", fence=claim["lock_generation"])
        assert "lease ran out" not in str(raised.value)
    finally:
        conn.close()
