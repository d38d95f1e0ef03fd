"""The workgraph picture fits the page (issue 34, item 3): real layouts of 10, 200 and 1,000
nodes shaped like a sprint are at most `MAX_WIDTH` wide (the page's content width at 1,440 px),
with the nodes needing a person and the critical path drawn single; a legend names each status,
type and line drawn; the critical path is not red and is drawn only once something has run; a
status is told by its glyph, not by colour alone."""

from __future__ import annotations

import colorsys
import random
import re
import xml.etree.ElementTree as ET

import pytest

from clavain.page.graph_layout import read_dag
from clavain.page.graph_marks import CRITICAL
from clavain.page.graph_place import W, boxes_per_line
from clavain.page.graph_svg import LINES_PER_ROW, MAX_WIDTH, draw
from clavain.workgraph.status_colors import STATUS_COLORS

NS = "{http://www.w3.org/2000/svg}"
ATTENTION = ("failed", "needs_human", "in_progress")


def sprint(size: int, seed: int = 11, *, failed: int = 2, waiting: int = 1,
           running: int = 4) -> list[dict]:
    """`size` snapshot nodes shaped like a sprint's (as `benchmarks/page_graph.py` draws): a
    plan, chains of 12 tasks (some also after another chain's), a verify per task, one
    integrate after every verify and a final verify; the first steps of each chain done, then
    `running` tasks in progress, `failed` failed and `waiting` waiting for a person."""
    rng = random.Random(seed)
    tasks = max(1, (size - 3) // 2)
    nodes = [{"id": "plan", "title": "Plan", "type": "plan", "status": "done",
              "depends_on": []}]
    done_until: dict[int, int] = {}
    for index in range(tasks):
        chain, step = divmod(index, 12)
        done_until.setdefault(chain, rng.randrange(2, 10) if size >= 20 else 0)
        deps = ["plan"] if step == 0 else [f"task-{chain}-{step - 1}"]
        if chain and step and rng.random() < 0.3:
            deps.append(f"task-{rng.randrange(chain)}-{rng.randrange(step)}")
        status = "done" if step < done_until[chain] else "open"
        nodes.append({"id": f"task-{chain}-{step}", "title": f"step {step}", "type": "task",
                      "status": status, "depends_on": deps})
        nodes.append({"id": f"verify-task-{chain}-{step}", "title": "verify", "type": "verify",
                      "status": status, "depends_on": [f"task-{chain}-{step}"]})
    open_tasks = [n for n in nodes if n["type"] == "task" and n["status"] == "open"]
    picked = rng.sample(open_tasks, failed + waiting + running)
    for node, status in zip(picked, ["failed"] * failed + ["needs_human"] * waiting
                            + ["in_progress"] * running, strict=True):
        node["status"] = status
    verifies = [n["id"] for n in nodes if n["type"] == "verify"]
    nodes.append({"id": "integrate", "title": "Integrate", "type": "integrate",
                  "status": "open", "depends_on": verifies})
    nodes.append({"id": "final-verify", "title": "Final", "type": "final_verify",
                  "status": "open", "depends_on": ["integrate"]})
    while len(nodes) < size:
        nodes.append({"id": f"docs-{len(nodes)}", "title": "docs", "type": "task",
                      "status": "open", "depends_on": ["plan"]})
    return nodes


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)


def node_boxes(root: ET.Element) -> dict[str, ET.Element]:
    return {g.get("data-node-id"): g for g in root.iter(NS + "g")
            if "node" in g.get("class", "").split()}


def group_boxes(root: ET.Element) -> list[ET.Element]:
    return [g for g in root.iter(NS + "g") if "group" in g.get("class", "").split()]


def legend_keys(root: ET.Element) -> list[str]:
    return [g.get("data-legend") for g in root.iter(NS + "g")
            if g.get("class") == "legend-entry"]


def right_edges(root: ET.Element) -> list[float]:
    """The right edge of every outline drawn in the picture (x of its rects and polygons)."""
    edges = []
    for element in root.iter():
        if element.tag == NS + "rect":
            edges.append(float(element.get("x")) + float(element.get("width")))
        elif element.tag == NS + "polygon":
            edges += [float(p.split(",")[0]) for p in element.get("points").split()]
    return edges


def hue(colour: str) -> float:
    r, g, b = (int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5))
    return colorsys.rgb_to_hls(r, g, b)[0] * 360


def is_red(colour: str) -> bool:
    """Within 30 degrees of pure red on the colour wheel."""
    return min(hue(colour), 360 - hue(colour)) < 30


@pytest.mark.parametrize("size", [10, 200, 1000])
def test_the_picture_fits_the_page_and_keeps_what_needs_a_person_single(size: int) -> None:
    nodes = sprint(size) if size > 10 else sprint(size, failed=1, waiting=1, running=1)
    assert len(nodes) == size
    picture = draw(nodes)
    root = parse(picture.svg)
    width = float(root.get("width"))
    assert width == picture.width <= MAX_WIDTH
    assert root.get("viewBox") == f"0 0 {root.get('width')} {root.get('height')}"
    assert max(right_edges(root)) <= width  # nothing drawn beyond the right edge
    drawn = node_boxes(root)
    needing = {n["id"] for n in nodes if n["status"] in ATTENTION}
    assert needing and needing <= set(drawn)
    assert picture.critical_drawn and set(picture.critical_path) <= set(drawn)
    for node_id in picture.critical_path:
        assert "critical" in drawn[node_id].get("class").split()
    assert {"plan", "integrate", "final-verify"} <= set(drawn)
    for node in nodes:  # every node box says what it is: its id and status
        if node["id"] in drawn:
            assert drawn[node["id"]].get("data-status") == node["status"]
    # The legend: an entry per status drawn (on a node or a group), per type, the critical
    # path, and the folded groups when there are any.
    statuses = {g.get("data-status") for g in [*drawn.values(), *group_boxes(root)]}
    kinds = {g.get("data-type") for g in drawn.values()}
    keys = legend_keys(root)
    assert len(keys) == len(set(keys))
    assert set(keys) == ({f"status:{s}" for s in statuses} | {f"type:{k}" for k in kinds}
                         | {"critical"} | ({"group"} if picture.folded else set()))
    # No group of one: a single node is drawn as itself.
    assert all(int(g.get("data-count")) > 1 for g in group_boxes(root))


@pytest.mark.parametrize("size", [200, 1000])
def test_without_a_width_to_fit_the_same_graphs_are_wider_than_the_page(size: int) -> None:
    """What the fitting changes: laid out as before (lines of 12, lanes without end) the same
    graphs overflow the page's width."""
    nodes = sprint(size)
    wide = draw(nodes, max_width=None)
    assert wide.width > MAX_WIDTH >= draw(nodes).width


def test_a_layer_wider_than_two_lines_folds_by_width_not_by_count() -> None:
    """Far fewer nodes than fold_above: a graph whose layers fit two lines is drawn node by
    node; one with a layer of 40 folds to fit. There the critical path (plan -> m00, the
    smaller id of equal chains) stays single, the smaller group (6 done) opens again as it fits
    the row, and the 33 other open nodes stay one box."""
    per_row = boxes_per_line(MAX_WIDTH) * LINES_PER_ROW
    assert per_row == 12
    fits = [{"id": "plan", "type": "plan", "status": "done", "depends_on": []}]
    fits += [{"id": f"n{i:02}", "type": "task", "status": "done" if i % 2 else "open",
              "depends_on": ["plan"]} for i in range(per_row)]
    picture = draw(fits, fold_above=300)
    assert not picture.folded and picture.shown_nodes == len(fits)
    wide = [*fits, *({"id": f"m{i:02}", "type": "task", "status": "open",
                      "depends_on": ["plan"]} for i in range(40 - per_row))]
    picture = draw(wide, fold_above=300)
    root = parse(picture.svg)
    assert picture.folded and picture.width <= MAX_WIDTH
    assert picture.critical_path == ["plan", "m00"]
    assert [(g.get("data-status"), g.get("data-count")) for g in group_boxes(root)] == [
        ("open", "33")]
    assert set(node_boxes(root)) == {"plan", "m00", *(f"n{i:02}" for i in range(1, 12, 2))}
    assert draw(wide, fold_above=300, max_width=None).shown_nodes == len(wide)


def test_the_critical_path_is_not_red_and_not_a_status_colour() -> None:
    nodes = sprint(200)
    root = parse(draw(nodes).svg)
    critical = [e for e in root.iter(NS + "path") if "critical" in e.get("class", "").split()]
    assert critical
    colours = {e.get("stroke") for e in critical}
    assert colours == {CRITICAL}
    assert not is_red(CRITICAL)
    assert is_red(STATUS_COLORS["failed"][1]) and is_red("#b91c1c")  # the check can fail
    assert CRITICAL not in {stroke for _, stroke in STATUS_COLORS.values()}
    legend_line = next(g for g in root.iter(NS + "g") if g.get("data-legend") == "critical")
    assert legend_line.find(NS + "path").get("stroke") == CRITICAL


def test_the_critical_path_is_drawn_only_once_something_has_run() -> None:
    nodes = sprint(200, failed=0, waiting=0, running=0)
    for node in nodes:
        node["status"] = "open"
    picture = draw(nodes)
    root = parse(picture.svg)
    assert not picture.critical_drawn
    assert not [e for e in root.iter() if "critical" in e.get("class", "").split()]
    assert CRITICAL not in picture.svg
    assert "critical" not in legend_keys(root)
    assert picture.critical_path  # still known (the page names it), just not drawn
    # One node started: now it is drawn.
    nodes[0]["status"] = "in_progress"
    started = draw(nodes)
    assert started.critical_drawn and "critical" in legend_keys(parse(started.svg))
    # Attempts counted (a node reset to open after it ran) count as having run too.
    nodes[0]["status"], nodes[0]["attempts"] = "open", 2
    assert draw(nodes).critical_drawn


def test_each_status_has_its_own_glyph_so_colour_is_not_the_only_signal() -> None:
    statuses = [*STATUS_COLORS, "odd"]
    nodes = [{"id": f"n-{s}", "type": "task", "status": s, "depends_on": []} for s in statuses]
    root = parse(draw(nodes).svg)
    drawn = node_boxes(root)
    marks = {}
    for status in statuses:
        glyph = drawn[f"n-{status}"].find(f"{NS}g[@class='glyph']")
        assert glyph.get("data-glyph") == ("unknown" if status == "odd" else status)
        # Without its colours: what is left is the shape of the mark.
        marks[status] = re.sub(r'(fill|stroke)="#[0-9a-f]{6}"', "",
                               ET.tostring(glyph, encoding="unicode"))
        marks[status] = re.sub(r'(cx|cy|transform)="[^"]*"', "", marks[status])
    assert len(set(marks.values())) == len(statuses)
    # The legend shows the same glyph beside each status's words.
    for status in STATUS_COLORS:
        entry = next(g for g in root.iter(NS + "g")
                     if g.get("data-legend") == f"status:{status}")
        assert entry.find(f"{NS}g[@class='glyph']").get("data-glyph") == status
        assert entry.find(NS + "text").text


def test_the_page_scenarios_three_columns_are_drawn_node_by_node_within_the_width() -> None:
    """The shape of the page's blocked run (tests/page_scenarios.py): 99 tasks in three
    columns of 33 layers, each after the failing task-3-2 from layer 4 on, a verify each, an
    integrate and a final verify. Six boxes a layer: nothing folds, and all fits."""
    nodes = []
    for layer in range(1, 34):
        for column in range(1, 4):
            deps = [f"task-{layer - 1}-{column}"] if layer > 1 else []
            if layer > 3:
                deps.append("task-3-2")
            status = "done" if layer < 3 else "failed" if (layer, column) == (3, 2) else "open"
            nodes.append({"id": f"task-{layer}-{column}", "type": "task", "status": status,
                          "depends_on": deps})
            nodes.append({"id": f"verify-task-{layer}-{column}", "type": "verify",
                          "status": "open", "depends_on": [f"task-{layer}-{column}"]})
    nodes.append({"id": "integrate", "type": "integrate", "status": "open",
                  "depends_on": [n["id"] for n in nodes if n["type"] == "verify"]})
    nodes.append({"id": "final-verify", "type": "final_verify", "status": "open",
                  "depends_on": ["integrate"]})
    picture = draw(nodes)
    root = parse(picture.svg)
    assert not picture.folded and len(node_boxes(root)) == len(nodes) == 200
    assert picture.width <= MAX_WIDTH and max(right_edges(root)) <= picture.width
    assert read_dag(nodes).layers == 36
    assert W * boxes_per_line(MAX_WIDTH) < MAX_WIDTH


def test_a_cycle_in_a_damaged_file_is_its_own_legend_entry_in_red_dashes() -> None:
    nodes = [{"id": "a", "type": "task", "status": "done", "depends_on": ["c"]},
             {"id": "b", "type": "task", "status": "done", "depends_on": ["a"]},
             {"id": "c", "type": "task", "status": "open", "depends_on": ["b"]}]
    root = parse(draw(nodes).svg)
    cycle = [e for e in root.iter(NS + "path") if "cycle" in e.get("class", "").split()]
    assert len(cycle) == 1 and is_red(cycle[0].get("stroke"))
    assert cycle[0].get("stroke-dasharray") and cycle[0].get("stroke") != CRITICAL
    assert {"cycle", "critical", "status:done", "status:open", "type:task"} == set(
        legend_keys(root))
