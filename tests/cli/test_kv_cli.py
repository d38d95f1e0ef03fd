import hashlib
import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import open_project_graph
from tests.sql import run_sql

# Every test here on both workgraph backends (tests/conftest.py `backend`).
pytestmark = pytest.mark.usefixtures("backend")

NODES = {"nodes": [{"id": "task-a", "type": "task"}, {"id": "task-b", "type": "task"}]}


@pytest.fixture
def graph(run_cli, project: Path) -> Path:
    result = run_cli("graph", "import", "-", input=json.dumps(NODES))
    assert result.returncode == 0, result.stderr
    return project


def _kv_rows(project: Path) -> int:
    conn = open_project_graph(project)
    try:
        return run_sql(conn, "SELECT COUNT(*) FROM kv_history").fetchone()[0]
    finally:
        conn.close()


def test_put_get_ls(graph, run_cli, cli_json) -> None:
    assert run_cli("kv", "put", "--node", "task-a", "--key", "out.summary",
                   "--value", "made the form").returncode == 0
    cli_json("kv", "put", "--node", "task-a", "--key", "ctx.note", "--value", "x")

    plain = run_cli("kv", "get", "--node", "task-a", "--key", "out.summary")
    assert plain.returncode == 0 and plain.stdout == "made the form\n"
    entry = cli_json("kv", "get", "--node", "task-a", "--key", "out.summary")
    assert entry["value"] == "made the form" and entry["node_id"] == "task-a"

    listed = cli_json("kv", "ls", "--node", "task-a", "--prefix", "out.")
    assert [e["key"] for e in listed] == ["out.summary"]
    table = run_cli("kv", "ls").stdout.splitlines()
    assert table[0].split() == ["NODE", "KEY", "VALUE", "UPDATED"]
    assert len(table) == 3 and "made the form" in table[2]


def test_run_namespace(graph, run_cli, cli_json) -> None:
    assert run_cli("kv", "put", "--run", "--key", "ctx.goal", "--value", "log in").returncode == 0
    assert cli_json("kv", "get", "--run", "--key", "ctx.goal")["node_id"] == "__run__"
    assert [e["key"] for e in cli_json("kv", "ls", "--run")] == ["ctx.goal"]


def test_value_from_stdin(graph, run_cli, cli_json) -> None:
    result = run_cli("kv", "put", "--node", "task-a", "--key", "out.log", "--value-file", "-",
                     input="line 1\nline 2\n")
    assert result.returncode == 0, result.stderr
    assert cli_json("kv", "get", "--node", "task-a", "--key", "out.log")["value"] == (
        "line 1\nline 2\n")


def test_inside_a_runner_the_node_comes_from_the_env(graph, run_cli, cli_json) -> None:
    env = {"CLAVAIN_NODE_ID": "task-a", "CLAVAIN_RUN_ID": "run-9"}
    assert run_cli("kv", "put", "--key", "out.x", "--value", "mine", env=env).returncode == 0
    entry = cli_json("kv", "get", "--key", "out.x", env=env)
    assert entry["node_id"] == "task-a" and entry["run_id"] == "run-9"


def test_cross_node_write_from_a_runner_is_refused(graph, run_cli) -> None:
    env = {"CLAVAIN_NODE_ID": "task-a"}
    result = run_cli("kv", "put", "--node", "task-b", "--key", "out.summary", "--value", "x",
                     env=env)
    assert result.returncode == 2
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert "works on node 'task-a'" in line and "may not write the keys of node 'task-b'" in line
    assert _kv_rows(graph) == 0
    # Outside a runner (no CLAVAIN_NODE_ID) a person may write any node.
    assert run_cli("kv", "put", "--node", "task-b", "--key", "k", "--value", "v").returncode == 0


def test_unknown_node_is_bad_input(graph, run_cli) -> None:
    result = run_cli("kv", "put", "--node", "nope", "--key", "k", "--value", "v", "--json")
    assert result.returncode == 2
    assert "unknown node 'nope'" in json.loads(result.stdout)["error"]
    assert _kv_rows(graph) == 0
    assert run_cli("kv", "get", "--node", "nope", "--key", "k").returncode == 2
    assert run_cli("kv", "ls", "--node", "nope").returncode == 2


def test_missing_key_exits_1(graph, run_cli) -> None:
    result = run_cli("kv", "get", "--node", "task-a", "--key", "out.none")
    assert result.returncode == 1
    assert "has no key 'out.none'" in result.stderr


def test_bad_key_and_missing_target(graph, run_cli) -> None:
    bad = run_cli("kv", "put", "--node", "task-a", "--key", "two words", "--value", "v")
    assert bad.returncode == 2 and "whitespace" in bad.stderr
    no_target = run_cli("kv", "get", "--key", "out.summary")
    assert no_target.returncode == 2 and "--node ID or --run" in no_target.stderr
    assert _kv_rows(graph) == 0


def test_no_workgraph_yet(run_cli, project: Path, backend) -> None:
    if backend:
        pytest.skip("a shared store always has its graphs")
    result = run_cli("kv", "put", "--run", "--key", "ctx.x", "--value", "v")
    assert result.returncode == 2 and "no workgraph yet" in result.stderr
    assert not (project / ".clavain" / "state.sqlite").exists()


def test_kv_without_an_action(run_cli) -> None:
    result = run_cli("kv")
    assert result.returncode == 2 and "missing action" in result.stderr


@pytest.mark.parametrize("how", ["stdin", "argument"])
def test_a_value_that_is_not_utf8_is_one_line_exit_2(graph, project: Path, how: str) -> None:
    import subprocess

    from tests.conftest import BIN, subprocess_env

    args = ["--value-file", "-"] if how == "stdin" else ["--value", "caf\udce9"]
    result = subprocess.run(
        [str(BIN / "clavain"), "kv", "put", "--node", "task-a", "--key", "out.x", *args],
        input=b"caf\xe9", capture_output=True, cwd=project, env=subprocess_env(), timeout=120)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "not UTF-8" in lines[0]
    assert _kv_rows(graph) == 0


def _snake_keys(value: object) -> set[str]:
    """Every key not in snake_case, at any depth."""
    if isinstance(value, list):
        return set().union(*map(_snake_keys, value)) if value else set()
    if not isinstance(value, dict):
        return set()
    bad = {k for k in value if k != k.lower()}
    return bad.union(*map(_snake_keys, value.values()))


def _large_value_config(project: Path) -> None:
    (project / ".clavain" / "config.json").write_text(
        json.dumps({"defaults": {"kvArtifactThresholdBytes": 10}}))


def test_json_output_uses_snake_case_keys(graph, run_cli, cli_json, project: Path) -> None:
    _large_value_config(project)
    env = {"CLAVAIN_NODE_ID": "task-a", "CLAVAIN_RUN_ID": "run-1"}
    put = cli_json("kv", "put", "--key", "out.log", "--value", "v" * 50, env=env)
    got = cli_json("kv", "get", "--key", "out.log", env=env)
    listed = cli_json("kv", "ls", env=env)
    for output in (put, got, listed):
        assert _snake_keys(output) == set()
    assert put["artifact_path"] == f"artifacts/{put['artifact_sha256']}"
    assert got["run_id"] == "run-1" and got["updated_at"] and got["value"] == "v" * 50
    assert listed[0]["node_id"] == "task-a" and listed[0]["artifact_path"] == put["artifact_path"]
    # People get the file's place in this state folder.
    plain = run_cli("kv", "put", "--node", "task-a", "--key", "out.x", "--value", "w" * 50)
    assert str(project / ".clavain" / "artifacts" / "") in plain.stdout


def test_get_refuses_a_row_pointing_at_any_file(graph, run_cli, project: Path) -> None:
    _large_value_config(project)
    assert run_cli("kv", "put", "--node", "task-a", "--key", "out.log",
                   "--value", "v" * 50).returncode == 0
    conn = open_project_graph(graph)
    run_sql(conn, "UPDATE kv_latest SET artifact_path = '/etc/passwd', artifact_sha256 = ?",
                 (hashlib.sha256(Path("/etc/passwd").read_bytes()).hexdigest(),))
    conn.close()
    result = run_cli("kv", "get", "--node", "task-a", "--key", "out.log")
    assert result.returncode == 2 and result.stdout == ""
    [line] = result.stderr.splitlines()
    assert "'/etc/passwd' is not artifacts/<sha256>" in line


def test_a_moved_project_still_reads_its_large_values(graph, run_cli, project: Path,
                                                      tmp_path: Path) -> None:
    _large_value_config(project)
    big = "large\n" * 40
    assert run_cli("kv", "put", "--node", "task-a", "--key", "out.log",
                   "--value", big).returncode == 0
    moved = tmp_path / "moved"
    shutil.move(project, moved)
    result = run_cli("kv", "get", "--node", "task-a", "--key", "out.log", cwd=moved,
                     env={"CLAVAIN_PROJECT_DIR": str(moved)})
    assert result.returncode == 0, result.stderr
    assert result.stdout == big
