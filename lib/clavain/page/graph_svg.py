"""The workgraph as an SVG picture for `clavain report --html`: drawn here from snapshot nodes
(`.clavain/workgraph.json`), no JavaScript, no external reference, no stylesheet (presentation
attributes only, so nothing leaks into the page that embeds it), well-formed XML.

The picture fits `max_width` (the page's content width at a 1,440 px screen): a layer wraps
onto lines of as many boxes as fit, and an edge passing lines runs through lanes between their
boxes while the line has room, else down a channel at the side (`graph_place`). A layer wider
than LINES_PER_ROW lines, or a graph of more than `fold_above` nodes, folds
(`graph_layout.fold`): the nodes needing a person (failed, waiting, running) and the critical
path stay single, the rest become one box per (layer, status) where a row is too wide, and
edges between boxes are aggregated with a count. Status colours come from `status_colors`; a
glyph per status, an outline per type and a legend (`graph_marks`) tell them apart without
colour. The critical path is drawn once something has run (before, every chain is a guess).
"""

from __future__ import annotations

import heapq
import html
import itertools
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from clavain.page.graph_layout import (
    Dag,
    fold,
    group_status,
    heaviest_chain,
    needs_folding,
    order_rows,
    read_dag,
)
from clavain.page.graph_marks import CRITICAL, CYCLE, EDGE, GLYPH_AT, KINDS, glyph, legend, shape
from clavain.page.graph_place import H, Placed, W, boxes_per_line, path, place, ports
from clavain.textio import clip
from clavain.workgraph.status_colors import STATUS_COLORS, colors
from clavain.workgraph.statuses import NodeStatus

__all__ = ["MAX_WIDTH", "GraphPicture", "critical_path", "draw"]

# What fits in W beside the status glyph at 12 px monospace, and below it at 11 px sans.
ID_CHARS, SUB_CHARS = 18, 28
GROUP_LIST = 20  # ids named in a group's tooltip
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif"
MONO = "ui-monospace, SFMono-Regular, Menlo, Consolas, 'Liberation Mono', monospace"
# What a section of the page holds on a 1,440 px screen: 1,358 px inside main's and the
# section's padding and border (`html.CSS`), 1,343 beside a classic 15 px scroll bar. The
# picture is never wider, so no node is off to the right and nothing scrolls sideways.
MAX_WIDTH = 1340
LINES_PER_ROW = 2  # lines a layer may wrap onto before its many alike nodes fold
LEGEND_FLOW = 640  # px: a small picture's legend may be this wide before it wraps
# A node has run (or is running) when it has one of these statuses or an attempt counted.
RAN = frozenset({NodeStatus.IN_PROGRESS, NodeStatus.DONE, NodeStatus.FAILED,
                 NodeStatus.NEEDS_HUMAN})
# Characters XML 1.0 forbids (a damaged file may hold them): replaced, never emitted.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_SVG_ID = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
_NAME = re.compile(r"[^A-Za-z0-9_-]")  # what a class name may hold


@dataclass
class GraphPicture:
    svg: str
    critical_path: list[str]
    folded: bool
    shown_nodes: int
    groups: int
    layers: int
    lanes: int = 0  # virtual points: lines passed by edges that do not end there
    aside: int = 0  # edges of a dense graph run down the side channel (`graph_place`)
    width: int = 0  # px, legend included: at most the `max_width` drawn for
    critical_drawn: bool = False  # the critical path is marked (something has run)


def critical_path(nodes: Iterable[Mapping[str, Any]],
                  weights: Mapping[str, float] | None = None) -> list[str]:
    """The heaviest chain of dependencies, source first; a node weighs `weights.get(id, 1.0)`
    (measured runner seconds), so without weights it is the longest chain by count. Deps naming
    unknown nodes are ignored; a cycle in a damaged file is broken (`graph_layout.read_dag`)."""
    return heaviest_chain(read_dag(nodes), weights)


def _text(value: object, limit: int | None = None) -> str:
    text = _NOT_XML.sub("\ufffd", "" if value is None else str(value))
    if limit is not None:
        text = clip(text, limit)
    return html.escape(text, quote=True)


def _has_run(dag: Dag, weights: Mapping[str, float] | None) -> bool:
    if weights:
        return True
    for node in dag.nodes.values():
        attempts = node.get("attempts")
        counted = isinstance(attempts, int) and not isinstance(attempts, bool) and attempts > 0
        if node.get("status") in RAN or counted:
            return True
    return False


def draw(nodes: Iterable[Mapping[str, Any]], *, weights: Mapping[str, float] | None = None,
         fold_above: int = 300, svg_id: str = "workgraph",
         max_width: int | None = MAX_WIDTH) -> GraphPicture:
    """The picture of `nodes` (snapshot node dicts of one graph), at most `max_width` px wide
    (None: as wide as a line of WRAP boxes makes it). `svg_id` prefixes the ids inside the SVG
    (arrowheads), so two pictures can share a page."""
    if not _SVG_ID.fullmatch(svg_id):
        raise ValueError(f"svg_id {svg_id!r} must be a letter then letters, digits, - or _")
    dag = read_dag(nodes)
    chain = heaviest_chain(dag, weights)
    if not dag.order:
        svg = (f'<svg xmlns="http://www.w3.org/2000/svg" class="workgraph" viewBox="0 0 240 40" '
               f'width="240" height="40" role="img"><title>Workgraph: no nodes</title>'
               f'<text x="12" y="24" font-family="{FONT}" font-size="13">No nodes.</text></svg>')
        return GraphPicture(svg, [], False, 0, 0, 0, width=240)
    row_cap = boxes_per_line(max_width) * LINES_PER_ROW if max_width else None
    if needs_folding(dag, fold_above, row_cap):
        folding = fold(dag, chain, fold_above, row_cap)
        shown, band, groups = folding.shown, folding.band, folding.groups
    else:
        shown, band, groups = list(dag.order), 1, {}
    folded = bool(groups)
    shown_set = set(shown)
    marked = _has_run(dag, weights)
    on_path = set(chain) if marked else set()
    path_steps = set(itertools.pairwise(chain)) if marked else set()

    def box_of(node_id: str) -> str:
        if node_id in shown_set:
            return "n:" + node_id
        return f"g:{dag.layer[node_id] // band}:{group_status(dag.nodes[node_id].get('status'))}"

    boxes: dict[str, int] = {}  # "n:<id>" or "g:<band>:<status>" -> its row
    rank = {node_id: index for index, node_id in enumerate(dag.order)}
    for node_id in sorted(shown, key=rank.__getitem__):
        boxes["n:" + node_id] = dag.layer[node_id] // band
    statuses = [*STATUS_COLORS, "unknown"]
    for row, status in sorted(groups, key=lambda k: (k[0], statuses.index(k[1]))):
        boxes[f"g:{row}:{status}"] = row
    edges: dict[tuple[str, str], int] = {}
    for node_id in dag.order:
        to = box_of(node_id)
        for dep in dag.deps[node_id]:
            source = box_of(dep)
            if source != to:
                edges[source, to] = edges.get((source, to), 0) + 1
    cycle_edges = [(a, b) for a, b in dag.broken if a != b and a in shown_set and b in shown_set]

    ups: dict[str, list[str]] = {}
    downs: dict[str, list[str]] = {}
    for source, to in edges:
        ups.setdefault(to, []).append(source)
        downs.setdefault(source, []).append(to)
    rows: list[list[str]] = [[] for _ in range((dag.layers - 1) // band + 1)]
    for key, row in boxes.items():
        rows[row].append(key)
    tier = {"n:" + node_id: dag.layer[node_id] for node_id in shown}
    for (row, status), members in groups.items():
        tier[f"g:{row}:{status}"] = min(dag.layer[node_id] for node_id in members)
    # Edges drawn critical last (on top), broken cycles after them; placed with their lanes,
    # which go first to the critical path, then to edges between nodes shown one by one.
    drawn = sorted(edges, key=lambda pair: _critical(pair, path_steps))
    drawn += [("n:" + dep, "n:" + node_id) for dep, node_id in cycle_edges]
    priority = [0 if _critical(pair, path_steps) else 1 if pair[0][0] == pair[1][0] == "n" else 2
                for pair in drawn]
    placed = place(order_rows(rows, ups, downs, tier), drawn, tier, priority,
                   max_width=max_width)
    kinds = {str(dag.nodes[n].get("type")) for n in shown}
    key, key_height, key_width = legend(
        {group_status(dag.nodes[n].get("status")) for n in shown} | {s for _, s in groups},
        {kind if kind in KINDS else "other" for kind in kinds}, grouped=bool(groups),
        critical=bool(path_steps or on_path), cycle=bool(cycle_edges), svg_id=svg_id,
        max_width=min(max_width or placed.width, max(placed.width, LEGEND_FLOW)))
    width, height = max(placed.width, key_width), placed.height + key_height

    total = len(dag.order)
    summary = f"Workgraph: {total} node{'s' if total != 1 else ''}, {dag.layers} layers"
    if folded:
        summary += f"; {len(shown)} shown, the rest in {len(groups)} groups"
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="workgraph" '
           f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
           f'data-nodes="{total}" data-layers-per-row="{band}" font-family="{FONT}">'
           f"<title>{_text(summary)}</title>", _defs(svg_id, bool(on_path), bool(cycle_edges)), key,
           # The picture below its legend (its own coordinates: the lines' x from its left).
           f'<g class="layout" data-width="{placed.width}" '
           f'transform="translate(0,{key_height})">']
    at = ports(placed, drawn)
    for index, pair in enumerate(drawn):
        d = path(placed, pair, placed.runs[index], at[index])
        if index < len(edges):
            out.append(_edge(pair, d, edges[pair], svg_id,
                             critical=_critical(pair, path_steps)))
        else:
            out.append(_edge(pair, d, 1, svg_id, cycle=True))
    for key in boxes:
        if key.startswith("n:"):
            out.append(_node(dag, key[2:], placed, key, critical=key[2:] in on_path))
        else:
            row, status = key[2:].split(":", 1)
            out.append(_group(dag, placed, key, int(row), band, status,
                              groups[int(row), status]))
    out.append("</g></svg>")
    return GraphPicture("".join(out), chain, folded, len(shown), len(groups), dag.layers,
                        placed.points, placed.aside, width, bool(on_path))


def _critical(pair: tuple[str, str], path_steps: set[tuple[str, str]]) -> bool:
    source, to = pair
    return source.startswith("n:") and to.startswith("n:") and (source[2:], to[2:]) in path_steps


def _defs(svg_id: str, critical: bool, cycle: bool) -> str:
    def marker(name: str, fill: str) -> str:
        return (f'<marker id="{svg_id}-{name}" viewBox="0 0 10 10" refX="9" refY="5" '
                f'markerUnits="userSpaceOnUse" markerWidth="9" markerHeight="9" orient="auto">'
                f'<path d="M0,0 L10,5 L0,10 z" fill="{fill}"/></marker>')

    return (f"<defs>{marker('arrow', EDGE)}"
            + (marker("arrow-critical", CRITICAL) if critical else "")
            + (marker("arrow-cycle", CYCLE) if cycle else "") + "</defs>")


def _edge(pair: tuple[str, str], d: str, count: int, svg_id: str, *, critical: bool = False,
          cycle: bool = False) -> str:
    """One edge along its path `d` (`graph_place.path`), its ends named by node or group."""
    classes = "edge" + (" critical" if critical else "") + (" cycle" if cycle else "")
    ends = []
    for side, key in zip(("from", "to"), pair, strict=True):
        kind = "" if key.startswith("n:") else "-group"
        ends.append(f'data-{side}{kind}="{_text(key[2:])}"')
    width = 2.75 if critical else 1.25 + min(1.75, math.log2(count) / 3)
    colour = CRITICAL if critical else CYCLE if cycle else EDGE
    dash = ' stroke-dasharray="4 3"' if cycle else ""
    # Edges to or from a group are the bulk of a folded picture: lighter, so the nodes shown
    # one by one and their own edges stand out.
    if not (pair[0].startswith("n:") and pair[1].startswith("n:")):
        dash += ' stroke-opacity="0.4"'
    arrow = "arrow-critical" if critical else "arrow-cycle" if cycle else "arrow"
    return (f'<path class="{classes}" {" ".join(ends)} data-count="{count}" d="{d}" fill="none" '
            f'stroke="{colour}" stroke-width="{width:.2f}"{dash} '
            f'marker-end="url(#{svg_id}-{arrow})"/>')


def _labels(x: float, y: float, first: str, second: str, *, mono: bool) -> str:
    cx = x + W / 2
    face = f' font-family="{MONO}"' if mono else ' font-weight="600"'
    return (f'<text x="{cx:.1f}" y="{y + 19:.1f}" text-anchor="middle" font-size="12"'
            f'{face} fill="#111827">{first}</text>'
            f'<text x="{cx:.1f}" y="{y + 35:.1f}" text-anchor="middle" font-size="11" '
            f'fill="#374151">{second}</text>')


def _node(dag: Dag, node_id: str, placed: Placed, key: str, *, critical: bool) -> str:
    x, y = placed.x[key], placed.y[key]
    node = dag.nodes[node_id]
    status, kind = node.get("status"), node.get("type")
    fill, stroke = colors(status if isinstance(status, str) else "")
    status_text, kind_text = _text(status), _text(kind)
    classes = (f"node status-{_text(_NAME.sub('_', str(status)))} "
               f"type-{_text(_NAME.sub('_', str(kind)))}" + (" critical" if critical else ""))
    tooltip = "\n".join(_text(part) for part in (
        node_id, node.get("title") or "", f"{kind} · {status}",
        f"layer {dag.layer[node_id]}" + (" · on the critical path" if critical else "")))
    return (f'<g class="{classes}" data-node-id="{_text(node_id)}" data-status="{status_text}" '
            f'data-type="{kind_text}" data-layer="{dag.layer[node_id]}">'
            f"<title>{tooltip}</title>"
            + shape(str(kind), x, y, fill, stroke, 3.0 if critical else 1.5)
            + glyph(group_status(status), x + GLYPH_AT[0], y + GLYPH_AT[1])
            + _labels(x, y, _text(node_id, ID_CHARS), _text(f"{kind} · {status}", SUB_CHARS),
                      mono=True)
            + "</g>")


def _group(dag: Dag, placed: Placed, key: str, row: int, band: int, status: str,
           members: list[str]) -> str:
    x, y = placed.x[key], placed.y[key]
    first, last = row * band, min(row * band + band, dag.layers) - 1
    layers = f"layer {first}" if first == last else f"layers {first}–{last}"
    fill, stroke = colors(status)
    named = heapq.nsmallest(GROUP_LIST, members)
    more = len(members) - len(named)
    tooltip = "\n".join([f"{len(members)} {status} in {layers}:",
                         *(_text(node_id) for node_id in named)]
                        + ([f"… and {more} more"] if more else []))
    back = (f'<rect x="{x + 4:.1f}" y="{y - 4:.1f}" width="{W}" height="{H}" rx="6" '
            f'fill="{fill}" stroke="{stroke}" stroke-width="1"/>')
    front = (f'<rect x="{x:.1f}" y="{y:.1f}" width="{W}" height="{H}" rx="6" '
             f'fill="{fill}" stroke="{stroke}" stroke-width="1.5"/>')
    return (f'<g class="group status-{status}" data-group-id="{row}:{status}" '
            f'data-layer="{first}" data-layer-last="{last}" data-status="{status}" '
            f'data-count="{len(members)}"><title>{tooltip}</title>{back}{front}'
            + glyph(status, x + GLYPH_AT[0], y + GLYPH_AT[1])
            + _labels(x, y, f"{len(members)} {_text(status.replace('_', ' '))}", layers,
                      mono=False)
            + "</g>")
