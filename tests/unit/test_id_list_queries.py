"""Named queries that take a list of node ids bind it as one JSON array (SQLite's json_each,
PostgreSQL's jsonb_array_elements_text): each picks exactly the listed ids on both backends, an
empty list none."""

from __future__ import annotations

import json

from clavain.loop import progress
from clavain.store import queries
from clavain.workgraph import edits, escalation, results

OK = {"status": "success", "summary": "ok"}


def _graph(g) -> None:
    edits.add_nodes(g, [{"id": "a", "type": "task"},
                        {"id": "b", "type": "task", "dependsOn": ["a"]},
                        {"id": "c", "type": "task", "dependsOn": ["a", "b"]}])


def test_the_end_of_added_work_is_what_no_other_added_node_depends_on(g) -> None:
    _graph(g)
    assert escalation._sinks(g, ["a", "b", "c"]) == ["c"]
    assert escalation._sinks(g, ["a", "b"]) == ["b"]
    assert escalation._sinks(g, ["b"]) == ["b"]


def test_the_edges_onto_a_node_from_outside_a_list(g) -> None:
    _graph(g)

    def outside(ids: list[str]) -> list[str]:
        return [row["node_id"] for row in queries.run(
            g.conn, "escalation.dependents_outside", (g.id, "a", json.dumps(ids)))]

    assert outside([]) == ["b", "c"]
    assert outside(["b"]) == ["c"]
    assert outside(["b", "c"]) == []


def test_which_listed_nodes_are_done(g) -> None:
    _graph(g)
    results.apply_result(g, "a", OK)

    def done(ids: list[str]) -> set[str]:
        return {row[0] for row in queries.run(g.conn, "progress.done_among",
                                              (g.id, json.dumps(ids)))}

    assert done(["a", "b"]) == {"a"}
    assert done(["b", "c"]) == set()
    assert done([]) == set()
    assert progress.nodes_done(g.state, g.id, ["a", "c", "zz"]) == {"a"}
