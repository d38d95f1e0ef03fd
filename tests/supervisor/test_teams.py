"""A team's supervisors sharing one workgraph on PostgreSQL: four project folders drain one graph
with `clavain run` (real subprocesses) and no node is claimed twice; a server restart in the
middle of a run loses nothing and applies nothing twice."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from clavain.store.graph_db import open_graph_db
from clavain.workgraph.graphs import DEFAULT_GRAPH, Graph
from clavain.workgraph.nodes import list_nodes
from tests.checks import PASSES
from tests.supervisor import kit

pytestmark = pytest.mark.slow


def _tasks(count: int, seconds: float) -> list[dict]:
    return [{"id": f"task-{i:02d}", "type": "task", "title": f"task {i}",
             "commands": [f"sleep {seconds}"], "verify": [PASSES]} for i in range(count)]


def _claims_per_node(conn) -> dict[str, int]:
    rows = conn.execute("SELECT node_id, count(*) FROM events WHERE note = 'claimed' "
                        "GROUP BY node_id").fetchall()
    return {row[0]: row[1] for row in rows}


def test_four_project_folders_drain_one_graph_without_double_claims(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAVAIN_DB", pg_url)
    machines = [kit.make_project(tmp_path / f"machine-{i}") for i in range(4)]
    kit.add(machines[0], _tasks(16, 0.2))  # one person plans; every machine sees it
    runs = [kit.start_cli(state, "run", "--runner", "shell", "--workers", "2", "--json",
                          "--run-id", f"team-{i}", CLAVAIN_DB=pg_url)
            for i, state in enumerate(machines)]
    reports = []
    for proc in runs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-2000:]
        reports.append(json.loads(out))
    assert {report["status"] for report in reports} == {"complete"}
    conn = open_graph_db(machines[0])
    try:
        every = list_nodes(Graph(conn, DEFAULT_GRAPH, machines[0]))
        claims = _claims_per_node(conn)
        runs_by_node = dict(conn.execute(
            "SELECT node_id, run_id FROM events WHERE note = 'claimed'").fetchall())
    finally:
        conn.close()
    assert len(every) == 16 * 2 + 2  # tasks, their verify nodes, integrate, final verify
    assert {node["status"] for node in every} == {"done"}
    assert claims == {node["id"]: 1 for node in every}  # each claimed exactly once
    assert len(set(runs_by_node.values())) >= 2  # the work really was shared


def test_a_server_restart_mid_run_loses_nothing_and_applies_nothing_twice(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.pgserver import Cluster, missing_reason

    if missing_reason():
        pytest.skip(missing_reason())
    cluster = Cluster().start()
    try:
        monkeypatch.setenv("CLAVAIN_DB", cluster.url())
        state = kit.make_project(tmp_path / "p")
        kit.add(state, _tasks(8, 0.5))
        restarted = threading.Event()

        def restart() -> None:
            time.sleep(1.2)
            cluster.restart()
            restarted.set()

        thread = threading.Thread(target=restart)
        thread.start()
        events: list[dict] = []
        report = kit.run(state, events, runner="shell", workers=2)
        thread.join(60)
        assert restarted.is_set()
        assert report["status"] == "complete", report.get("message")
        conn = open_graph_db(state)
        try:
            every = list_nodes(Graph(conn, DEFAULT_GRAPH, state))
            done_events = dict(conn.execute(
                "SELECT node_id, count(*) FROM events WHERE to_status = 'done' "
                "GROUP BY node_id").fetchall())
        finally:
            conn.close()
        assert {node["status"] for node in every} == {"done"}
        assert done_events == {node["id"]: 1 for node in every}  # none applied twice
        # No attempt lost to the restart: a verify cut off by it is given back, not failed.
        assert all(node["attempts"] == 0 for node in every), every
    finally:
        cluster.destroy()
