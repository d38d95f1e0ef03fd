"""The timeline picture: one lane per worker, one bar per runner call (a `clavain run`'s
measured start and end of each runner, a loop run's iterations), so what ran side by side is
seen, not claimed — and the time nothing ran explained: hatched spans for a node's back-off
before its retry, the run's waits (a rate limit's reset, a subscription window, a budget) and
a node waiting for a person. Peak concurrency is `supervisor.metrics.peak_concurrency` — the
same figure `clavain report` prints — and idle time is the part of the span when no bar was open.

Colour is never the only signal: each outcome has its own fill pattern or outline and a glyph
in its label, each wait its own hatching and words, and the legend (inside the picture, so its
swatches are the picture's own patterns) lists exactly what is drawn. The picture takes the
width of its section (a viewBox, width 100 %); the axis says UTC clock times."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from html import escape

from clavain.supervisor.metrics import peak_concurrency
from clavain.textio import clip

VIEW_WIDTH = 1200  # the viewBox's width; the page scales it to the section's width
LABEL_WIDTH = 150
PLOT_WIDTH = VIEW_WIDTH - LABEL_WIDTH - 16
LANE_HEIGHT = 34
BAR_HEIGHT = 24
AXIS_HEIGHT = 30
LEGEND_ROW = 22
CHAR_WIDTH = 6.6  # of an 11 px label, to tell whether it fits in its bar
MAX_WAIT_ROWS = 6  # rows a kind of wait is packed into; past them spans overlap


@dataclass(frozen=True)
class Look:
    words: str  # the legend's
    fill: str
    stroke: str
    pattern: str = ""  # a <pattern> of _PATTERNS laid over the fill
    dash: str = ""  # the outline's dashes
    glyph: str = ""  # before the label: a text signal of the outcome
    stroke_width: float = 1.0


# Outcomes of runner calls (and a loop iteration's progress), by the look they are drawn in.
LOOKS: dict[str, Look] = {
    "done": Look("done / progress", "#dcfce7", "#15803d", glyph="✓"),
    "retry": Look("failed, retried", "#ffedd5", "#c2410c", "dots", "5 2", "↻"),
    "failed": Look("failed / error", "#fee2e2", "#b91c1c", "cross", "", "✕", 2.0),
    "needs_human": Look("asks a person", "#fef9c3", "#a16207", "rows", "1 2", "?"),
    "no_progress": Look("no progress (loop)", "#fef3c7", "#92400e", "", "1 2", "∅"),
    "running": Look("still running", "#dbeafe", "#1d4ed8", "", "7 3", "▸"),
    "given_back": Look("given back unspent", "#f3f4f6", "#4b5563", "", "2 3", "↩"),
    "other": Look("other outcome", "#f5f5f5", "#374151", "", "", "•"),
}
OUTCOME_LOOK = {"done": "done", "progress": "done", "retry": "retry", "failed": "failed",
                "error": "failed", "runner_unusable": "failed", "needs_human": "needs_human",
                "no_progress": "no_progress", "running": "running",
                "rate_limited": "given_back", "released": "given_back",
                "budget_share": "given_back", "not_recorded": "given_back",
                "store_unavailable": "given_back", "store_damaged": "failed"}

# Waits: (words, hatch colour, pattern). Run-wide ones are bands behind every lane of the run.
WAITS: dict[str, tuple[str, str, str]] = {
    "backoff": ("back-off before a retry", "#c2410c", "hatch-up"),
    "rate_limit": ("rate-limit wait", "#6d28d9", "hatch-down"),
    "window": ("subscription window wait", "#6d28d9", "hatch-down"),
    "needs_human": ("waiting for a person", "#a16207", "hatch-vertical"),
    "budget": ("waiting for budget", "#0f766e", "hatch-down"),
    "others": ("waiting for other runs", "#4b5563", "hatch-cross"),
    "store": ("store unreachable", "#4b5563", "hatch-cross"),
}
ROW_NAMES = {"backoff": "back-offs", "needs_human": "waiting for a person"}
RUN_WIDE = frozenset({"rate_limit", "window", "budget", "others", "store"})


@dataclass
class Bar:
    lane: str
    label: str
    start: float  # epoch seconds
    end: float
    outcome: str
    detail: str = ""


@dataclass
class Span:
    """A wait: of the whole run (kinds in RUN_WIDE: a band across its lanes), else of one
    node (`label`), packed into a row of waits of its kind below the workers' lanes."""

    kind: str  # a key of WAITS
    label: str
    start: float
    end: float
    detail: str = ""


@dataclass
class TimelinePicture:
    svg: str
    lanes: list[str]
    peak_concurrency: int
    span_seconds: float
    idle_seconds: float  # within the span, no bar open
    busy_by_lane: dict[str, float] = field(default_factory=dict)
    legend: list[tuple[str, str]] = field(default_factory=list)  # ("look"|"wait", key) drawn
    first: float = 0.0
    last: float = 0.0


def look_of(outcome: str) -> str:
    return OUTCOME_LOOK.get(outcome, "other")


def draw(bars: list[Bar], spans: list[Span] | None = None, *,
         now: float | None = None) -> TimelinePicture:
    """The picture of `bars` and `spans`; a bar still open (end before start, e.g. a live
    runner) is drawn up to `now`."""
    bars = [Bar(b.lane, b.label, b.start, max(b.end, b.start, now or b.start), b.outcome,
                b.detail) for b in bars]
    spans = [s for s in spans or [] if s.kind in WAITS and s.end > s.start]
    if not bars:
        return TimelinePicture('<p class="empty">No runner calls recorded yet.</p>', [], 0, 0.0,
                               0.0)
    lanes = list(dict.fromkeys(bar.lane for bar in sorted(bars, key=_lane_order)))
    rows = _wait_rows([s for s in spans if s.kind not in RUN_WIDE])
    first = min([b.start for b in bars] + [s.start for s in spans])
    last = max([b.end for b in bars] + [s.end for s in spans])
    span = max(last - first, 1e-6)
    scale = PLOT_WIDTH / span
    legend = [("look", key) for key in LOOKS if any(look_of(b.outcome) == key for b in bars)] \
        + [("wait", key) for key in WAITS if any(s.kind == key for s in spans)]
    legend_svg, legend_height = _legend(legend)
    top = legend_height + AXIS_HEIGHT
    height = math.ceil(top + LANE_HEIGHT * (len(lanes) + len(rows)) + 6)
    parts = [f'<svg class="timeline" xmlns="http://www.w3.org/2000/svg" role="img" '
             f'viewBox="0 0 {VIEW_WIDTH} {height}" width="100%" '
             f'preserveAspectRatio="xMinYMin meet" style="max-width:100%;height:auto">',
             "<title>Runner calls over time, one lane per worker, and the waits between "
             "them</title>", _patterns(), legend_svg]
    parts += _axis(first, span, scale, legend_height, height)
    for index, lane in enumerate(lanes):
        y = top + index * LANE_HEIGHT
        parts.append(f'<g class="lane" data-lane="{escape(lane)}">{_lane_head(lane, y, index)}')
        parts += [_bar(bar, first, scale, y) for bar in bars if bar.lane == lane]
        parts.append("</g>")
    for index, (name, row) in enumerate(rows):
        y = top + (len(lanes) + index) * LANE_HEIGHT
        parts.append(f'<g class="wait-lane" data-lane="{escape(name)}">'
                     f'{_lane_head(name, y, len(lanes) + index)}')
        parts += [_span(s, first, scale, y + (LANE_HEIGHT - BAR_HEIGHT) / 2, BAR_HEIGHT)
                  for s in row]
        parts.append("</g>")
    band = LANE_HEIGHT * len(lanes)
    parts += [_span(s, first, scale, top, band, band=True) for s in spans if s.kind in RUN_WIDE]
    parts.append("</svg>")
    entries = [{"start_epoch": b.start, "end_epoch": b.end} for b in bars]
    return TimelinePicture("".join(parts), lanes, peak_concurrency(entries), span,
                           _idle(bars), {lane: round(sum(b.end - b.start for b in bars
                                                         if b.lane == lane), 3)
                                         for lane in lanes}, legend, first, last)


def _lane_order(bar: Bar) -> tuple[str, int, str]:
    """Lanes in a natural order: `worker 2` before `worker 10`."""
    head, _, tail = bar.lane.rpartition(" ")
    return (head, int(tail), "") if tail.isascii() and tail.isdigit() else (bar.lane, 0, "")


def _wait_rows(spans: list[Span]) -> list[tuple[str, list[Span]]]:
    """Each kind of wait packed into as few rows as keep its spans apart (up to
    MAX_WAIT_ROWS; past them the last row holds the rest, overlapping)."""
    rows: list[tuple[str, list[Span]]] = []
    for kind in WAITS:
        mine: list[list[Span]] = []
        for s in sorted((s for s in spans if s.kind == kind), key=lambda s: s.start):
            row = next((r for r in mine if r[-1].end <= s.start), None)
            if row is None and len(mine) < MAX_WAIT_ROWS:
                mine.append(row := [])
            (row if row is not None else mine[-1]).append(s)
        words = ROW_NAMES.get(kind, kind)
        rows += [(words if n == 0 else f"{words} ({n + 1})", row)
                 for n, row in enumerate(mine)]
    return rows


def _lane_head(name: str, y: float, index: int) -> str:
    return (f'<rect class="lane-bg" x="0" y="{y}" width="{VIEW_WIDTH}" height="{LANE_HEIGHT}" '
            f'fill="{"#fafafa" if index % 2 else "#ffffff"}"/>'
            f'<text x="6" y="{y + LANE_HEIGHT / 2 + 4:.1f}" font-size="12">'
            f'{escape(clip(name, 22))}</text>')


def _bar(bar: Bar, first: float, scale: float, y: float) -> str:
    key = look_of(bar.outcome)
    look = LOOKS[key]
    x = LABEL_WIDTH + (bar.start - first) * scale
    width = max((bar.end - bar.start) * scale, 2.0)
    seconds = bar.end - bar.start
    tip = (f"{bar.label}: {look.glyph} {bar.outcome} ({look.words}), {seconds:.1f} s, "
           f"{clock(bar.start)}–{clock(bar.end)} UTC" + (f"\n{bar.detail}" if bar.detail
                                                            else ""))
    top = y + (LANE_HEIGHT - BAR_HEIGHT) / 2
    box = f'x="{x:.1f}" y="{top:.1f}" width="{width:.1f}" height="{BAR_HEIGHT}" rx="3"'
    dash = f' stroke-dasharray="{look.dash}"' if look.dash else ""
    over = f'<rect {box} fill="url(#tl-{look.pattern})" stroke="none"/>' if look.pattern else ""
    return (f'<g class="bar outcome-{escape(bar.outcome)} look-{key}" '
            f'data-node="{escape(bar.label)}" data-outcome="{escape(bar.outcome)}" '
            f'data-look="{key}" data-seconds="{seconds:.3f}">'
            f"<title>{escape(tip)}</title>"
            f'<rect {box} fill="{look.fill}" stroke="{look.stroke}" '
            f'stroke-width="{look.stroke_width:g}"{dash}/>{over}'
            f"{_label(look.glyph, bar.label, x, width, y + LANE_HEIGHT / 2 + 4)}</g>")


def _label(glyph: str, text: str, x: float, width: float, baseline: float) -> str:
    """The glyph and as much of the label as fits inside the bar; only the glyph when
    nothing more fits; nothing in a sliver."""
    room = int((width - 8) / CHAR_WIDTH)
    if room >= 5:
        shown = f"{glyph} {clip(text, room - 2)}" if glyph else clip(text, room)
    elif width >= 12 and glyph:
        shown = glyph
    else:
        return ""
    # A white halo keeps the words legible over a pattern or a hatch.
    return (f'<text class="label" x="{x + 4:.1f}" y="{baseline:.1f}" font-size="11" '
            f'fill="#111827" stroke="#ffffff" stroke-width="3" stroke-opacity="0.85" '
            f'paint-order="stroke">{escape(shown)}</text>')


def _span(s: Span, first: float, scale: float, y: float, height: float, *,
          band: bool = False) -> str:
    words, color, pattern = WAITS[s.kind]
    x = LABEL_WIDTH + (s.start - first) * scale
    width = max((s.end - s.start) * scale, 2.0)
    seconds = s.end - s.start
    tip = (f"{s.label}: {words}, {seconds:.1f} s, {clock(s.start)}–{clock(s.end)} UTC"
           + (f"\n{s.detail}" if s.detail else ""))
    # A band across the run's lanes says what it waited for; a node's span names the node.
    text = (_label("", words, x, width, y + 14) if band
            else _label("", s.label, x, width, y + height / 2 + 4))
    return (f'<g class="wait wait-{s.kind}{" run-wait" if band else ""}" '
            f'data-wait="{s.kind}" data-node="{escape(s.label)}" data-seconds="{seconds:.3f}">'
            f"<title>{escape(tip)}</title>"
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" height="{height:.1f}" '
            f'fill="url(#tl-{pattern})" stroke="{color}" stroke-dasharray="3 2"/>{text}</g>')


_HATCH = {"hatch-up": "M0,8 L8,0 M-2,2 L2,-2 M6,10 L10,6",
          "hatch-down": "M0,0 L8,8 M-2,6 L2,10 M6,-2 L10,2",
          "hatch-vertical": "M4,0 L4,8", "hatch-cross": "M0,8 L8,0 M0,0 L8,8"}


def _patterns() -> str:
    """The fills every outcome's and wait's look names (ids `tl-…`, one timeline a page). A
    hatch has no background: under it, the lane's shows."""
    hatches = {pattern: color for _, color, pattern in reversed(WAITS.values())}
    return "".join([
        "<defs>",
        *(f'<pattern id="tl-{pattern}" patternUnits="userSpaceOnUse" width="8" height="8">'
          f'<path d="{_HATCH[pattern]}" stroke="{color}" stroke-width="1.2" '
          f'stroke-opacity="0.8"/></pattern>'
          for pattern, color in hatches.items()),
        '<pattern id="tl-cross" patternUnits="userSpaceOnUse" width="7" height="7">'
        '<path d="M0,0 L7,7 M7,0 L0,7" stroke="#b91c1c" stroke-width="1" '
        'stroke-opacity="0.55"/></pattern>',
        '<pattern id="tl-dots" patternUnits="userSpaceOnUse" width="6" height="6">'
        '<circle cx="3" cy="3" r="1.2" fill="#c2410c" fill-opacity="0.6"/></pattern>',
        '<pattern id="tl-rows" patternUnits="userSpaceOnUse" width="6" height="5">'
        '<path d="M0,2.5 L6,2.5" stroke="#a16207" stroke-width="1" '
        'stroke-opacity="0.55"/></pattern>',
        "</defs>"])


def _legend(keys: list[tuple[str, str]]) -> tuple[str, float]:
    """A row (or rows) of swatches in the picture's own fills, one for each look and wait
    drawn; its height."""
    parts, x, y = ['<g class="timeline-legend" font-size="11">'], float(LABEL_WIDTH), 4.0
    for kind, key in keys:
        if kind == "look":
            look = LOOKS[key]
            words, fill = f"{look.glyph} {look.words}", look.fill
            over = f"url(#tl-{look.pattern})" if look.pattern else ""
            stroke, dash = look.stroke, look.dash
        else:
            words, stroke, pattern = WAITS[key]
            fill, over, dash = f"url(#tl-{pattern})", "", "3 2"
        width = 26 + len(words) * CHAR_WIDTH
        if x + width > VIEW_WIDTH - 8 and x > LABEL_WIDTH:
            x, y = float(LABEL_WIDTH), y + LEGEND_ROW
        swatch = f'x="{x:.1f}" y="{y:.1f}" width="16" height="12" rx="2"'
        dashes = f' stroke-dasharray="{dash}"' if dash else ""
        parts.append(
            f'<g class="legend-entry" data-{kind}="{key}"><rect {swatch} fill="{fill}" '
            f'stroke="{stroke}"{dashes}/>'
            + (f'<rect {swatch} fill="{over}" stroke="none"/>' if over else "")
            + f'<text x="{x + 20:.1f}" y="{y + 10:.1f}">{escape(words)}</text></g>')
        x += width
    parts.append("</g>")
    return "".join(parts), (y + LEGEND_ROW if keys else 0.0)


def _axis(first: float, span: float, scale: float, top: float, height: float) -> list[str]:
    """Ticks at round UTC clock times; the relative time since the first call in each tick's
    title."""
    step = _tick_step(span)
    day = datetime.fromtimestamp(first, timezone.utc).strftime("%Y-%m-%d")
    parts = ['<g class="axis" font-size="10" fill="#555">',
             f'<text class="axis-zone" x="6" y="{top + AXIS_HEIGHT - 12}">UTC {day}</text>']
    tick = math.ceil(first / step - 1e-9) * step
    for _ in range(60):  # _tick_step keeps it near 9
        if tick > first + span + 1e-9:
            break
        x = LABEL_WIDTH + (tick - first) * scale
        # A label that would pass the right edge ends at its tick instead.
        at = (f'x="{x - 2:.1f}" text-anchor="end"' if x + 50 > VIEW_WIDTH
              else f'x="{x + 2:.1f}"')
        parts.append(f'<g class="tick"><title>+{_duration(tick - first)} after the first '
                     f'call</title><line x1="{x:.1f}" y1="{top + AXIS_HEIGHT - 6}" '
                     f'x2="{x:.1f}" y2="{height}" stroke="#e5e7eb"/>'
                     f'<text {at} y="{top + AXIS_HEIGHT - 12}">'
                     f"{clock(tick, fraction=step < 1)}</text></g>")
        tick += step
    parts.append("</g>")
    return parts


def _tick_step(span: float) -> float:
    """About nine ticks (a clock time is ~60 px wide) on round seconds, minutes or hours."""
    for step in (0.1, 0.25, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600,
                 7200, 14400, 28800, 86400):
        if span / step <= 9:
            return float(step)
    return math.ceil(span / 9 / 86400) * 86400.0


def clock(epoch: float, *, fraction: bool = False) -> str:
    moment = datetime.fromtimestamp(epoch, timezone.utc)
    return moment.strftime("%H:%M:%S") + (f".{moment.microsecond // 100000}" if fraction
                                          else "")


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.3g}s"
    if seconds < 3600:
        return f"{seconds / 60:.3g}m"
    return f"{seconds / 3600:.3g}h"


def _idle(bars: list[Bar]) -> float:
    """Seconds between the first start and the last end when no bar was open."""
    idle, reach = 0.0, None
    for bar in sorted(bars, key=lambda b: b.start):
        if reach is not None and bar.start > reach:
            idle += bar.start - reach
        reach = bar.end if reach is None else max(reach, bar.end)
    return round(idle, 3)
