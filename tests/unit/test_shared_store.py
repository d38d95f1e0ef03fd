"""The workgraph on a shared PostgreSQL server: fencing tokens (both backends), claims from many
processes in separate project folders, a runner killed mid-node, the server's wake-up, moving
graphs between stores, and one-line errors for a store that cannot be reached."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from clavain.errors import ClavainError
from clavain.paths import StatePaths
from clavain.store import graph_db, transfer
from clavain.store.db import connect
from clavain.store.placeholders import to_psycopg as translate
from clavain.store.postgres import PgConnection, redact
from clavain.workgraph import claim_pick, claims, edits, kv, nodes, results, stale
from clavain.workgraph.graphs import DEFAULT_GRAPH, Graph
from tests.sql import run_sql

LIB = Path(__file__).resolve().parents[2] / "lib"
OK = {"status": "success", "summary": "ok"}


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{LIB}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
            **extra}


# ---------------------------------------------------------------- the statement translation

@pytest.mark.parametrize(("sqlite", "postgresql"), [
    ("SELECT * FROM nodes WHERE id = ? AND graph_id = ?",
     "SELECT * FROM nodes WHERE id = %s AND graph_id = %s"),
    ("UPDATE nodes SET a = :now WHERE id = :id", "UPDATE nodes SET a = %(now)s WHERE id = %(id)s"),
    ("SELECT '?' || note, 'a:b' FROM t WHERE x LIKE 'a%' AND y = ?",
     "SELECT '?' || note, 'a:b' FROM t WHERE x LIKE 'a%%' AND y = %s"),
    ("SELECT '[]'::json, 'it''s ?' WHERE a = ?", "SELECT '[]'::json, 'it''s ?' WHERE a = %s"),
    ('SELECT "?" FROM t', 'SELECT "?" FROM t'),
])
def test_statements_are_translated_outside_quoted_text_only(sqlite: str, postgresql: str
                                                             ) -> None:
    assert translate(sqlite) == postgresql


def test_a_password_never_shows_in_messages() -> None:
    assert redact("postgresql://ann:s3cret@db:5432/work") == "postgresql://ann:***@db:5432/work"
    assert redact("postgresql://ann@db/work") == "postgresql://ann@db/work"


# ---------------------------------------------------------------- fencing (both backends)

def _expire_and_reclaim(g: Graph, run_id: str) -> tuple[dict, dict]:
    """Claim `a` for `run_id`, let its lease run out (given back as a crash), and claim it
    again for the same run: the second claim's generation is one more."""
    first = claims.claim_next(g, run_id=run_id, host="another-machine")
    later = datetime.now(timezone.utc) + timedelta(hours=2)
    assert stale.release_stale_locks(g, cfg={"defaults": {"lockLeaseSeconds": 60,
                                                          "retryBackoffSeconds": 0}},
                                     now=later) == ["a"]
    second = claims.claim_next(g, run_id=run_id, now=later + timedelta(minutes=1))
    assert second is not None and second["id"] == "a"
    return first, second


def test_a_late_result_from_an_expired_claim_is_refused_by_its_fence(g: Graph) -> None:
    edits.add_nodes(g, [{"id": "a", "type": "task"}])
    first, second = _expire_and_reclaim(g, "run-1")
    assert second["lock_generation"] == first["lock_generation"] + 1
    before = nodes.get_node(g, "a")
    # Same run id: only the fence tells the two claims apart.
    with pytest.raises(nodes.FenceError, match="claimed again"):
        results.apply_result(g, "a", OK, run_id="run-1", fence=first["lock_generation"])
    with pytest.raises(nodes.FenceError):
        claims.renew(g, "a", run_id="run-1", fence=first["lock_generation"])
    assert nodes.get_node(g, "a") == before  # nothing written
    done = results.apply_result(g, "a", OK, run_id="run-1", fence=second["lock_generation"])
    assert done["to"] == "done"


def test_a_fenced_release_gives_back_only_the_current_claim(g: Graph) -> None:
    edits.add_nodes(g, [{"id": "a", "type": "task"}])
    first, second = _expire_and_reclaim(g, "run-1")
    from clavain.store.db import transaction

    with transaction(g.conn):
        assert not claims.release(g, "a", "run-1", reason=claims.Reason.GIVEN_BACK,
                                  at="2026-01-01T00:00:00.000Z", why="late",
                                  fence=first["lock_generation"])
    assert nodes.get_node(g, "a")["lock_run_id"] == "run-1"
    with transaction(g.conn):
        assert claims.release(g, "a", "run-1", reason=claims.Reason.GIVEN_BACK,
                              at="2026-01-01T00:00:00.000Z", why="stopped",
                              fence=second["lock_generation"])


def test_a_result_for_a_node_no_longer_claimed_is_refused_by_its_fence(g: Graph) -> None:
    edits.add_nodes(g, [{"id": "a", "type": "task"}])
    claim = claims.claim_next(g, run_id="r")
    from clavain.store.db import transaction

    with transaction(g.conn):
        claims.release(g, "a", "r", reason=claims.Reason.GIVEN_BACK,
                       at="2026-01-01T00:00:00.000Z", why="stopped")
    # Open and unclaimed: without a fence anyone may record it; with one it is refused.
    with pytest.raises(nodes.FenceError):
        results.apply_result(g, "a", OK, run_id="r", fence=claim["lock_generation"])
    assert nodes.get_node(g, "a")["status"] == "open"


# ---------------------------------------------------------------- PostgreSQL only

# What every "machine" below starts with: its own project folder (argv 1) on the shared
# server (argv 2), and the default graph there as `g`.
_MACHINE = """
import json, os, sys, time
from pathlib import Path
from clavain.paths import StatePaths
from clavain.store.graph_db import open_graph_db
from clavain.workgraph import claim_pick, claims, results
from clavain.workgraph.graphs import Graph
state = StatePaths(Path(sys.argv[1]) / ".clavain", store_url=sys.argv[2])
g = Graph(open_graph_db(state), "default", state)
"""
# ... then waits for the start signal (argv 4) and works as run `worker` (argv 3).
_WAIT_FOR_GO = """
worker, go = sys.argv[3], Path(sys.argv[4])
while not go.exists():
    time.sleep(0.005)
"""

_CLAIMER = _MACHINE + _WAIT_FOR_GO + """
got = []
while True:
    node = claims.claim_next(g, run_id=worker, pid=os.getpid())
    if node is None:
        break
    got.append([node["id"], node["lock_generation"]])
print(json.dumps(got))
"""


def _pg_graph(tmp_path: Path, url: str, name: str = "p0") -> Graph:
    state = StatePaths(tmp_path / name / ".clavain", store_url=url)
    return Graph(graph_db.open_graph_db(state), DEFAULT_GRAPH, state)


def test_sixteen_processes_in_separate_folders_claim_every_node_once(tmp_path: Path,
                                                                    pg_url: str) -> None:
    g = _pg_graph(tmp_path, pg_url)
    total = 1200
    edits.add_nodes(g, [{"id": f"n{i:05d}", "type": "task"} for i in range(total)])
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", _CLAIMER, str(tmp_path / f"m{i}"), pg_url,
                               f"w{i}", str(go)], stdout=subprocess.PIPE, text=True, env=_env())
             for i in range(16)]
    go.write_text("go")
    claimed = []
    for proc in procs:
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0
        claimed += [node_id for node_id, _ in json.loads(out)]
    assert len(claimed) == total and len(set(claimed)) == total
    assert sum(1 for proc_claims in claimed if proc_claims) == total
    events = run_sql(g.conn, "SELECT count(*) FROM events WHERE note = 'claimed'").fetchone()[0]
    assert events == total


_RUNNER = _MACHINE + """
node = claims.claim_next(g, run_id="team-run", pid=os.getpid())
print(json.dumps({"id": node["id"], "fence": node["lock_generation"]}), flush=True)
time.sleep(600)  # the runner at work, until it is killed
"""


def test_a_killed_runners_node_is_claimed_again_after_its_lease_and_its_late_apply_refused(
        tmp_path: Path, pg_url: str) -> None:
    """Machine A's runner claims and is killed (kill -9) mid-node; machine B, a different
    project folder with its own clock-free view, re-claims the node once the lease ran out by the
    server's clock; A's result, arriving late under the same run id, is refused by its fence."""
    machine_b = _pg_graph(tmp_path, pg_url, "machine-b")
    edits.add_nodes(machine_b, [{"id": "a", "type": "task"}])
    # Machine A claims with a 1 s lease; B's own (600 s) does not matter: the lease is A's.
    (tmp_path / "machine-a" / ".clavain").mkdir(parents=True)
    (tmp_path / "machine-a" / ".clavain" / "config.json").write_text(json.dumps(
        {"defaults": {"lockLeaseSeconds": 1}}))
    (machine_b.state.root / "config.json").write_text(json.dumps(
        {"defaults": {"lockLeaseSeconds": 600, "retryBackoffSeconds": 0}}))
    runner = subprocess.Popen([sys.executable, "-c", _RUNNER, str(tmp_path / "machine-a"),
                               pg_url], stdout=subprocess.PIPE, text=True, env=_env())
    claim = json.loads(runner.stdout.readline())
    # Pretend machine A is another host: only the lease (server time) can free the node.
    run_sql(machine_b.conn, "UPDATE nodes SET lock_host = 'machine-a' WHERE id = 'a'")
    runner.kill()
    runner.wait(timeout=10)
    assert stale.release_stale_locks(machine_b) == []  # the lease has not run out yet
    time.sleep(1.3)
    assert stale.release_stale_locks(machine_b) == ["a"]
    again = claims.claim_next(machine_b, run_id="team-run")
    assert again["id"] == "a" and again["lock_generation"] == claim["fence"] + 1
    def late(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "clavain", "graph", *args, "a", "--run-id", "team-run",
             *(["--result", "-"] if args[0] == "apply" else [])],
            input=json.dumps(OK), capture_output=True, text=True, cwd=tmp_path,
            env=_env(CLAVAIN_DB=pg_url, CLAVAIN_PROJECT_DIR=str(tmp_path / "machine-a"),
                     **env))

    # The shortcuts a hurried runner would take: its own (old) fence named, or inherited from
    # its environment, a heartbeat to look alive, or the variable blanked. All refused.
    runner_env = {"CLAVAIN_NODE_ID": "a", "CLAVAIN_FENCE": str(claim["fence"])}
    for attempt in (late("apply", "--fence", str(claim["fence"])), late("apply", **runner_env),
                    late("heartbeat", **runner_env)):
        assert attempt.returncode == 2, attempt.stdout  # refused, like every other refusal
        assert "was claimed again" in attempt.stderr and "run 'team-run'" in attempt.stderr
    blanked = late("apply", CLAVAIN_NODE_ID="a", CLAVAIN_FENCE="")
    assert blanked.returncode == 2 and "is not the claim generation" in blanked.stderr
    node = nodes.get_node(machine_b, "a")
    assert node["status"] == "in_progress" and node["lock_generation"] == claim["fence"] + 1
    assert results.apply_result(machine_b, "a", OK, run_id="team-run",
                                fence=again["lock_generation"])["to"] == "done"


def test_an_idle_supervisor_is_woken_by_the_server_when_work_becomes_ready(
        tmp_path: Path, pg_url: str) -> None:
    waiter = _pg_graph(tmp_path, pg_url, "a")
    other = _pg_graph(tmp_path, pg_url, "b")
    edits.add_nodes(other, [{"id": "first", "type": "task"}])
    claim = claims.claim_next(other, run_id="r")
    waiter.conn.listen()
    woke: list[float] = []

    def wait() -> None:
        started = time.monotonic()
        if waiter.conn.wait_for_ready(DEFAULT_GRAPH, 20):
            woke.append(time.monotonic() - started)

    thread = threading.Thread(target=wait)
    thread.start()
    time.sleep(0.3)
    results.apply_result(other, "first", OK, run_id="r", fence=claim["lock_generation"])
    thread.join(30)
    assert woke and woke[0] < 10  # the notification, not the 20 s timeout


def test_graphs_move_to_the_server_and_back_unchanged(tmp_path: Path, pg_url: str) -> None:
    local = StatePaths(tmp_path / "here" / ".clavain")
    conn = connect(local.db)
    g = Graph(conn, DEFAULT_GRAPH, local)
    edits.add_nodes(g, [{"id": "p", "type": "plan"},
                        {"id": "a", "type": "task", "parent": "p", "ownership": ["src/**"]},
                        {"id": "b", "type": "task", "dependsOn": ["a"]},
                        {"id": "c", "type": "task", "dependsOn": ["a", "b"]}])
    claim = claims.claim_next(g, run_id="r")
    results.apply_result(g, claim["id"], {**OK, "summary": "planned"}, run_id="r")
    claim = claims.claim_next(g, run_id="r")
    kv.put(g, claim["id"], "out.notes", "x" * 40_000)  # an artifact, by reference
    kv.put(g, claim["id"], "out.notes", "second")  # history
    results.apply_result(g, claim["id"], {"status": "fail", "summary": "broke"}, run_id="r")
    edits.add_nodes(Graph(conn, "sprint-7", local), [{"id": "a", "type": "task"}])
    here = {gid: transfer.fingerprint(conn, gid) for gid in transfer.graph_ids(conn)}

    report = transfer.migrate(local, pg_url)
    assert {row["graph_id"]: row["action"] for row in report["graphs"]} == {
        "default": "copied", "sprint-7": "copied"}
    shared = PgConnection(pg_url)
    assert {gid: transfer.fingerprint(shared, gid) for gid in here} == here
    # Re-run: nothing to do, nothing written.
    assert {row["action"] for row in transfer.migrate(local, pg_url)["graphs"]} == {"unchanged"}
    # And back, into a fresh file: the same graphs, unmet_deps recounted to the same values.
    back = tmp_path / "back.sqlite"
    team = StatePaths(tmp_path / "there" / ".clavain", store_url=pg_url)
    transfer.migrate(team, str(back))
    returned = connect(back)
    assert {gid: transfer.fingerprint(returned, gid) for gid in here} == here
    # The copy works as a graph: the next claim is the same on both sides.
    assert claim_pick.select_next(Graph(returned, DEFAULT_GRAPH, team)) == claim_pick.select_next(g)
    shared.close()


def test_a_graph_with_other_content_is_never_overwritten_unasked(tmp_path: Path,
                                                                 pg_url: str) -> None:
    mine = StatePaths(tmp_path / "mine" / ".clavain")
    conn = connect(mine.db)
    edits.add_nodes(Graph(conn, DEFAULT_GRAPH, mine), [{"id": "a", "type": "task"}])
    theirs = _pg_graph(tmp_path, pg_url, "theirs")
    edits.add_nodes(theirs, [{"id": "z", "type": "task"}])
    before = transfer.fingerprint(theirs.conn, DEFAULT_GRAPH)
    with pytest.raises(ClavainError, match="already in the target store with other content"):
        transfer.migrate(mine, pg_url)
    assert transfer.fingerprint(theirs.conn, DEFAULT_GRAPH) == before
    replaced = transfer.migrate(mine, pg_url, replace=True)
    assert replaced["graphs"][0]["action"] == "replaced"
    assert [n["id"] for n in nodes.list_nodes(theirs)] == ["a"]


def test_an_interrupted_copy_leaves_the_target_as_it_was(tmp_path: Path, pg_url: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    mine = StatePaths(tmp_path / "mine" / ".clavain")
    conn = connect(mine.db)
    g = Graph(conn, DEFAULT_GRAPH, mine)
    edits.add_nodes(g, [{"id": f"n{i}", "type": "task"} for i in range(20)])
    real = transfer._insert
    calls = []

    def dies_halfway(source, target, graph_id):
        real(source, target, graph_id)
        calls.append(graph_id)
        raise KeyboardInterrupt  # Ctrl-C after the rows went in, before the commit

    monkeypatch.setattr(transfer, "_insert", dies_halfway)
    with pytest.raises(KeyboardInterrupt):
        transfer.migrate(mine, pg_url)
    monkeypatch.setattr(transfer, "_insert", real)
    shared = PgConnection(pg_url)
    assert run_sql(shared, "SELECT count(*) FROM nodes").fetchone()[0] == 0
    assert transfer.migrate(mine, pg_url)["graphs"][0]["action"] == "copied"
    assert run_sql(shared, "SELECT count(*) FROM nodes").fetchone()[0] == 20
    shared.close()


@pytest.mark.parametrize(("text", "transient", "fix"), [
    ("FATAL:  the database system is shutting down", True, "restarting"),
    ("FATAL:  the database system is starting up", True, "restarting"),
    ("connection refused", True, "start the server"),
    ('FATAL:  database "nowhere" does not exist', False, "create it"),
    ('FATAL:  password authentication failed for user "x"', False, "password"),
])
def test_a_restarting_server_is_waited_for_and_never_blamed_on_the_url(
        text: str, transient: bool, fix: str) -> None:
    from clavain.store.postgres import connect_error_transient, describe_connect_error

    error = Exception(text)
    assert connect_error_transient(error) is transient
    line = describe_connect_error("postgresql://a:secret@h/db", error)
    assert fix in line and "secret" not in line
    if transient and "refused" not in text:
        assert "check the URL" not in line


def test_a_store_that_cannot_be_reached_is_one_line_with_the_fix(tmp_path: Path,
                                                                 pg_cluster) -> None:
    from clavain import doctor
    from tests.pgserver import free_port

    closed = f"postgresql://someone:pw@127.0.0.1:{free_port()}/nowhere"
    state = StatePaths(tmp_path / ".clavain", store_url=closed)
    row = doctor._store(state)
    assert row["status"] == "fail"
    assert "start the server or fix host and port" in row["detail"]
    assert "pw" not in row["detail"] and "\n" not in row["detail"]
    missing_db = pg_cluster.url("no_such_database")
    row = doctor._store(StatePaths(tmp_path / ".clavain", store_url=missing_db))
    assert row["status"] == "fail" and "create it" in row["detail"]
    fresh = pg_cluster.new_schema_url()
    row = doctor._store(StatePaths(tmp_path / ".clavain", store_url=fresh))
    latest = graph_db.pg_latest_version()
    assert row["status"] == "ok" and f"schema version 0 of {latest}" in row["detail"]
    assert "`clavain db migrate` creates the schema" in row["detail"]


def test_a_connection_lost_inside_a_transaction_applies_none_of_it(tmp_path: Path,
                                                                   pg_url: str) -> None:
    """The server drops the connection between two statements of one transaction: the next
    statement fails (never runs on its own on a new connection), nothing of the transaction is
    applied, and running the whole transaction again works."""
    from clavain.store.db import transaction

    g = _pg_graph(tmp_path, pg_url)
    edits.add_nodes(g, [{"id": "a", "type": "task"}, {"id": "b", "type": "task"}])
    killer = PgConnection(pg_url)
    pid = run_sql(g.conn, "SELECT pg_backend_pid()").fetchone()[0]
    attempts = []

    def both_titles() -> None:
        attempts.append(1)
        with transaction(g.conn):
            run_sql(g.conn, "UPDATE nodes SET title = 'one' WHERE id = 'a'")
            if len(attempts) == 1:
                run_sql(killer, "SELECT pg_terminate_backend(?)", (pid,))
            run_sql(g.conn, "UPDATE nodes SET title = 'two' WHERE id = 'b'")

    with pytest.raises(Exception) as lost:
        both_titles()
    assert g.conn.lost(lost.value) and not g.conn.in_transaction
    titles = dict(run_sql(killer, "SELECT id, title FROM nodes").fetchall())
    assert titles == {"a": "", "b": ""}  # neither half went in
    graph_db.reconnecting(g.conn, both_titles)
    assert dict(run_sql(killer, "SELECT id, title FROM nodes").fetchall()) == {"a": "one",
                                                                             "b": "two"}
    killer.close()


def test_a_claim_skips_a_node_another_claimer_is_taking_instead_of_waiting(
        tmp_path: Path, pg_url: str) -> None:
    """Holding the ownership lock, a claimer never waits on a row another claimer holds (that
    wait closes a deadlock with a claimer waiting for the ownership lock): it takes the next
    clear node, or nothing."""
    g = _pg_graph(tmp_path, pg_url)
    edits.add_nodes(g, [{"id": "r", "type": "task", "ownership": ["src/a/**"]},
                        {"id": "y", "type": "task", "ownership": ["src/a/x.py"]},
                        {"id": "z", "type": "task", "ownership": ["src/b/**"]},
                        {"id": "zz", "type": "task", "ownership": ["src/c/**"]}])
    assert claims.claim_node(g, "r", run_id="first")["id"] == "r"
    other = PgConnection(pg_url)
    run_sql(other, "BEGIN")
    run_sql(other, "SELECT id FROM nodes WHERE id = 'z' FOR UPDATE")  # another claimer's row
    got: list = []
    thread = threading.Thread(target=lambda: got.append(claims.claim_next(g, run_id="second")))
    thread.start()
    thread.join(10)
    assert not thread.is_alive(), "the claim waited on a row another claimer holds"
    assert got[0]["id"] == "zz"  # y overlaps r, z is being taken: the next clear one
    run_sql(other, "ROLLBACK")
    other.close()


def test_a_mistyped_store_url_is_refused_not_made_into_a_file(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "clavain", "graph", "add", "--id", "a", "--type", "task"],
        capture_output=True, text=True, cwd=project,
        env=_env(CLAVAIN_DB="postgresq://me:secret@127.0.0.1:5432/work",
                 CLAVAIN_PROJECT_DIR=str(project)))
    assert done.returncode == 2
    assert "looks like a URL but not a PostgreSQL one" in done.stderr
    assert "secret" not in done.stderr
    assert not any(path.name.startswith("postgresq") for path in project.rglob("*"))


def test_an_empty_graph_never_blocks_joining_a_shared_store(tmp_path: Path,
                                                            pg_url: str) -> None:
    """A second project (its default graph empty) copies up what it has; the team's graph of
    the same name is left alone."""
    first = StatePaths(tmp_path / "one" / ".clavain")
    conn = connect(first.db)
    edits.add_nodes(Graph(conn, DEFAULT_GRAPH, first), [{"id": "a", "type": "task"}])
    transfer.migrate(first, pg_url)
    second = StatePaths(tmp_path / "two" / ".clavain")
    connect(second.db).close()
    report = transfer.migrate(second, pg_url)
    assert [row["action"] for row in report["graphs"]] == ["skipped"]
    team = _pg_graph(tmp_path, pg_url, "team")
    assert [n["id"] for n in nodes.list_nodes(team)] == ["a"]


def test_a_fenced_out_runner_writes_no_kv(g: Graph) -> None:
    edits.add_nodes(g, [{"id": "a", "type": "task"}])
    first, second = _expire_and_reclaim(g, "run-1")
    with pytest.raises(nodes.FenceError):
        kv.put(g, "a", "out.notes", "late", writer_node="a", fence=first["lock_generation"])
    assert kv.get(g, "a", "out.notes") is None
    kv.put(g, "a", "out.notes", "current", writer_node="a", fence=second["lock_generation"])
    assert kv.get(g, "a", "out.notes")["value"] == "current"


_OWNER = _MACHINE + _WAIT_FOR_GO + """
most, done, idle = 0, 0, 0
while idle < 200:
    node = claims.claim_next(g, run_id=worker)
    if node is None:
        idle += 1
        time.sleep(0.01)
        continue
    idle = 0
    together = g.conn.execute("SELECT count(*) FROM nodes WHERE status = 'in_progress' "
                              "AND ownership_json = %s", (json.dumps(node["ownership"]),)
                              ).fetchone()[0]
    most = max(most, together)
    time.sleep(0.005)
    results.apply_result(g, node["id"], {"status": "success", "summary": "ok"}, run_id=worker,
                         fence=node["lock_generation"])
    done += 1
print(json.dumps({"most": most, "done": done}))
"""


def test_ownership_holds_across_machines(tmp_path: Path, pg_url: str) -> None:
    """Eight processes in separate folders: two nodes owning one glob never run at once."""
    g = _pg_graph(tmp_path, pg_url)
    edits.add_nodes(g, [{"id": f"n{i:03d}", "type": "task", "ownership": [f"src/m{i % 4}/**"]}
                        for i in range(80)])
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", _OWNER, str(tmp_path / f"m{i}"), pg_url,
                               f"w{i}", str(go)], stdout=subprocess.PIPE, text=True, env=_env())
             for i in range(8)]
    go.write_text("go")
    reports = []
    for proc in procs:
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0
        reports.append(json.loads(out))
    assert sum(r["done"] for r in reports) == 80
    assert max(r["most"] for r in reports) == 1
    assert sum(1 for r in reports if r["done"]) >= 2
