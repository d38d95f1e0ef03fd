"""The workgraph as an SVG picture for `clavain report --html`: drawn here from snapshot nodes
(`.clavain/workgraph.json`), no JavaScript, no external reference, no stylesheet (presentation
attributes only, so nothing leaks into the page that embeds it), well-formed XML.

Top to bottom by layer (`graph_layout`); a layer wider than WRAP boxes wraps onto more lines,
and an edge passing lines runs through lanes between their boxes (`graph_place`). Above
`fold_above` nodes the picture folds (`graph_layout.fold`): the nodes needing a person and the
critical path stay individual, the rest become one box per (layer, status), and edges between
boxes are aggregated with a count. Status colours come from `status_colors`.
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
    order_rows,
    read_dag,
)
from clavain.page.graph_place import H, Placed, W, path, place, ports
from clavain.textio import clip
from clavain.workgraph.status_colors import STATUS_COLORS, colors

__all__ = ["GraphPicture", "critical_path", "draw"]

ID_CHARS, SUB_CHARS = 21, 28  # what fits in W at 12 px monospace / 11 px sans
GROUP_LIST = 20  # ids named in a group's tooltip
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif"
MONO = "ui-monospace, SFMono-Regular, Menlo, Consolas, 'Liberation Mono', monospace"
EDGE, CRITICAL = "#6b7280", "#b91c1c"
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


def draw(nodes: Iterable[Mapping[str, Any]], *, weights: Mapping[str, float] | None = None,
         fold_above: int = 300, svg_id: str = "workgraph") -> GraphPicture:
    """The picture of `nodes` (snapshot node dicts of one graph). `svg_id` prefixes the ids
    inside the SVG (arrowheads), so two pictures can share a page."""
    if not _SVG_ID.fullmatch(svg_id):
        raise ValueError(f"svg_id {svg_id!r} must be a letter then letters, digits, - or _")
    dag = read_dag(nodes)
    chain = heaviest_chain(dag, weights)
    if not dag.order:
        svg = (f'<svg xmlns="http://www.w3.org/2000/svg" class="workgraph" viewBox="0 0 240 40" '
               f'width="240" height="40" role="img"><title>Workgraph: no nodes</title>'
               f'<text x="12" y="24" font-family="{FONT}" font-size="13">No nodes.</text></svg>')
        return GraphPicture(svg, [], False, 0, 0, 0)
    folded = len(dag.order) > fold_above
    if folded:
        folding = fold(dag, chain, fold_above)
        shown, band, groups = folding.shown, folding.band, folding.groups
    else:
        shown, band, groups = list(dag.order), 1, {}
    shown_set = set(shown)
    on_path = set(chain)
    path_steps = set(itertools.pairwise(chain))

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
    placed = place(order_rows(rows, ups, downs, tier), drawn, tier, priority)
    width, height = placed.width, placed.height

    total = len(dag.order)
    summary = f"Workgraph: {total} node{'s' if total != 1 else ''}, {dag.layers} layers"
    if folded:
        summary += f"; {len(shown)} shown, the rest in {len(groups)} groups"
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="workgraph" '
           f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
           f'data-nodes="{total}" data-layers-per-row="{band}" font-family="{FONT}">'
           f"<title>{_text(summary)}</title>", _defs(svg_id)]
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
    out.append("</svg>")
    return GraphPicture("".join(out), chain, folded, len(shown), len(groups), dag.layers,
                        placed.points, placed.aside)


def _critical(pair: tuple[str, str], path_steps: set[tuple[str, str]]) -> bool:
    source, to = pair
    return source.startswith("n:") and to.startswith("n:") and (source[2:], to[2:]) in path_steps


def _defs(svg_id: str) -> str:
    def marker(name: str, fill: str) -> str:
        return (f'<marker id="{svg_id}-{name}" viewBox="0 0 10 10" refX="9" refY="5" '
                f'markerUnits="userSpaceOnUse" markerWidth="9" markerHeight="9" orient="auto">'
                f'<path d="M0,0 L10,5 L0,10 z" fill="{fill}"/></marker>')

    return f"<defs>{marker('arrow', EDGE)}{marker('arrow-critical', CRITICAL)}</defs>"


def _edge(pair: tuple[str, str], d: str, count: int, svg_id: str, *, critical: bool = False,
          cycle: bool = False) -> str:
    """One edge along its path `d` (`graph_place.path`), its ends named by node or group."""
    classes = "edge" + (" critical" if critical else "") + (" cycle" if cycle else "")
    ends = []
    for side, key in zip(("from", "to"), pair, strict=True):
        kind = "" if key.startswith("n:") else "-group"
        ends.append(f'data-{side}{kind}="{_text(key[2:])}"')
    width = 2.75 if critical else 1.25 + min(1.75, math.log2(count) / 3)
    colour = CRITICAL if critical or cycle else EDGE
    dash = ' stroke-dasharray="4 3"' if cycle else ""
    # Edges to or from a group are the bulk of a folded picture: lighter, so the nodes shown
    # one by one and their own edges stand out.
    if not (pair[0].startswith("n:") and pair[1].startswith("n:")):
        dash += ' stroke-opacity="0.4"'
    arrow = "arrow-critical" if critical or cycle else "arrow"
    return (f'<path class="{classes}" {" ".join(ends)} data-count="{count}" d="{d}" fill="none" '
            f'stroke="{colour}" stroke-width="{width:.2f}"{dash} '
            f'marker-end="url(#{svg_id}-{arrow})"/>')


def _shape(kind: str, x: float, y: float, fill: str, stroke: str, width: float) -> str:
    """One outline per type, told apart without colour: task a rounded box, verify dashed,
    final_verify a dashed pill, integrate a double border, plan notched corners, epic a
    hexagon; anything else a square box."""
    paint = f'fill="{fill}" stroke="{stroke}" stroke-width="{width}"'
    rect = f'<rect x="{x:.1f}" y="{y:.1f}" width="{W}" height="{H}"'
    if kind == "task":
        return f'{rect} rx="6" {paint}/>'
    if kind == "verify":
        return f'{rect} rx="6" {paint} stroke-dasharray="6 3"/>'
    if kind == "final_verify":
        return f'{rect} rx="{H / 2}" {paint} stroke-dasharray="6 3"/>'
    if kind == "integrate":
        inner = (f'<rect x="{x + 3.5:.1f}" y="{y + 3.5:.1f}" width="{W - 7}" height="{H - 7}" '
                 f'rx="3" fill="none" stroke="{stroke}" stroke-width="1"/>')
        return f'{rect} rx="5" {paint}/>{inner}'
    if kind in ("plan", "epic"):
        cut = 10 if kind == "plan" else 14
        if kind == "plan":
            corners = [(cut, 0), (W - cut, 0), (W, cut), (W, H - cut), (W - cut, H), (cut, H),
                       (0, H - cut), (0, cut)]
        else:
            corners = [(cut, 0), (W - cut, 0), (W, H / 2), (W - cut, H), (cut, H), (0, H / 2)]
        points = " ".join(f"{x + px:.1f},{y + py:.1f}" for px, py in corners)
        return f'<polygon points="{points}" {paint}/>'
    return f'{rect} {paint}/>'


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
            + _shape(str(kind), x, y, fill, stroke, 3.0 if critical else 1.5)
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
            + _labels(x, y, f"{len(members)} {_text(status.replace('_', ' '))}", layers,
                      mono=False)
            + "</g>")
