"""`graph scaffold` grows with the graph, not with its square: counted in SQLite's virtual
machine steps (its progress handler), not in time. Before, finding the tasks without a verify
node scanned every node of the graph once per task (23 s at 10k tasks, still running at 240 s
for 40k)."""

from __future__ import annotations

from pathlib import Path

from clavain.paths import StatePaths
from clavain.store.db import connect
from clavain.workgraph import edits
from clavain.workgraph.graphs import DEFAULT_GRAPH, Graph
from clavain.workgraph.scaffold import PROGRESS_FROM, ensure_scaffolding


def _graph(folder: Path, tasks: int) -> Graph:
    state = StatePaths(folder / ".clavain")
    state.root.mkdir(parents=True)
    g = Graph(connect(state.db), DEFAULT_GRAPH, state)
    edits.add_nodes(g, [{"id": f"t{n:05d}", "type": "task", "verify": ["pytest -q"],
                         "dependsOn": [f"t{n - 1:05d}"] if n % 10 else []}
                        for n in range(tasks)])
    return g


def _steps_to_scaffold(folder: Path, tasks: int) -> int:
    g = _graph(folder, tasks)
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    g.conn.set_progress_handler(count, 100)
    report = ensure_scaffolding(g)
    g.conn.set_progress_handler(None, 0)
    g.conn.close()
    assert len(report["verify"]) == tasks
    return steps[0]


def test_scaffolding_costs_in_proportion_to_the_graph(tmp_path: Path) -> None:
    small = _steps_to_scaffold(tmp_path / "small", 300)
    large = _steps_to_scaffold(tmp_path / "large", 3000)
    # Ten times the tasks: about ten times the steps (a quadratic query made it ~100 times).
    assert large <= small * 15, (small, large)


def test_a_large_scaffold_says_what_it_is_doing(tmp_path: Path) -> None:
    g = _graph(tmp_path, PROGRESS_FROM)
    lines: list[str] = []
    ensure_scaffolding(g, progress=lines.append)
    assert lines[0] == f"scaffold: adding {PROGRESS_FROM:,} verify node(s)"
    assert lines[-1] == "scaffold: committed; writing the snapshot"


def test_a_small_scaffold_stays_quiet(tmp_path: Path) -> None:
    g = _graph(tmp_path, 5)
    lines: list[str] = []
    ensure_scaffolding(g, progress=lines.append)
    assert lines == []
