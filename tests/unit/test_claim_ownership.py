"""Nodes whose ownership overlaps never run at the same time: claims skip or refuse them, the
scheduler says why, three connections interleaved at random never break it, and neither do
three processes racing on one database."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from fnmatch import fnmatchcase
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
)

from clavain.paths import StatePaths
from clavain.store import db
from clavain.workgraph import claim_pick, claims, edits, results, schedule
from clavain.workgraph.graphs import Graph
from clavain.workgraph.ownership import ownership_overlaps

LIB = Path(__file__).resolve().parents[2] / "lib"


def _success(g: Graph, node_id: str, run_id: str) -> None:
    results.apply_result(g, node_id, {"status": "success", "summary": "ok"}, run_id=run_id)


def test_an_overlapping_node_waits_until_the_owner_finishes(g) -> None:
    edits.add_nodes(g, [{"id": "t-a", "type": "task", "ownership": ["src/**"]},
                        {"id": "t-b", "type": "task", "ownership": ["src/a/*.py"]},
                        {"id": "t-c", "type": "task", "ownership": ["docs/**"]}])
    assert claims.claim_next(g, run_id="r1")["id"] == "t-a"
    assert claim_pick.select_next(g) == "t-c"  # t-b waits for t-a; t-c owns other files
    assert claims.claim_node(g, "t-b", run_id="r2") is None
    assert claims.claim_next(g, run_id="r2")["id"] == "t-c"
    assert claim_pick.select_next(g) is None
    assert claims.claim_next(g, run_id="r3") is None
    idle = schedule.next_node(g, claim=True, run_id="r3")
    assert idle["node"] is None and idle["reason"] == "running"
    assert idle["waiting_on_ownership"] == ["t-b"]
    assert "t-b waits for t-a (src/a/*.py overlaps src/**)" in idle["message"]
    _success(g, "t-c", "r2")
    assert claims.claim_node(g, "t-b", run_id="r2") is None  # t-a still runs
    _success(g, "t-a", "r1")
    assert claim_pick.select_next(g) == "t-b"
    assert claims.claim_node(g, "t-b", run_id="r2")["lock_run_id"] == "r2"


def test_the_same_glob_is_named_once_and_unowned_nodes_run_beside_anything(g) -> None:
    edits.add_nodes(g, [{"id": "a", "type": "task", "ownership": ["src/**"]},
                        {"id": "b", "type": "task", "ownership": ["src/**"]},
                        {"id": "c", "type": "task"}])
    assert claims.claim_node(g, "a", run_id="r1") is not None
    assert claims.claim_next(g, run_id="r2")["id"] == "c"
    reason = schedule.idle_reason(g)
    assert reason["waiting_on_ownership"] == ["b"]
    assert reason["message"].endswith("; b waits for a (both own src/**)")
    assert set(reason) >= {"reason", "running", "message"}


def test_no_waiting_key_when_nothing_waits_on_ownership(g) -> None:
    edits.add_nodes(g, [{"id": "a", "type": "task", "ownership": ["src/**"]}])
    claims.claim_next(g, run_id="r1")
    assert "waiting_on_ownership" not in schedule.idle_reason(g)


# ---------------------------------------------------------------- three connections

# Globs from the grammar test_ownership proves exact over paths of 1-4 segments of these names.
GLOBS = ["a/**", "a/b", "a/[!a]", "b/*", "*/c", "**/ab", "c", "?/a*", "[ab]/**/b"]
NAMES = ["a", "b", "ab", "c"]
UNIVERSE = [p for n in range(1, 5) for p in itertools.product(NAMES, repeat=n)]


def _brute_matches(pattern: tuple[str, ...], path: tuple[str, ...]) -> bool:
    if not pattern:
        return not path
    if pattern[0] == "**":
        return any(_brute_matches(pattern[1:], path[k:]) for k in range(len(path) + 1))
    return (bool(path) and fnmatchcase(path[0], pattern[0])
            and _brute_matches(pattern[1:], path[1:]))


def _brute_owned(globs: list[str]) -> set[tuple[str, ...]]:
    return {path for glob in globs for path in UNIVERSE
            if any(_brute_matches(tuple(glob.split("/")), path[:k])
                   for k in range(1, len(path) + 1))}


def _running(conn) -> dict[str, tuple[str, list[str]]]:
    rows = conn.execute("SELECT id, lock_run_id, ownership_json FROM nodes "
                        "WHERE graph_id = 'default' AND status = 'in_progress'")
    return {row[0]: (row[1], json.loads(row[2])) for row in rows}


def _assert_no_overlap(running: dict[str, tuple[str, list[str]]]) -> None:
    for (a, (_, globs_a)), (b, (_, globs_b)) in itertools.combinations(running.items(), 2):
        assert not ownership_overlaps(globs_a, globs_b), (a, globs_a, b, globs_b)
        assert not _brute_owned(globs_a) & _brute_owned(globs_b), (a, globs_a, b, globs_b)


CLAIMERS = 3


class ThreeClaimers(RuleBasedStateMachine):
    """Three connections to one database file claim, finish and release in random order."""

    node_ids = Bundle("node_ids")

    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="claim-ownership-"))
        state = StatePaths(self.root / ".clavain")
        self.conns = [db.connect(state.db) for _ in range(CLAIMERS)]
        state.config.write_text('{"defaults": {"snapshotMaxLagSeconds": 0}}')
        self.graphs = [Graph(conn, "default", state) for conn in self.conns]
        self.held: dict[str, int] = {}  # node id -> the claimer holding it

    def teardown(self) -> None:
        for conn in self.conns:
            conn.close()
        shutil.rmtree(self.root, ignore_errors=True)

    @initialize(target=node_ids, ownerships=st.lists(
        st.lists(st.sampled_from(GLOBS), max_size=2), min_size=3, max_size=7))
    def add_nodes(self, ownerships: list[list[str]]):
        specs = [{"id": f"n{i}", "type": "task", "ownership": globs}
                 for i, globs in enumerate(ownerships)]
        edits.add_nodes(self.graphs[0], specs)
        return st.sampled_from([spec["id"] for spec in specs])

    def _took(self, who: int, node: dict | None, running_before: dict) -> None:
        if node is None:
            return
        assert node["id"] not in running_before, f"{node['id']} was already held"
        assert node["id"] not in self.held
        self.held[node["id"]] = who

    @rule(who=st.integers(0, CLAIMERS - 1))
    def claim_next(self, who: int) -> None:
        g = self.graphs[who]
        expected, before = claim_pick.select_next(g), _running(self.conns[who])
        node = claims.claim_next(g, run_id=f"w{who}")
        assert (node["id"] if node else None) == expected
        self._took(who, node, before)

    @rule(who=st.integers(0, CLAIMERS - 1), ids=node_ids, data=st.data())
    def claim_node(self, who: int, ids, data) -> None:
        node_id = data.draw(ids)
        before = _running(self.conns[who])
        self._took(who, claims.claim_node(self.graphs[who], node_id, run_id=f"w{who}"), before)

    def _mine(self, who: int, data) -> str | None:
        mine = sorted(node_id for node_id, holder in self.held.items() if holder == who)
        return data.draw(st.sampled_from(mine)) if mine else None

    @rule(who=st.integers(0, CLAIMERS - 1), success=st.booleans(), data=st.data())
    def finish(self, who: int, success: bool, data) -> None:
        node_id = self._mine(who, data)
        if node_id is None:
            return
        results.apply_result(self.graphs[who], node_id,
                             {"status": "success" if success else "fail", "summary": "s"},
                             run_id=f"w{who}")
        del self.held[node_id]

    @rule(who=st.integers(0, CLAIMERS - 1), data=st.data())
    def release(self, who: int, data) -> None:
        node_id = self._mine(who, data)
        if node_id is None:
            return
        with db.transaction(self.conns[who]):
            assert claims.release(self.graphs[who], node_id, f"w{who}",
                                  reason=claims.Reason.GIVEN_BACK, at="2026-01-01T00:00:00Z",
                                  why="test release")
        del self.held[node_id]

    @invariant()
    def no_two_running_nodes_overlap(self) -> None:
        running = _running(self.conns[0])
        assert {node_id: run for node_id, (run, _) in running.items()} == {
            node_id: f"w{who}" for node_id, who in self.held.items()}
        _assert_no_overlap(running)


ThreeClaimers.TestCase.settings = settings(max_examples=60, stateful_step_count=30,
                                           deadline=None)
test_three_claimers_never_run_overlapping_nodes = ThreeClaimers.TestCase


# ---------------------------------------------------------------- three processes

_WORKER = """
import json, os, random, sys, time
from pathlib import Path
from clavain.paths import StatePaths
from clavain.store import db
from clavain.workgraph import claim_pick, claims, results
from clavain.workgraph.graphs import Graph
root, worker, go = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
state = StatePaths(root)
g = Graph(db.connect(state.db), "default", state)
rng, done, deadline = random.Random(worker), [], time.monotonic() + 120
while not go.exists():
    time.sleep(0.002)
while time.monotonic() < deadline:
    node = claims.claim_next(g, run_id=worker, pid=os.getpid())
    if node is None:
        if g.conn.execute("SELECT count(*) FROM nodes WHERE status = 'open'").fetchone()[0] == 0:
            break
        time.sleep(0.002)
        continue
    start = time.monotonic()  # after the claim committed
    time.sleep(rng.uniform(0.001, 0.02))
    end = time.monotonic()  # before the result is applied
    results.apply_result(g, node["id"], {"status": "success", "summary": "ok"}, run_id=worker)
    done.append([node["id"], start, end])
print(json.dumps(done))
"""

PROCESS_GLOBS = ["src/**", "src/a/*.py", "src/b", "docs/*.md", "**/*.md", "tests/**", "src/a"]


def test_three_processes_never_run_overlapping_nodes_at_once(tmp_path: Path) -> None:
    state = StatePaths(tmp_path / ".clavain")
    conn = db.connect(state.db)
    state.config.write_text('{"defaults": {"snapshotMaxLagSeconds": 0}}')
    g = Graph(conn, "default", state)
    ownership = {f"t{i:02d}": [PROCESS_GLOBS[i % len(PROCESS_GLOBS)]] if i % 5 else []
                 for i in range(36)}
    edits.add_nodes(g, [{"id": node_id, "type": "task", "ownership": globs}
                        for node_id, globs in ownership.items()])
    go = tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": f"{LIB}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    procs = [subprocess.Popen([sys.executable, "-c", _WORKER, str(state.root), f"w{w}", str(go)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for w in range(3)]
    go.touch()
    runs = []
    for proc in procs:
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err
        runs += json.loads(out)
    assert sorted(node_id for node_id, _, _ in runs) == sorted(ownership)
    for (a, start_a, end_a), (b, start_b, end_b) in itertools.combinations(runs, 2):
        if ownership_overlaps(ownership[a], ownership[b]):
            assert end_a < start_b or end_b < start_a, (a, ownership[a], b, ownership[b])
    conn.close()
