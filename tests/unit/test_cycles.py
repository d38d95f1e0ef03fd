"""The two ways a dependency cycle is told (`workgraph.cycles`) against a naive model: a node is
on a cycle when it can reach itself."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given
from hypothesis import strategies as st

from clavain.workgraph.cycles import cycle_members, find_cycle

NAMES = [f"n{i}" for i in range(7)]


def _reach(edges: dict[str, list[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = list(edges.get(start, ()))
    while todo:
        node = todo.pop()
        if node not in seen and node in edges:
            seen.add(node)
            todo += edges[node]
    return seen


@st.composite
def dependency_maps(draw) -> dict[str, list[str]]:
    nodes = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=7, unique=True))
    # Dependencies may name nodes outside the map (another graph's): both ignore them.
    return {node: draw(st.lists(st.sampled_from(NAMES), max_size=3)) for node in nodes}


@given(dependency_maps())
def test_both_agree_with_a_node_reaching_itself(edges: dict[str, list[str]]) -> None:
    on_cycle = {node for node in edges if node in _reach(edges, node)}
    path = find_cycle(edges)
    members = cycle_members(edges)
    assert (path is None) == (not on_cycle) == (members == [])
    if path is not None:  # a closed path of real edges
        assert path[0] == path[-1]
        assert all(b in edges[a] for a, b in pairwise(path))
    assert {node for cycle in members for node in cycle} == on_cycle
    for cycle in members:  # each a whole cycle: every member reaches every other
        assert all(set(cycle) <= _reach(edges, node) for node in cycle)
