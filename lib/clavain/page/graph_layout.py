"""Where the workgraph picture puts things: the dependency DAG read from snapshot nodes (a damaged
file's cycles broken, unknown deps dropped), layers, the critical path, the order of boxes in a
row, and which nodes a large graph folds into groups. `graph_svg` draws what this decides.

Written here rather than taken from a layout library: Graphviz needs its `dot` binary (not on a
user's machine, and a subprocess per page); networkx has no layered layout of its own (it calls
out to Graphviz); grandalf is pure Python but unmaintained since 2023 and slow at thousands of
nodes. A longest-path layering with a few barycenter sweeps is ~100 lines and O(V+E) per sweep.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from clavain.workgraph.status_colors import STATUS_COLORS
from clavain.workgraph.statuses import NodeStatus

# Who needs a person's eye first when a large graph is folded (then the critical path).
ATTENTION = (NodeStatus.FAILED, NodeStatus.NEEDS_HUMAN, NodeStatus.IN_PROGRESS)
# Statuses outside STATUS_COLORS (a damaged file) fold together under this one.
OTHER_STATUS = "unknown"
# The fewest boxes a folded picture may draw: one group per status in a single row fits.
MIN_BOXES = len(STATUS_COLORS) + 1


@dataclass
class Dag:
    """Nodes by id (first occurrence of an id wins), their dependencies with cycles broken."""

    nodes: dict[str, Mapping[str, Any]]
    order: list[str]  # topological: every node after all its dependencies
    deps: dict[str, list[str]]  # kept dependencies, sorted
    dependents: dict[str, list[str]]
    layer: dict[str, int]  # longest chain of dependencies below the node, by count
    broken: list[tuple[str, str]] = field(default_factory=list)  # (dep, node) dropped for cycles

    @property
    def layers(self) -> int:
        return 1 + max(self.layer.values()) if self.layer else 0


def read_dag(nodes: Iterable[Mapping[str, Any]]) -> Dag:
    """The DAG of `nodes`. Deps naming no listed node are ignored. The store refuses cycles, but a
    damaged snapshot may hold one: a depth-first walk in id order drops each edge that closes a
    cycle (recorded in `broken`), so the result is the same for the same file."""
    by_id: dict[str, Mapping[str, Any]] = {}
    for node in nodes:
        if isinstance(node, Mapping) and node.get("id") is not None:
            by_id.setdefault(str(node["id"]), node)
    wanted: dict[str, list[str]] = {}
    for node_id, node in by_id.items():
        listed = node.get("depends_on")
        listed = listed if isinstance(listed, (list, tuple)) else ()
        wanted[node_id] = sorted({str(d) for d in listed if d is not None and str(d) in by_id})
    state: dict[str, int] = dict.fromkeys(by_id, 0)  # 0 unseen, 1 on the walk's stack, 2 done
    deps: dict[str, list[str]] = {node_id: [] for node_id in by_id}
    order: list[str] = []
    broken: list[tuple[str, str]] = []
    for root in sorted(by_id):
        if state[root]:
            continue
        state[root] = 1
        stack = [(root, iter(wanted[root]))]
        while stack:
            node_id, pending = stack[-1]
            for dep in pending:
                seen = state[dep]
                if seen == 1:
                    broken.append((dep, node_id))
                    continue
                deps[node_id].append(dep)
                if seen == 0:
                    state[dep] = 1
                    stack.append((dep, iter(wanted[dep])))
                    break
            else:
                stack.pop()
                state[node_id] = 2
                order.append(node_id)
    dependents: dict[str, list[str]] = {node_id: [] for node_id in by_id}
    layer: dict[str, int] = {}
    for node_id in order:
        for dep in deps[node_id]:
            dependents[dep].append(node_id)
        layer[node_id] = 1 + max((layer[d] for d in deps[node_id]), default=-1)
    return Dag(by_id, order, deps, dependents, layer, broken)


def _weight(weights: Mapping[str, float] | None, node_id: str) -> float:
    """A measured weight, or 1.0 when none was measured or it is not a finite number >= 0."""
    value = weights.get(node_id, 1.0) if weights else 1.0
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return float(value) if ok and math.isfinite(value) and value >= 0 else 1.0


def heaviest_chain(dag: Dag, weights: Mapping[str, float] | None = None) -> list[str]:
    """The chain of dependencies with the largest total weight, source first. Ties go to the
    longer chain by count (so it always ends at a sink, even through zero weights), then to the
    smaller id."""
    best: dict[str, tuple[float, int]] = {}
    came_from: dict[str, str | None] = {}
    for node_id in dag.order:
        pick, key = None, (0.0, 0)
        for dep in dag.deps[node_id]:  # sorted: a strict > keeps the smallest id on a tie
            if pick is None or best[dep] > key:
                pick, key = dep, best[dep]
        best[node_id] = (key[0] + _weight(weights, node_id), key[1] + 1)
        came_from[node_id] = pick
    end = None
    for node_id in sorted(best):
        if end is None or best[node_id] > best[end]:
            end = node_id
    chain: list[str] = []
    while end is not None:
        chain.append(end)
        end = came_from[end]
    return chain[::-1]


def order_rows(rows: list[list[str]], ups: Mapping[str, Iterable[str]],
               downs: Mapping[str, Iterable[str]], tier: Mapping[str, int],
               sweeps: int = 4, *,
               spacing: Callable[[str, str], float] | None = None) -> list[list[str]]:
    """Reorder each row by the mean position of its neighbours, alternately those above (down
    sweep) and below (up sweep), to cut crossings. Positions are centred per row so rows of
    different widths line up; `spacing(left, right)` is the distance between two neighbours'
    centres (1 when not given), so a mean is taken in the units the picture is drawn in.
    Stable: equal means keep the previous order. `tier` (a box's first layer) comes first: a
    row holding several layers (a folded band) reads in layer order, left to right. A key
    without a tier is a virtual point (where a long edge passes the row): it has no layer of
    its own, so it goes wherever its mean puts it between the boxes."""
    pos: dict[str, float] = {}

    def place(row: list[str]) -> None:
        at = [0.0]
        for left, right in itertools.pairwise(row):
            at.append(at[-1] + (spacing(left, right) if spacing else 1.0))
        middle = at[-1] / 2
        for key, x in zip(row, at, strict=True):
            pos[key] = x - middle

    def reorder(row: list[str], neighbours: Mapping[str, Iterable[str]]) -> list[str]:
        centre: dict[str, float] = {}
        for key in row:
            around = [pos[n] for n in neighbours.get(key, ()) if n in pos]
            centre[key] = sum(around) / len(around) if around else pos[key]
        boxes = sorted((k for k in row if k in tier), key=lambda k: (tier[k], centre[k], pos[k]))
        points = sorted((k for k in row if k not in tier), key=lambda k: (centre[k], pos[k]))
        row = _merge(boxes, points, lambda k: (centre[k], pos[k]))
        place(row)
        return row

    rows = [sorted((k for k in row if k in tier), key=tier.__getitem__)
            + [k for k in row if k not in tier] for row in rows]
    for row in rows:
        place(row)
    for _ in range(sweeps):
        for index in range(1, len(rows)):
            rows[index] = reorder(rows[index], ups)
        for index in range(len(rows) - 2, -1, -1):
            rows[index] = reorder(rows[index], downs)
    return rows


def _merge(first: list[str], second: list[str],
           key: Callable[[str], tuple[float, float]]) -> list[str]:
    """Both lists, each kept in its order, interleaved by `key` (the merge step of a merge sort:
    when both are sorted by `key`, the result is too)."""
    out: list[str] = []
    i = j = 0
    while i < len(first) and j < len(second):
        if key(second[j]) < key(first[i]):
            out.append(second[j])
            j += 1
        else:
            out.append(first[i])
            i += 1
    return out + first[i:] + second[j:]


@dataclass
class Folding:
    """A folded picture: nodes shown one by one, the rest in groups of (band, status). A band is
    `band` consecutive layers (1 unless the graph is too deep for one row per layer)."""

    shown: list[str]
    band: int
    groups: dict[tuple[int, str], list[str]]  # (band index, status) -> member ids, in order


def group_status(status: object) -> str:
    return status if isinstance(status, str) and status in STATUS_COLORS else OTHER_STATUS


def needs_folding(dag: Dag, fold_above: int, row_cap: int | None = None) -> bool:
    """Whether the picture folds: more nodes than `fold_above`, or a layer with more nodes
    than `row_cap` (the boxes a row may hold and still fit the picture's width in a few lines)."""
    if len(dag.order) > fold_above:
        return True
    if row_cap is None:
        return False
    per_layer: dict[int, int] = {}
    for node_id in dag.order:
        per_layer[dag.layer[node_id]] = per_layer.get(dag.layer[node_id], 0) + 1
    return max(per_layer.values(), default=0) > row_cap


def fold(dag: Dag, chain: list[str], fold_above: int, row_cap: int | None = None) -> Folding:
    """Which nodes stay individual and how the rest group, within max(fold_above, MIN_BOXES)
    boxes. Up to two thirds of the boxes show nodes: those needing a person (ATTENTION order),
    and the critical path from its source (at least a third of those boxes when it is that long,
    so a graph full of failures still shows where the time goes); the rest fold per (layer,
    status). When that makes too many groups, a row holds several layers (band 2, 4, 8, …);
    when even one row of groups does not fit beside the shown nodes, fewer nodes are shown.
    Then groups open again, the smallest first, while their row keeps at most `row_cap` boxes
    and the picture the budget: a row narrow enough is drawn node by node, a wide one keeps
    its few open nodes single beside the group of its many done ones. A group of one is never
    drawn: it opens whatever the cap (it takes no more room as a node)."""
    budget = max(fold_above, MIN_BOXES)
    status = {node_id: dag.nodes[node_id].get("status") for node_id in dag.order}
    attention: list[str] = []
    for needed in ATTENTION:
        attention += sorted((n for n in dag.order if status[n] == needed),
                            key=lambda n: (dag.layer[n], n))
    on_path = set(chain)
    elsewhere = [n for n in attention if n not in on_path]

    def pick(room: int) -> list[str]:
        path = chain[: min(len(chain), max(room // 3, room - len(elsewhere)))]
        taken = set(path)
        return [n for n in attention if n not in taken][: room - len(path)] + path

    room = budget * 2 // 3
    while True:
        shown = pick(room)
        kept = set(shown)
        rest = [n for n in dag.order if n not in kept]
        band = 1
        while True:
            count = len({(dag.layer[n] // band, group_status(status[n])) for n in rest})
            if len(shown) + count <= budget or band >= dag.layers:
                break
            band *= 2
        if len(shown) + count <= budget or not shown:
            break
        room = len(shown) // 2
    groups: dict[tuple[int, str], list[str]] = {}
    for node_id in rest:
        key = (dag.layer[node_id] // band, group_status(status[node_id]))
        groups.setdefault(key, []).append(node_id)
    _open_groups(dag, shown, band, groups, budget, row_cap)
    return Folding(shown, band, groups)


def _open_groups(dag: Dag, shown: list[str], band: int, groups: dict[tuple[int, str], list[str]],
                 budget: int, row_cap: int | None) -> None:
    """Turn groups back into nodes shown one by one (in place), smallest first, while the row
    stays within `row_cap` boxes and the picture within `budget`; a group of one always."""
    boxes = len(shown) + len(groups)
    in_row: dict[int, int] = {}
    for node_id in shown:
        in_row[dag.layer[node_id] // band] = in_row.get(dag.layer[node_id] // band, 0) + 1
    for row, _ in groups:
        in_row[row] = in_row.get(row, 0) + 1
    statuses = [*STATUS_COLORS, OTHER_STATUS]
    for key in sorted(groups, key=lambda k: (len(groups[k]), k[0], statuses.index(k[1]))):
        more = len(groups[key]) - 1
        fits = row_cap is None or in_row[key[0]] + more <= row_cap
        if more and not (fits and boxes + more <= budget):
            continue
        shown += groups.pop(key)
        boxes += more
        in_row[key[0]] += more
