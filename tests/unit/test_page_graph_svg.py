"""The workgraph picture of the HTML report (`clavain.page.graph_svg`): the SVG is parsed as XML
and checked against the nodes it was drawn from; the critical path and the folding are checked
against naive models (every chain enumerated, layers by plain recursion); the edges' paths are
read back from their SVG path data and sampled against every box drawn."""

from __future__ import annotations

import bisect
import itertools
import math
import random
import re
import time
import xml.etree.ElementTree as ET
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clavain.page import graph_place
from clavain.page.graph_layout import MIN_BOXES, order_rows
from clavain.page.graph_place import LANES_PER_BOX, MARGIN, WRAP, W, boxes_per_line
from clavain.page.graph_svg import MAX_WIDTH, critical_path, draw
from clavain.workgraph.status_colors import colors

NS = "{http://www.w3.org/2000/svg}"


def _node(node_id: str, deps: list[str], *, status: str = "done", kind: str = "task",
          title: str = "") -> dict:
    return {"id": node_id, "title": title, "type": kind, "status": status, "depends_on": deps,
            "parent_id": None}


# The nodes of a real snapshot (`clavain run` on the greeter demo), the fields the picture reads.
DEMO = [
    _node("final-verify", ["integrate"], kind="final_verify",
          title="Final verification of the whole goal"),
    _node("integrate", ["verify-task-cli", "verify-task-farewell", "verify-task-greet"],
          kind="integrate", title="Integrate all verified tasks"),
    _node("task-cli", ["task-farewell", "task-greet"],
          title="python3 -m greeter.cli NAME greets and leaves"),
    _node("task-farewell", [], title="farewell(name) says goodbye"),
    _node("task-greet", [], title="greet(name) says hello"),
    _node("verify-task-cli", ["task-cli"], kind="verify",
          title="Verify python3 -m greeter.cli NAME greets and leaves"),
    _node("verify-task-farewell", ["task-farewell"], kind="verify",
          title="Verify farewell(name) says goodbye"),
    _node("verify-task-greet", ["task-greet"], kind="verify",
          title="Verify greet(name) says hello"),
]


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)  # raises on anything that is not well-formed XML


def node_groups(root: ET.Element) -> dict[str, ET.Element]:
    found: dict[str, ET.Element] = {}
    for g in root.iter(NS + "g"):
        if "node" in g.get("class", "").split():
            node_id = g.get("data-node-id")
            assert node_id not in found, f"{node_id} drawn twice"
            found[node_id] = g
    return found


def group_boxes(root: ET.Element) -> list[ET.Element]:
    return [g for g in root.iter(NS + "g") if "group" in g.get("class", "").split()]


def edges(root: ET.Element) -> list[ET.Element]:
    return [p for p in root.iter(NS + "path") if "edge" in p.get("class", "").split()]


def is_chain(chain: list[str], nodes: list[dict]) -> bool:
    deps = {n["id"]: set(n["depends_on"]) for n in nodes}
    return all(a in deps[b] for a, b in itertools.pairwise(chain))


def test_the_demo_graph_is_drawn_node_by_node_with_one_edge_per_dependency() -> None:
    picture = draw(DEMO)
    root = parse(picture.svg)
    drawn = node_groups(root)
    assert set(drawn) == {n["id"] for n in DEMO}
    layers = {node_id: int(g.get("data-layer")) for node_id, g in drawn.items()}
    assert layers == {"task-farewell": 0, "task-greet": 0, "task-cli": 1, "verify-task-farewell": 1,
                      "verify-task-greet": 1, "verify-task-cli": 2, "integrate": 3,
                      "final-verify": 4}
    pairs = sorted((e.get("data-from"), e.get("data-to")) for e in edges(root))
    assert pairs == sorted((d, n["id"]) for n in DEMO for d in n["depends_on"])
    assert all(layers[a] < layers[b] for a, b in pairs)
    for node in DEMO:  # status colours from their one owner, type and status on the box
        g = drawn[node["id"]]
        assert (g.get("data-type"), g.get("data-status")) == (node["type"], node["status"])
        assert f"type-{node['type']}" in g.get("class") and "status-done" in g.get("class")
        shape = next(child for child in g if child.tag != NS + "title")
        assert (shape.get("fill"), shape.get("stroke")) == colors(node["status"])
        tooltip = g.find(NS + "title").text
        assert node["id"] in tooltip and node["title"] in tooltip
    # The tie between the two sources goes to the smaller id; the chain ends at the sink.
    assert picture.critical_path == ["task-farewell", "task-cli", "verify-task-cli", "integrate",
                                     "final-verify"]
    assert is_chain(picture.critical_path, DEMO)
    assert not any(picture.critical_path[-1] in n["depends_on"] for n in DEMO)
    critical = {g.get("data-node-id") for g in drawn.values() if "critical" in g.get("class")}
    assert critical == set(picture.critical_path)
    critical_edges = {(e.get("data-from"), e.get("data-to")) for e in edges(root)
                      if "critical" in e.get("class")}
    assert critical_edges == set(itertools.pairwise(picture.critical_path))
    assert (picture.folded, picture.shown_nodes, picture.groups, picture.layers) == (
        False, 8, 0, 5)
    # Self-contained: no script, no link to anywhere, arrowheads defined inside.
    assert not list(root.iter(NS + "script"))
    assert "href" not in picture.svg and "http" not in picture.svg.replace(
        'xmlns="http://www.w3.org/2000/svg"', "")
    assert all(e.get("marker-end").startswith("url(#workgraph-") for e in edges(root))
    assert len(list(root.iter(NS + "marker"))) == 2
    assert float(root.get("width")) > 0 and root.get("viewBox").startswith("0 0 ")


def test_each_type_has_its_own_outline() -> None:
    kinds = ["plan", "epic", "task", "verify", "integrate", "final_verify"]
    root = parse(draw([_node(kind, [], kind=kind) for kind in kinds]).svg)
    outlines = set()
    for g in node_groups(root).values():
        shapes = [c for c in g if c.tag not in (NS + "title", NS + "text")]
        outlines.add(tuple((c.tag, c.get("rx"), c.get("stroke-dasharray"),
                            len(c.get("points", "").split())) for c in shapes))
    assert len(outlines) == len(kinds)


def test_weights_pick_the_heavier_chain_not_the_longer_one() -> None:
    nodes = [_node("a", []), _node("b", ["a"]), _node("c", ["b"]), _node("d", ["c"]),
             _node("x", []), _node("y", ["x", "ghost"])]
    assert critical_path(nodes) == ["a", "b", "c", "d"]
    assert critical_path(nodes, {"x": 10.0}) == ["x", "y"]
    assert critical_path(nodes, {"x": 2.5, "a": 0.1}) == ["x", "y"]  # 3.5 against 3.1
    assert critical_path(nodes, {"x": 2.0, "a": 0.1}) == ["a", "b", "c", "d"]  # 3.0 against 3.1
    picture = draw(nodes, weights={"x": 10.0})
    root = parse(picture.svg)
    assert picture.critical_path == ["x", "y"]
    assert "ghost" not in node_groups(root)  # an unknown dep is ignored, not drawn
    assert len(edges(root)) == 4
    # Unmeasured or nonsense weights count as 1.0.
    assert critical_path(nodes, {"x": float("inf"), "a": -3.0}) == ["a", "b", "c", "d"]
    assert critical_path(nodes, {"x": float("nan"), "b": "9"}) == ["a", "b", "c", "d"]


def test_a_cycle_in_a_damaged_file_is_broken_the_same_way_whatever_the_order() -> None:
    nodes = [_node("a", ["c"]), _node("b", ["a"]), _node("c", ["b"]), _node("d", ["c"]),
             _node("e", ["e"])]
    first = draw(nodes)
    root = parse(first.svg)
    assert set(node_groups(root)) == {"a", "b", "c", "d", "e"}
    # The walk starts at "a" (ids in order) and meets it again through c and b: the edge that
    # closes the cycle, a -> b, is dropped from the layout and drawn dashed; e's loop on itself
    # is dropped.
    assert first.critical_path == ["b", "c", "a"]
    assert is_chain(first.critical_path, nodes)
    cycle = [e for e in edges(root) if "cycle" in e.get("class")]
    assert [(e.get("data-from"), e.get("data-to")) for e in cycle] == [("a", "b")]
    plain = {(e.get("data-from"), e.get("data-to")) for e in edges(root)} - {("a", "b")}
    layers = {k: int(g.get("data-layer")) for k, g in node_groups(root).items()}
    assert plain == {("c", "a"), ("b", "c"), ("c", "d")}
    assert all(layers[a] < layers[b] for a, b in plain)
    for seed in range(5):
        shuffled = nodes[:]
        random.Random(seed).shuffle(shuffled)
        assert draw(shuffled).svg == first.svg


def test_hostile_text_stays_text() -> None:
    evil = "</svg><script>alert(1)</script>"
    title = """He said "x" & 'y' <b>"""
    nodes = [_node(evil, [], title=title, kind="task\"><script>"),
             _node("a&b", [evil], status='done" onload="alert(2)'),
             _node("bell\x07\x00", ["a&b"])]
    picture = draw(nodes)
    root = parse(picture.svg)
    assert not [e for e in root.iter() if e.tag.endswith("script")]
    assert all(not name.startswith("on") for e in root.iter() for name in e.attrib)
    drawn = node_groups(root)
    assert drawn[evil].get("data-type") == "task\"><script>"
    assert title in drawn[evil].find(NS + "title").text
    assert drawn["a&b"].get("data-status") == 'done" onload="alert(2)'
    assert "bell\ufffd\ufffd" in drawn  # characters XML forbids are replaced, not emitted
    assert {(e.get("data-from"), e.get("data-to")) for e in edges(root)} == {
        (evil, "a&b"), ("a&b", "bell\ufffd\ufffd")}
    with pytest.raises(ValueError, match="svg_id"):
        draw(nodes, svg_id='x"><script>')


def sprint_nodes(chains: int, length: int, failed: set[str], seed: int = 3) -> list[dict]:
    """A sprint's shape: a plan, chains of tasks with a verify each (some tasks also after
    another chain's), one integrate after every verify (waiting for a person), then a
    final_verify, and a docs task nobody verifies."""
    rng = random.Random(seed)
    nodes = [_node("plan", [], kind="plan")]
    verifies = []
    for chain in range(chains):
        for step in range(length):
            task = f"t{chain}-{step}"
            deps = ["plan"] if step == 0 else [f"t{chain}-{step - 1}"]
            if chain and step and rng.random() < 0.3:
                deps.append(f"t{rng.randrange(chain)}-{rng.randrange(step)}")
            status = "failed" if task in failed else "done" if step < length // 2 else "open"
            nodes.append(_node(task, deps, status=status))
            nodes.append(_node("v-" + task, [task], kind="verify",
                               status="done" if status == "done" else "open"))
            verifies.append("v-" + task)
    nodes.append(_node("integrate", verifies, kind="integrate", status="needs_human"))
    nodes.append(_node("final", ["integrate"], kind="final_verify", status="open"))
    nodes.append(_node("docs", ["plan"], status="done"))
    return nodes


def naive_layers(nodes: list[dict]) -> dict[str, int]:
    """Longest chain below each node, by relaxing every node until nothing changes (no
    recursion: a 10,000-node chain)."""
    layer = {n["id"]: 0 for n in nodes}
    changed = True
    while changed:
        changed = False
        for node in nodes:
            best = 1 + max((layer[d] for d in node["depends_on"] if d in layer), default=-1)
            if best != layer[node["id"]]:
                layer[node["id"]], changed = best, True
    return layer


def check_folding(nodes: list[dict], picture, fold_above: int) -> tuple[set[str], list]:
    """Every node counted once (shown, or in exactly one group), boxes within the bound, edge
    counts adding up to the dependencies between different boxes."""
    root = parse(picture.svg)
    shown = set(node_groups(root))
    groups = group_boxes(root)
    assert len(shown) == picture.shown_nodes and len(groups) == picture.groups
    assert len(shown) + sum(int(g.get("data-count")) for g in groups) == len(nodes)
    assert len(shown) + len(groups) <= max(fold_above, MIN_BOXES)
    band = int(root.get("data-layers-per-row"))
    layers = naive_layers(nodes)

    def box(node_id: str) -> str:
        if node_id in shown:
            return node_id
        status = next(n["status"] for n in nodes if n["id"] == node_id)
        return f"{layers[node_id] // band}:{status}"

    group_ids = {g.get("data-group-id"): int(g.get("data-count")) for g in groups}
    members: dict[str, int] = {}
    for node in nodes:
        if node["id"] not in shown:
            members[box(node["id"])] = members.get(box(node["id"]), 0) + 1
    assert members == group_ids
    between = sum(1 for n in nodes for d in n["depends_on"] if box(d) != box(n["id"]))
    assert sum(int(e.get("data-count")) for e in edges(root)) == between
    return shown, groups


def test_a_thousand_nodes_fold_but_keep_failures_and_the_critical_path() -> None:
    failed = {"t3-2", "t17-5", "t40-4"}
    nodes = sprint_nodes(chains=83, length=6, failed=failed)
    assert len(nodes) == 1000
    picture = draw(nodes, fold_above=300)
    assert picture.folded
    shown, groups = check_folding(nodes, picture, 300)
    assert failed | {"integrate"} <= shown
    assert set(picture.critical_path) <= shown and picture.critical_path[-1] == "final"
    assert is_chain(picture.critical_path, nodes)
    # Layer 1: the first task of each chain and the docs task, all done, less the one on the
    # critical path. The tooltip names 20 of them.
    done_top = next(g for g in groups if g.get("data-group-id") == "1:done")
    assert done_top.get("data-count") == "83"
    tooltip = done_top.find(NS + "title").text.split("\n")
    assert tooltip[0] == "83 done in layer 1:" and tooltip[-1] == "… and 63 more"
    assert tooltip[1:21] == sorted(tooltip[1:21]) and len(tooltip) == 22


def test_many_failures_do_not_push_the_critical_path_out() -> None:
    nodes = sprint_nodes(chains=83, length=6, failed=set())
    for node in nodes[1:700]:
        node["status"] = "failed"
    picture = draw(nodes, fold_above=300)
    shown, _ = check_folding(nodes, picture, 300)
    assert set(picture.critical_path) <= shown
    assert len([n for n in nodes if n["status"] == "failed" and n["id"] in shown]) >= 150


def test_a_deep_graph_folds_several_layers_per_row() -> None:
    nodes = [_node(f"n{i:05}", [f"n{i - 1:05}"] if i else [], status="done" if i < 6000
                   else "open") for i in range(10_000)]
    started = time.monotonic()
    picture = draw(nodes, fold_above=300)
    assert time.monotonic() - started < 60  # returned, did not hang
    root = parse(picture.svg)
    assert int(root.get("data-layers-per-row")) > 1 and picture.layers == 10_000
    check_folding(nodes, picture, 300)


def test_a_wide_layer_wraps_instead_of_growing_without_end() -> None:
    """Without a width to fit (max_width=None) a layer wraps at WRAP boxes a line."""
    nodes = [_node(f"n{i}", []) for i in range(200)]
    root = parse(draw(nodes, fold_above=1000, max_width=None).svg)
    assert len(node_groups(root)) == 200
    assert float(root.get("width")) <= WRAP * (W + 40)
    rows = {g.find(NS + "text").get("y") for g in node_groups(root).values()}
    assert len(rows) == math.ceil(200 / WRAP)


def test_a_wide_layer_folds_to_the_width_but_keeps_its_failures_single() -> None:
    """200 nodes in one layer, 30 of them failed: the 170 done fold into one box, the failed
    stay single on lines of as many boxes as fit the width."""
    nodes = [_node(f"n{i:03}", [], status="failed" if i % 7 == 0 and i < 210 else "done")
             for i in range(200)]
    failed = {n["id"] for n in nodes if n["status"] == "failed"}
    picture = draw(nodes, fold_above=1000)
    root = parse(picture.svg)
    assert float(root.get("width")) <= MAX_WIDTH and picture.width <= MAX_WIDTH
    assert set(node_groups(root)) == failed
    assert [g.get("data-count") for g in group_boxes(root)] == [str(200 - len(failed))]
    per_line = boxes_per_line(MAX_WIDTH)
    tops: dict[str, int] = {}
    for g in node_groups(root).values():
        tops[g[1].get("y")] = tops.get(g[1].get("y"), 0) + 1
    assert max(tops.values()) == per_line < WRAP


def test_no_nodes_draws_an_empty_picture() -> None:
    picture = draw([])
    parse(picture.svg)
    assert (picture.critical_path, picture.shown_nodes, picture.groups) == ([], 0, 0)


# ------------------------------------------------------------ properties against naive models

@st.composite
def dags(draw_: st.DrawFn, *, acyclic: bool = True) -> tuple[list[dict], dict[str, float]]:
    count = draw_(st.integers(1, 9))
    ids = draw_(st.lists(st.text("abcxyz", min_size=1, max_size=3), min_size=count,
                         max_size=count, unique=True))
    statuses = ["open", "in_progress", "done", "failed", "needs_human", "cancelled", "odd"]
    nodes = []
    for index, node_id in enumerate(ids):
        pool = ids[:index] if acyclic else ids
        deps = draw_(st.lists(st.sampled_from([*pool, "ghost"]), max_size=3)) if pool else []
        nodes.append(_node(node_id, deps, status=draw_(st.sampled_from(statuses))))
    weights = draw_(st.dictionaries(st.sampled_from(ids), st.integers(0, 6).map(float)))
    return nodes, weights


def chain_weight(chain: list[str], weights: dict[str, float]) -> float:
    return sum(weights.get(node_id, 1.0) for node_id in chain)


def brute_force_best(nodes: list[dict], weights: dict[str, float]) -> float:
    dependents: dict[str, list[str]] = {n["id"]: [] for n in nodes}
    for node in nodes:
        for dep in set(node["depends_on"]) & set(dependents):
            dependents[dep].append(node["id"])

    def chains(path: list[str]):
        yield path
        for nxt in dependents[path[-1]]:
            yield from chains([*path, nxt])

    return max(chain_weight(c, weights) for start in dependents for c in chains([start]))


@settings(max_examples=300, deadline=None)
@given(dags())
def test_critical_path_is_the_heaviest_chain(graph) -> None:
    nodes, weights = graph
    chain = critical_path(nodes, weights)
    assert is_chain(chain, nodes)
    assert math.isclose(chain_weight(chain, weights), brute_force_best(nodes, weights))
    known = {n["id"] for n in nodes}
    assert not set(nodes[[n["id"] for n in nodes].index(chain[0])]["depends_on"]) & known
    assert not any(chain[-1] in n["depends_on"] for n in nodes)


@settings(max_examples=200, deadline=None)
@given(dags(acyclic=False))
def test_folding_counts_every_node_once_even_with_cycles(graph) -> None:
    nodes, weights = graph
    picture = draw(nodes, weights=weights, fold_above=3)
    root = parse(picture.svg)
    seen = list(node_groups(root))
    for g in group_boxes(root):  # with at most 9 nodes a group's tooltip names every member
        seen += g.find(NS + "title").text.split("\n")[1:]
    assert sorted(seen) == sorted(n["id"] for n in nodes)
    # Folded into at most MIN_BOXES boxes, groups opened again while they fit: only a graph
    # of more nodes than that keeps a group.
    assert picture.folded == (len(nodes) > MIN_BOXES)
    assert picture.shown_nodes + len(group_boxes(root)) <= MIN_BOXES
    assert is_chain(picture.critical_path, nodes)
    assert len(set(picture.critical_path)) == len(picture.critical_path)


# ------------------------------------------------------------------- edges around the boxes

INSET = 3  # px: an edge ends on its box's border, its arrowhead just inside a neighbour's stroke
Rect = tuple[float, float, float, float]


def box_rects(root: ET.Element) -> dict[str, list[Rect]]:
    """Each box's outlines (a group has two: its stacked back and its front) as rectangles
    (left, top, right, bottom), under the names its edges give it ("n:<id>", "g:<group>")."""
    boxes: dict[str, list[Rect]] = {}
    drawn = [("n:" + k, g) for k, g in node_groups(root).items()]
    drawn += [("g:" + g.get("data-group-id"), g) for g in group_boxes(root)]
    for key, g in drawn:
        for shape in g:
            if shape.tag == NS + "rect":
                x, y = float(shape.get("x")), float(shape.get("y"))
                rect = (x, y, x + float(shape.get("width")), y + float(shape.get("height")))
            elif shape.tag == NS + "polygon":
                xs, ys = zip(*(map(float, p.split(",")) for p in shape.get("points").split()),
                             strict=True)
                rect = (min(xs), min(ys), max(xs), max(ys))
            else:
                continue
            boxes.setdefault(key, []).append(rect)
    return boxes


def edge_ends(edge: ET.Element) -> tuple[str, str]:
    return tuple(("n:" + edge.get(f"data-{side}")) if edge.get(f"data-{side}") is not None
                 else "g:" + edge.get(f"data-{side}-group") for side in ("from", "to"))


def sample_path(d: str, spacing: float = 1.0) -> list[tuple[float, float]]:
    """Points along SVG path data made of M, L and C commands (absolute), at most about
    `spacing` px apart (a piece's control polygon is at least as long as the piece)."""
    points: list[tuple[float, float]] = []
    here = (0.0, 0.0)
    for command, args in re.findall(r"([MLC])([^MLC]*)", d):
        numbers = [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", args)]
        ends = list(zip(numbers[::2], numbers[1::2], strict=True))
        if command == "M":
            here = ends[0]
            points.append(here)
            continue
        assert len(ends) == (1 if command == "L" else 3), d
        controls = [here, *ends] if command == "C" else [here, here, ends[0], ends[0]]
        steps = max(8, math.ceil(sum(math.dist(a, b) for a, b in itertools.pairwise(controls))
                                 / spacing))
        p0, p1, p2, p3 = controls
        for i in range(1, steps + 1):
            t = i / steps
            a, b, c, e = (1 - t) ** 3, 3 * (1 - t) ** 2 * t, 3 * (1 - t) * t * t, t ** 3
            points.append((a * p0[0] + b * p1[0] + c * p2[0] + e * p3[0],
                           a * p0[1] + b * p1[1] + c * p2[1] + e * p3[1]))
        here = ends[-1]
    return points


def edges_behind_boxes(svg: str) -> list[tuple[str, str, str]]:
    """(from, to, box) for each edge whose path enters the inside of a box other than its two
    ends (each outline shrunk by INSET px)."""
    root = parse(svg)
    boxes = box_rects(root)
    found = []
    for edge in edges(root):
        ends = edge_ends(edge)
        points = sorted(sample_path(edge.get("d")), key=lambda p: p[1])
        heights = [y for _, y in points]
        for key, rects in boxes.items():
            if key in ends:
                continue
            for x0, y0, x1, y1 in rects:
                across = points[bisect.bisect_right(heights, y0 + INSET):
                                 bisect.bisect_left(heights, y1 - INSET)]
                if any(x0 + INSET < px < x1 - INSET for px, _ in across):
                    found.append((*ends, key))
                    break
    return found


def test_long_edges_of_the_demo_go_around_the_boxes_between() -> None:
    """Before: verify-task-farewell -> integrate and verify-task-greet -> integrate were one
    curve each, drawn behind verify-task-cli, as if it sent three arrows into integrate."""
    picture = draw(DEMO)
    assert edges_behind_boxes(picture.svg) == []
    assert picture.lanes == 2  # the two edges passing the line of verify-task-cli
    root = parse(picture.svg)
    boxes = box_rects(root)
    left, _, right, _ = boxes["n:verify-task-cli"][0]
    for edge in edges(root):
        if edge_ends(edge) in {("n:verify-task-farewell", "n:integrate"),
                               ("n:verify-task-greet", "n:integrate")}:
            # Through the line of verify-task-cli: straight down a lane beside it.
            assert "L" in edge.get("d")
            lane = [x for x, y in sample_path(edge.get("d"))
                    if boxes["n:verify-task-cli"][0][1] < y < boxes["n:verify-task-cli"][0][3]]
            assert lane and (max(lane) < left or min(lane) > right)


def test_edges_between_the_lines_of_a_wrapped_layer_go_around_its_other_lines() -> None:
    """A layer wider than WRAP boxes wraps; an edge from its first line passes the others."""
    roots = [_node(f"r{i:02}", [], status="failed") for i in range(3 * WRAP - 2)]
    nodes = [*roots, _node("sink", [n["id"] for n in roots]), _node("late", ["r00", "sink"]),
             _node("deep", ["late", "r05"])]
    picture = draw(nodes)
    root = parse(picture.svg)
    tops: dict[str, int] = {}
    for g in node_groups(root).values():
        top = g[1].get("y")
        tops[top] = tops.get(top, 0) + 1
    # The failed roots stay single, in lines of as many boxes as fit: lines hold boxes.
    per_line = boxes_per_line(MAX_WIDTH)
    assert max(tops.values()) == per_line and len(tops) == math.ceil(len(roots) / per_line) + 3
    assert edges_behind_boxes(picture.svg) == []
    assert picture.lanes > 0


def test_edges_of_a_folded_picture_go_around_its_groups() -> None:
    nodes = sprint_nodes(chains=83, length=6, failed={"t3-2", "t17-5", "t40-4"})
    picture = draw(nodes, fold_above=300)
    assert edges_behind_boxes(picture.svg) == []
    assert picture.folded and picture.lanes > 0


def test_a_virtual_point_takes_its_place_by_its_mean_and_boxes_keep_their_layer_order() -> None:
    """In a folded band (two layers in one row) boxes read in layer order whatever their means;
    a point (no tier) goes where its mean puts it, between them."""
    rows = [["a", "b", "c"], ["x1", "y0", "v:0:1", "x0"]]
    tier = {"a": 0, "b": 0, "c": 0, "x0": 1, "x1": 2, "y0": 1}
    ups = {"x0": ["c"], "x1": ["a"], "y0": ["b"], "v:0:1": ["a"]}
    downs = {"a": ["x1", "v:0:1"], "b": ["y0"], "c": ["x0"]}
    ordered = order_rows(rows, ups, downs, tier, sweeps=1)
    assert ordered[1] == ["v:0:1", "y0", "x0", "x1"]


def test_a_dense_graph_sends_the_edges_beyond_its_lanes_down_the_side() -> None:
    """Lanes are bounded by the boxes drawn: a chain of 40 with its first node before every
    other one would need 1 + 2 + ... + 38 = 741 lanes (n00 -> nK passes K - 1 lines); it has
    LANES_PER_BOX per box, 400: the 27 shortest of those edges get 378, the 11 longest run down
    the side channel, and still behind no box."""
    nodes = [_node(f"n{i:02}", ([f"n{i - 1:02}"] if i else []) + (["n00"] if i > 1 else []))
             for i in range(40)]
    picture = draw(nodes)
    assert (picture.lanes, picture.aside) == (sum(range(1, 28)), 11)
    assert edges_behind_boxes(picture.svg) == []
    root = parse(picture.svg)
    layout = next(g for g in root.iter(NS + "g") if g.get("class") == "layout")
    sides = (MARGIN, float(layout.get("data-width")) - MARGIN)
    aside = sorted(edge_ends(e)[1] for e in edges(root)
                   if {float(x) for x in re.findall(r"L(-?[\d.]+),", e.get("d"))} & set(sides))
    assert aside == [f"n:n{i}" for i in range(29, 40)]


@settings(max_examples=200, deadline=None)
@given(dags(acyclic=False), st.sampled_from([3, 300]), st.sampled_from([0, 1, LANES_PER_BOX]))
def test_no_edge_runs_behind_a_box_it_does_not_join(graph, fold_above: int,
                                                     lanes_per_box: int) -> None:
    """With lanes for every long edge, for some, or for none (all down the side channel)."""
    nodes, weights = graph
    with mock.patch.object(graph_place, "LANES_PER_BOX", lanes_per_box):
        first = draw(nodes, weights=weights, fold_above=fold_above)
        assert edges_behind_boxes(first.svg) == []
        assert draw(nodes[::-1], weights=weights, fold_above=fold_above).svg == first.svg
