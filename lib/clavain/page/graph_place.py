"""Where the workgraph picture puts its boxes and how its edges run between them: rows
(`graph_layout`) wrapped into lines, a virtual point in every line a long edge passes (the
Sugiyama dummy node, ordered with the boxes of its line so the order makes room for it), the
coordinates, the ports on a box's sides, and each edge's path through its points. An edge's path
stays in the gaps between lines and in its own lanes within them, so it never runs behind a box
it does not join. `graph_svg` draws what this decides.

The work is bounded by the boxes drawn: points only for the edges drawn (after folding), one per
line passed, at most LANES_PER_BOX per box in all and LINE_LANES in a line. A dense graph's
edges beyond that (those to or from a group, and the longest, first) run down a channel at the
picture's side instead: still never behind a box, three pieces of path however far they go.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from clavain.page.graph_layout import order_rows

W, H = 172, 44  # a node's box
GAP_X, GAP_Y, MARGIN = 20, 64, 16  # GAP_Y leaves room for the edges' bends
WRAP = 12  # the most boxes a line holds however wide the picture may be
# A long edge passing a line runs in a lane LANE from the next lane, and LANE_CLEAR from a box's
# side (clear of a group's stacked back, drawn 4 px to the right). A lane widens its line by that
# much, not by a box. Boxes decide where a row wraps (`boxes_per_line`); the lanes a line may
# hold are what is left of the picture's width (`lane_room`), at most LINE_LANES.
LANE, LANE_CLEAR = 8, 14
LANES_PER_BOX, LINE_LANES = 10, 10 * WRAP  # a sprint's folded 10,000 nodes use ~7 and ~100
MIN_LANES = 8  # lanes a full line keeps room for: boxes_per_line leaves this much spare
BEND = GAP_Y / 2  # a curve across a gap leaves and enters vertically, this far out
POINT = "v:"  # a virtual point's key: "v:<edge index>:<line>"

Edge = tuple[str, str]  # (source box key, target box key)
Run = tuple[float, int, int]  # an edge's vertical run: x, the first and last line it passes


@dataclass
class Placed:
    """Where each box is (left, top), the picture's size, each box's line, and per edge (in the
    order given) its vertical runs from its source towards its target: one per line passed in
    its own lane, or a single one down the side channel."""

    x: dict[str, float]
    y: dict[str, float]
    width: int
    height: int
    line: dict[str, int]
    runs: list[list[Run]]
    points: int  # virtual points (lanes) placed
    aside: int  # edges sent down the side channel


def _spacing(left: str, right: str) -> float:
    """The distance between the centres of two neighbours in a line."""
    boxes = (not left.startswith(POINT)) + (not right.startswith(POINT))
    return (W + GAP_X, W / 2 + LANE_CLEAR, LANE)[2 - boxes]


def _half(key: str) -> float:
    return 0.0 if key.startswith(POINT) else W / 2


def _extent(keys: list[str]) -> float:
    """A line's width, packed: its boxes, and its points as lanes between them."""
    return (_half(keys[0]) + sum(itertools.starmap(_spacing, itertools.pairwise(keys)))
            + _half(keys[-1]))


def _inner(max_width: int) -> float:
    """The widest a line may be packed in a picture `max_width` wide: the margins and both
    side channels (`place`) kept free."""
    return max_width - 2 * MARGIN - 2 * LANE_CLEAR


def _boxes_extent(count: int) -> float:
    return count * W + max(0, count - 1) * GAP_X


def boxes_per_line(max_width: int | None) -> int:
    """How many boxes a line holds so that it fits `max_width` with room for MIN_LANES lanes
    (at least 1, at most WRAP)."""
    if max_width is None:
        return WRAP
    fits = int((_inner(max_width) - _lane_cost(MIN_LANES) + GAP_X) // (W + GAP_X))
    return min(WRAP, max(1, fits))


def _lane_cost(lanes: int) -> float:
    """The most `lanes` points can widen a line of boxes: a point LANE from the next, the first
    in a gap between boxes LANE more than the gap (LANE_CLEAR on both sides instead of GAP_X),
    one at either end LANE_CLEAR - LANE more than that again."""
    return LANE * lanes + 2 * (LANE_CLEAR - LANE) if lanes else 0.0


def lane_room(boxes: int, max_width: int | None) -> int:
    """The lanes a line of `boxes` boxes may hold and still fit `max_width`."""
    if max_width is None:
        return LINE_LANES
    spare = _inner(max_width) - _boxes_extent(boxes) - 2 * (LANE_CLEAR - LANE)
    return max(0, min(LINE_LANES, int(spare // LANE)))


def place(rows: list[list[str]], edges: Sequence[Edge], tier: Mapping[str, int],
          priority: Sequence[int] | None = None, *, max_width: int | None = None) -> Placed:
    """Wrap the ordered `rows` of box keys into lines of at most `boxes_per_line(max_width)`
    boxes (a line counts as a layer from here on: an edge between two lines of one wrapped row
    passes the lines between), add a point per line an edge passes while the line has room
    for its lane, order each line again with its points (`order_rows`, starting from the rows'
    order), and set the coordinates. An edge to a line above (a broken cycle, a folded band)
    passes the same lines from its source upwards. With `max_width`, the picture is at most
    that wide (unless a single box is wider): every line's boxes and lanes fit it, with room
    for the side channels."""
    wrap = boxes_per_line(max_width)
    lines = [row[i:i + wrap] for row in rows for i in range(0, len(row), wrap)]
    line = {key: index for index, keys in enumerate(lines) for key in keys}
    ends = [(line[source], line[to]) for source, to in edges]
    room = [lane_room(len(keys), max_width) for keys in lines]
    lanes = _lanes(lines, ends, priority or [0] * len(edges), LANES_PER_BOX * len(line), room)
    ups: dict[str, list[str]] = {}
    downs: dict[str, list[str]] = {}
    for index, (source, to) in enumerate(edges):
        a, b = ends[index]
        if a != b:  # a loop below its line has no neighbour above or below
            chain = [source, *lanes.get(index, ()), to]
            for near, far in itertools.pairwise(chain if b > a else chain[::-1]):
                downs.setdefault(near, []).append(far)
                ups.setdefault(far, []).append(near)
    lines = order_rows(lines, ups, downs, tier, spacing=_spacing)

    aside = sum(1 for index, (a, b) in enumerate(ends) if abs(b - a) > 1 and index not in lanes)
    pad = LANE_CLEAR if aside else 0.0  # the side channels, between the margin and the boxes
    extents = [_extent(keys) for keys in lines]
    width = math.ceil(max(extents) + 2 * pad) + 2 * MARGIN
    height = len(lines) * (H + GAP_Y) - GAP_Y + 2 * MARGIN
    x: dict[str, float] = {}
    y: dict[str, float] = {}
    centre: dict[str, float] = {}
    for index, (keys, extent) in enumerate(zip(lines, extents, strict=True)):
        at = [_half(keys[0])]  # packed
        for left, right in itertools.pairwise(keys):
            at.append(at[-1] + _spacing(left, right))
        # The whole line slid under the line above by the mean offset of its edges from there,
        # within the picture: long edges' lanes and chains of boxes run straight down.
        offsets = [sum(centre[n] for n in ups[k]) / len(ups[k]) - a
                   for k, a in zip(keys, at, strict=True) if k in ups]
        least, most = MARGIN + pad, width - MARGIN - pad - extent
        wanted = sum(offsets) / len(offsets) if offsets else (least + most) / 2
        left = min(max(wanted, least), most)
        for key, a in zip(keys, at, strict=True):
            centre[key] = left + a
            if not key.startswith(POINT):
                x[key], y[key] = left + a - W / 2, MARGIN + index * (H + GAP_Y)
    runs: list[list[Run]] = []
    for index, (source, to) in enumerate(edges):
        a, b = ends[index]
        step = 1 if b > a else -1
        if index in lanes:
            runs.append([(centre[key], passed, passed)
                         for key, passed in zip(lanes[index], range(a + step, b, step),
                                                strict=True)])
        elif abs(b - a) > 1:  # down the side nearer to both ends
            middle = (centre[source] + centre[to]) / 2
            runs.append([(MARGIN if middle < width / 2 else width - MARGIN, a + step, b - step)])
        else:
            runs.append([])
    points = sum(len(chain) for chain in lanes.values())
    return Placed(x, y, width, height, {k: line[k] for k in x}, runs, points, aside)


def _lanes(lines: list[list[str]], ends: list[tuple[int, int]], priority: Sequence[int],
           budget: int, room: Sequence[int]) -> dict[int, list[str]]:
    """The points of each edge given lanes, from its source on, added to `lines`: to the
    edges of lowest `priority` first, then to the shortest (they cost the fewest lanes, and the
    side channel would be the longest detour for their length), while `budget` lasts and the
    lines they pass hold fewer lanes than their `room`."""
    used = [0] * len(lines)
    full = bytearray(int(r <= 0) for r in room)
    lanes: dict[int, list[str]] = {}
    for index in sorted(range(len(ends)),
                        key=lambda i: (priority[i], abs(ends[i][1] - ends[i][0]), i)):
        a, b = ends[index]
        low, high = min(a, b) + 1, max(a, b)  # the lines passed: low .. high - 1
        if high - low > budget or full.find(1, low, high) >= 0:
            continue
        budget -= max(0, high - low)
        step = 1 if b > a else -1
        lanes[index] = []
        for passed in range(a + step, b, step):
            key = f"{POINT}{index}:{passed}"
            lines[passed].append(key)
            lanes[index].append(key)
            used[passed] += 1
            full[passed] = used[passed] >= room[passed]
    return lanes


def ports(placed: Placed, edges: Sequence[Edge]) -> list[tuple[float, float]]:
    """Where each edge leaves its source and reaches its target (x from the box's left): on the
    side facing the other end (bottom then top going down; top then bottom going up; both
    bottoms for a loop in one line), spread over the middle of that side in the order of where
    each edge goes next (its first run, else the other box), so edges at one side neither meet
    in a point nor cross there more than their ends make them."""
    sides: dict[tuple[str, str], list[tuple[float, int, int]]] = {}
    for index, ((source, to), runs) in enumerate(zip(edges, placed.runs, strict=True)):
        a, b = placed.line[source], placed.line[to]
        towards_to = runs[0][0] if runs else placed.x[to] + W / 2
        towards_source = runs[-1][0] if runs else placed.x[source] + W / 2
        source_side = "top" if b < a else "bottom"
        to_side = "top" if b > a else "bottom"
        sides.setdefault((source, source_side), []).append((towards_to, index, 0))
        sides.setdefault((to, to_side), []).append((towards_source, index, 1))
    out = [[0.0, 0.0] for _ in edges]
    for ends in sides.values():
        ends.sort()
        step = W * 0.6 / len(ends)
        for rank, (_, index, end) in enumerate(ends):
            out[index][end] = W * 0.2 + step * (rank + 0.5)
    return [(a, b) for a, b in out]


def path(placed: Placed, edge: Edge, runs: list[Run], port: tuple[float, float]) -> str:
    """The SVG path data of one edge: a cubic across each gap between lines, vertical where it
    leaves and enters (so it joins the next piece smoothly), and a straight run down (or up)
    each of its runs. An edge within one line loops below it."""
    source, to = edge
    a, b = placed.line[source], placed.line[to]
    x1, x2 = placed.x[source] + port[0], placed.x[to] + port[1]
    if a == b:
        y1 = placed.y[source] + H
        low = y1 + GAP_Y * 0.6
        return f"M{x1:.1f},{y1:.1f} C{x1:.1f},{low:.1f} {x2:.1f},{low:.1f} {x2:.1f},{y1:.1f}"
    step = 1 if b > a else -1
    near, far = (H, 0) if step == 1 else (0, H)  # the side of a line an edge leaves, enters by
    points = [(x1, placed.y[source] + near)]
    for lane, first, last in runs:
        points += [(lane, MARGIN + first * (H + GAP_Y) + far),
                   (lane, MARGIN + last * (H + GAP_Y) + near)]
    points.append((x2, placed.y[to] + far))
    bend = step * BEND
    d = [f"M{points[0][0]:.1f},{points[0][1]:.1f}"]
    for index in range(1, len(points)):
        (px, py), (qx, qy) = points[index - 1], points[index]
        if index % 2:
            d.append(f"C{px:.1f},{py + bend:.1f} {qx:.1f},{qy - bend:.1f} {qx:.1f},{qy:.1f}")
        else:
            d.append(f"L{qx:.1f},{qy:.1f}")
    return " ".join(d)
