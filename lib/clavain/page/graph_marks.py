"""The marks of the workgraph picture that tell things apart without colour, and its legend: an
outline per node type, a glyph per status (a check for done, a cross for failed, a question
mark for waiting on a person, a triangle for running, an empty ring for open, a slash for
cancelled), and a legend row naming every status, type and line drawn. `graph_svg` draws the
picture with them. Glyphs are paths, not characters: they look the same whatever fonts the
reader has.
"""

from __future__ import annotations

from collections.abc import Iterable

from clavain.page.graph_place import H, W
from clavain.workgraph.status_colors import STATUS_COLORS, colors
from clavain.workgraph.statuses import NodeStatus

# Not a red (failures are #dc2626): a violet, on thicker lines, named in the legend.
CRITICAL = "#7c3aed"
CYCLE = "#b91c1c"  # a cycle in a damaged file is a fault: red, dashed
EDGE = "#6b7280"
INK = "#111827"
GLYPH_R = 6.0  # the badge's radius, inside a box's top-left corner (clear of every outline)
GLYPH_AT = (12.0, 13.0)  # its centre from the box's left and top

# Each status's glyph inside its badge (a path centred on 0,0), and its words in the legend.
_GLYPHS = {
    "done": "M-3.2,0.2 L-1,2.6 L3.4,-2.6",
    "failed": "M-2.8,-2.8 L2.8,2.8 M2.8,-2.8 L-2.8,2.8",
    "needs_human": "M-2.4,-1.6 C-2.4,-4.6 2.6,-4.6 2.6,-1.6 C2.6,0.4 0,0.2 0,2.2 M0,3.6 L0,4.2",
    "in_progress": "M-1.8,-3.2 L3.2,0 L-1.8,3.2 Z",
    "open": "",
    "cancelled": "M-3,3 L3,-3",
}
STATUS_WORDS = {"open": "open", "in_progress": "running", "done": "done", "failed": "failed",
                "needs_human": "waiting for a person", "cancelled": "cancelled",
                "unknown": "other status"}
KINDS = ("plan", "epic", "task", "verify", "integrate", "final_verify")
_KIND_WORDS = {"final_verify": "final verify"}
LEGEND_ROW, LEGEND_TOP = 24, 10  # a legend line's height; the space above the first
_ICON, _ICON_H, _CHAR = 34, 16, 6.8  # an icon's size; a generous width of a 12 px character


def shape(kind: str, x: float, y: float, fill: str, stroke: str, width: float, *,
          w: float = W, h: float = H) -> str:
    """One outline per type, told apart without colour: task a rounded box, verify dashed,
    final_verify a dashed pill, integrate a double border, plan notched corners, epic a
    hexagon; anything else a square box."""
    paint = f'fill="{fill}" stroke="{stroke}" stroke-width="{width}"'
    rect = f'<rect x="{x:.1f}" y="{y:.1f}" width="{w}" height="{h}"'
    small = w < W
    dash = ' stroke-dasharray="4 2"' if small else ' stroke-dasharray="6 3"'
    if kind == "task":
        return f'{rect} rx="{3 if small else 6}" {paint}/>'
    if kind == "verify":
        return f'{rect} rx="{3 if small else 6}" {paint}{dash}/>'
    if kind == "final_verify":
        return f'{rect} rx="{h / 2}" {paint}{dash}/>'
    if kind == "integrate":
        inset = 2.5 if small else 3.5
        inner = (f'<rect x="{x + inset:.1f}" y="{y + inset:.1f}" width="{w - 2 * inset}" '
                 f'height="{h - 2 * inset}" rx="{2 if small else 3}" fill="none" '
                 f'stroke="{stroke}" stroke-width="1"/>')
        return f'{rect} rx="{3 if small else 5}" {paint}/>{inner}'
    if kind in ("plan", "epic"):
        cut = (5 if kind == "plan" else 7) if small else (10 if kind == "plan" else 14)
        if kind == "plan":
            corners = [(cut, 0), (w - cut, 0), (w, cut), (w, h - cut), (w - cut, h), (cut, h),
                       (0, h - cut), (0, cut)]
        else:
            corners = [(cut, 0), (w - cut, 0), (w, h / 2), (w - cut, h), (cut, h), (0, h / 2)]
        points = " ".join(f"{x + px:.1f},{y + py:.1f}" for px, py in corners)
        return f'<polygon points="{points}" {paint}/>'
    return f'{rect} {paint}/>'


def glyph(status: str, cx: float, cy: float) -> str:
    """The status's badge: a white disc ringed in the status's colour, its glyph in ink."""
    _, stroke = colors(status)
    mark = _GLYPHS.get(status, "M-0.6,0 L0.6,0")  # an unknown status: a dot
    fill = INK if status == NodeStatus.IN_PROGRESS else "none"
    inner = (f'<path d="{mark}" transform="translate({cx:.1f},{cy:.1f})" fill="{fill}" '
             f'stroke="{INK}" stroke-width="1.6" stroke-linecap="round" '
             f'stroke-linejoin="round"/>' if mark else "")
    return (f'<g class="glyph" data-glyph="{status}"><circle cx="{cx:.1f}" cy="{cy:.1f}" '
            f'r="{GLYPH_R}" fill="#ffffff" stroke="{stroke}" stroke-width="1.5"/>{inner}</g>')


def _entry(key: str, icon: str, words: str, x: float, y: float) -> str:
    return (f'<g class="legend-entry" data-legend="{key}">{icon}'
            f'<text x="{x + _ICON + 6:.1f}" y="{y + 12:.1f}" font-size="12" fill="#374151">'
            f"{words}</text></g>")


def legend(statuses: Iterable[str], kinds: Iterable[str], *, grouped: bool, critical: bool,
           cycle: bool, svg_id: str, max_width: int) -> tuple[str, int, int]:
    """The legend of what was drawn, flowed in lines within `max_width`: (its SVG, its height
    and the width it takes)."""
    drawn_statuses = set(statuses)
    drawn_kinds = set(kinds)
    items: list[tuple[str, str, str]] = []  # (key, words, icon kind)
    for status in [*STATUS_COLORS, "unknown"]:
        if status in drawn_statuses:
            items.append((f"status:{status}", STATUS_WORDS[status], "status"))
    for kind in [*KINDS, "other"]:
        if kind in drawn_kinds:
            items.append((f"type:{kind}", _KIND_WORDS.get(kind, kind) + (
                " type" if kind == "other" else ""), "type"))
    if grouped:
        items.append(("group", "nodes folded by status and layer (count on the box)", "group"))
    if critical:
        items.append(("critical", "critical path (the heaviest chain)", "critical"))
    if cycle:
        items.append(("cycle", "dependency closing a cycle (a damaged file)", "cycle"))
    out: list[str] = []
    x, y, used = 16.0, float(LEGEND_TOP), 0.0
    for key, words, icon_kind in items:
        wide = _ICON + 6 + len(words) * _CHAR
        if x > 16 and x + wide > max_width - 16:
            x, y = 16.0, y + LEGEND_ROW
        top = y + (LEGEND_ROW - _ICON_H) / 2 - 4
        out.append(_entry(key, _icon(icon_kind, key.split(":", 1)[-1], x, top, svg_id),
                          words, x, top))
        used = max(used, x + wide)
        x += wide + 18
    height = int(y + LEGEND_ROW) if items else 0
    body = "".join(out)
    return f'<g class="legend">{body}</g>', height, int(used + 16)


def _icon(kind: str, name: str, x: float, y: float, svg_id: str) -> str:
    mid = y + _ICON_H / 2
    if kind == "status":
        fill, stroke = colors(name)
        swatch = (f'<rect x="{x:.1f}" y="{y:.1f}" width="{_ICON}" height="{_ICON_H}" rx="3" '
                  f'fill="{fill}" stroke="{stroke}" stroke-width="1.5"/>')
        return swatch + glyph(name, x + 9, mid)
    if kind == "type":
        return shape(name, x, y, "#ffffff", "#374151", 1.2, w=_ICON, h=_ICON_H)
    if kind == "group":
        return (f'<rect x="{x + 3:.1f}" y="{y - 3:.1f}" width="{_ICON - 3}" height="{_ICON_H}" '
                f'rx="3" fill="#f3f4f6" stroke="#6b7280" stroke-width="1"/>'
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{_ICON - 3}" height="{_ICON_H}" rx="3" '
                f'fill="#f3f4f6" stroke="#6b7280" stroke-width="1.2"/>')
    colour, width, dash, arrow = ((CRITICAL, 2.75, "", "arrow-critical") if kind == "critical"
                                  else (CYCLE, 1.25, ' stroke-dasharray="4 3"', "arrow-cycle"))
    return (f'<path d="M{x:.1f},{mid:.1f} L{x + _ICON - 2:.1f},{mid:.1f}" fill="none" '
            f'stroke="{colour}" stroke-width="{width}"{dash} '
            f'marker-end="url(#{svg_id}-{arrow})"/>')
