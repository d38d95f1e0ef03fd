"""A claim costs the same in a graph of 500 nodes and of 5,000: counted in SQLite's virtual
machine steps (its progress handler), not in time. Before migration 0015 the status trigger ran
on every claim and read the whole graph's edges through the primary key."""

from __future__ import annotations

from pathlib import Path

from clavain.paths import StatePaths
from clavain.store.db import connect
from clavain.workgraph import claims, edits
from clavain.workgraph.graphs import DEFAULT_GRAPH, Graph


def _steps_to_claim(folder: Path, tasks: int) -> int:
    state = StatePaths(folder / ".clavain")
    state.root.mkdir(parents=True)
    g = Graph(connect(state.db), DEFAULT_GRAPH, state)
    specs = []
    for n in range(tasks):  # each task has a verify node waiting on it, as a sprint's do
        specs += [{"id": f"t{n:05d}", "type": "task"},
                  {"id": f"v{n:05d}", "type": "verify", "dependsOn": [f"t{n:05d}"]}]
    edits.add_nodes(g, specs)
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    g.conn.set_progress_handler(count, 100)
    assert claims.claim_next(g, run_id="r") is not None
    g.conn.set_progress_handler(None, 0)
    g.conn.close()
    return steps[0]


def test_a_claim_costs_the_same_whatever_the_graphs_size(tmp_path: Path) -> None:
    small = _steps_to_claim(tmp_path / "small", 250)
    large = _steps_to_claim(tmp_path / "large", 2500)
    assert large <= small * 2 + 5, (small, large)
