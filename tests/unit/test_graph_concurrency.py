"""Many processes against one database: a claim storm with zero double claims, and a writer
killed with SIGKILL mid-apply leaving a sound database and a parseable snapshot."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from clavain.paths import StatePaths
from clavain.store import db
from clavain.workgraph import claims, edits, export, stale
from clavain.workgraph.graphs import Graph

LIB = Path(__file__).resolve().parents[2] / "lib"
WORKERS, CLAIMS = 16, 500

_CLAIMER = """
import json, os, sys, time
from pathlib import Path
from clavain.workgraph.claims import claim_next
from clavain.workgraph.graphs import Graph
from clavain.paths import StatePaths
from clavain.store import db
path, worker, claims, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
conn = db.connect(path)
g = Graph(conn, "default", StatePaths(Path(path).parent, db=path))
while not go.exists():
    time.sleep(0.005)
got = []
for _ in range(claims):
    node = claim_next(g, run_id=worker, pid=os.getpid())
    got.append(node["id"] if node else None)
print(json.dumps(got))
"""

_APPLIER = """
import os, sys
from pathlib import Path
from clavain.workgraph import claims, results
from clavain.workgraph.graphs import Graph
from clavain.paths import StatePaths
from clavain.store import db
state = StatePaths(Path(sys.argv[1]))
conn = db.connect(state.db)
g = Graph(conn, "default", state)
i = 0
while True:
    node = claims.claim_next(g, run_id="killme", pid=os.getpid())
    if node is None:
        break
    results.apply_result(g, node["id"], {
        "status": "success" if i % 3 else "fail", "summary": "s" * 3000,
        "next": {"addNodes": [{"id": f"{node['id']}-c{j}", "type": "verify",
                               "dependsOn": [node["id"]]} for j in range(3)]}},
        run_id="killme", stdout_path="/x/out.log", by_verifier=True)  # any node type
    i += 1
    if i == 5:
        print("ready", flush=True)
"""


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{LIB}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


def test_claim_storm_never_claims_a_node_twice(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    conn = db.connect(path)
    total = WORKERS * CLAIMS
    g = Graph(conn, "default", StatePaths(tmp_path))
    edits.add_nodes(g, [{"id": f"n{i:05d}", "type": "task"} for i in range(total)])
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", _CLAIMER, str(path), f"w{w}", str(CLAIMS),
                               str(go)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=_env())
             for w in range(WORKERS)]
    go.touch()
    claimed: dict[str, str] = {}
    for w, proc in enumerate(procs):
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        assert "database is locked" not in err
        ids = json.loads(out)
        assert None not in ids and len(ids) == CLAIMS
        for node_id in ids:
            assert node_id not in claimed, f"{node_id} claimed by {claimed.get(node_id)} and w{w}"
            claimed[node_id] = f"w{w}"
    assert len(claimed) == total
    rows = dict(conn.execute("SELECT id, lock_run_id FROM nodes"))
    assert rows == claimed
    events = conn.execute("SELECT count(*) FROM events WHERE note = 'claimed'").fetchone()[0]
    assert events == total
    assert claims.claim_next(g, run_id="late") is None


def test_sigkill_mid_apply_leaves_a_sound_db_and_snapshot(tmp_path: Path) -> None:
    state = StatePaths(tmp_path / ".clavain")
    conn = db.connect(state.db)
    g = Graph(conn, "default", state)
    edits.add_nodes(g, [{"id": f"t{i:04d}", "type": "task"} for i in range(2000)])
    for delay in (0.0, 0.05, 0.13):
        proc = subprocess.Popen([sys.executable, "-c", _APPLIER, str(state.root)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=_env())
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        time.sleep(delay)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        check = sqlite3.connect(state.db)
        assert check.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert check.execute("PRAGMA foreign_key_check").fetchall() == []
        # Every claim either committed with its whole result or not at all.
        orphans = check.execute(
            "SELECT count(*) FROM nodes p WHERE p.status = 'done' AND p.id NOT LIKE '%-c%' "
            "AND (SELECT count(*) FROM nodes c WHERE c.graph_id = p.graph_id "
            "AND c.parent_id = p.id) <> 3").fetchone()[0]
        assert orphans == 0
        check.close()
        snapshot = json.loads(state.workgraph_json.read_text(encoding="utf-8"))
        assert snapshot["version"] == export.SNAPSHOT_VERSION and snapshot["nodes"]
        assert {node["graph_id"] for node in snapshot["nodes"]} == {"default"}
        # The dead writer's lock is stale and released, so work can continue.
        stale.release_stale_locks(g)
        assert conn.execute("SELECT count(*) FROM nodes WHERE status = 'in_progress'"
                            ).fetchone()[0] == 0
