"""The timeline picture: one lane per worker, one bar per runner call (a `clavain run`'s
measured start and end of each runner, a loop run's iterations), so what ran side by side is
seen, not claimed. Peak concurrency is `supervisor.metrics.peak_concurrency` — the same figure
`clavain report` prints — and idle time is the part of the span when no bar was open."""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape
from typing import Any

from clavain.supervisor.metrics import peak_concurrency
from clavain.textio import clip
from clavain.workgraph.status_colors import colors

LANE_HEIGHT = 34
BAR_HEIGHT = 24
LABEL_WIDTH = 150
PLOT_WIDTH = 900
AXIS_HEIGHT = 26
# Runner outcomes, and a loop iteration's progress, drawn in the node status colours they mean.
_OUTCOME_STATUS = {"done": "done", "progress": "done", "failed": "failed",
                   "no_progress": "needs_human", "error": "failed", "running": "in_progress"}


@dataclass
class Bar:
    lane: str
    label: str
    start: float  # epoch seconds
    end: float
    outcome: str
    detail: str = ""


@dataclass
class TimelinePicture:
    svg: str
    lanes: list[str]
    peak_concurrency: int
    span_seconds: float
    idle_seconds: float  # within the span, no bar open
    busy_by_lane: dict[str, float] = field(default_factory=dict)


def draw(bars: list[Bar], *, now: float | None = None) -> TimelinePicture:
    """The picture of `bars`; a bar still open (end before start, e.g. a live runner) is
    drawn up to `now`."""
    bars = [Bar(b.lane, b.label, b.start, max(b.end, b.start, now or b.start), b.outcome,
                b.detail) for b in bars]
    if not bars:
        return TimelinePicture('<p class="empty">No runner calls recorded yet.</p>', [], 0, 0.0,
                               0.0)
    lanes = list(dict.fromkeys(bar.lane for bar in sorted(bars, key=_lane_order)))
    first = min(bar.start for bar in bars)
    last = max(bar.end for bar in bars)
    span = max(last - first, 1e-6)
    scale = PLOT_WIDTH / span
    height = AXIS_HEIGHT + LANE_HEIGHT * len(lanes) + 6
    width = LABEL_WIDTH + PLOT_WIDTH + 20
    parts = [f'<svg class="timeline" xmlns="http://www.w3.org/2000/svg" role="img" '
             f'viewBox="0 0 {width} {height}" width="{width}" height="{height}">',
             "<title>Runner calls over time, one lane per worker</title>"]
    parts += _axis(first, span, scale, height)
    for index, lane in enumerate(lanes):
        y = AXIS_HEIGHT + index * LANE_HEIGHT
        parts.append(f'<g class="lane" data-lane="{escape(lane)}">'
                     f'<rect class="lane-bg" x="0" y="{y}" width="{width}" '
                     f'height="{LANE_HEIGHT}" fill="{"#fafafa" if index % 2 else "#ffffff"}"/>'
                     f'<text x="6" y="{y + LANE_HEIGHT / 2 + 4:.1f}" font-size="12">'
                     f'{escape(clip(lane, 22))}</text>')
        for bar in (b for b in bars if b.lane == lane):
            parts.append(_bar(bar, first, scale, y))
        parts.append("</g>")
    parts.append("</svg>")
    entries = [{"start_epoch": b.start, "end_epoch": b.end} for b in bars]
    return TimelinePicture("".join(parts), lanes, peak_concurrency(entries), span,
                           _idle(bars), {lane: round(sum(b.end - b.start for b in bars
                                                         if b.lane == lane), 3)
                                         for lane in lanes})


def _lane_order(bar: Bar) -> tuple[str, int, str]:
    """Lanes in a natural order: `worker 2` before `worker 10`."""
    head, _, tail = bar.lane.rpartition(" ")
    return (head, int(tail), "") if tail.isascii() and tail.isdigit() else (bar.lane, 0, "")


def _bar(bar: Bar, first: float, scale: float, y: float) -> str:
    fill, stroke = colors(_OUTCOME_STATUS.get(bar.outcome, bar.outcome))
    x = LABEL_WIDTH + (bar.start - first) * scale
    width = max((bar.end - bar.start) * scale, 2.0)
    seconds = bar.end - bar.start
    tip = f"{bar.label}: {bar.outcome}, {seconds:.1f} s" + (f"\n{bar.detail}" if bar.detail
                                                           else "")
    text = (f'<text x="{x + 4:.1f}" y="{y + LANE_HEIGHT / 2 + 4:.1f}" font-size="11">'
            f'{escape(clip(bar.label, int(width / 6.5)))}</text>' if width > 40 else "")
    return (f'<g class="bar outcome-{escape(bar.outcome)}" data-node="{escape(bar.label)}" '
            f'data-outcome="{escape(bar.outcome)}" data-seconds="{seconds:.3f}">'
            f"<title>{escape(tip)}</title>"
            f'<rect x="{x:.1f}" y="{y + (LANE_HEIGHT - BAR_HEIGHT) / 2:.1f}" '
            f'width="{width:.1f}" height="{BAR_HEIGHT}" rx="3" fill="{fill}" '
            f'stroke="{stroke}"/>{text}</g>')


def _axis(first: float, span: float, scale: float, height: int) -> list[str]:
    step = _tick_step(span)
    parts = ['<g class="axis" font-size="10" fill="#555">']
    tick = 0.0
    for _ in range(40):  # _tick_step keeps it near 8
        if tick > span + 1e-9:
            break
        x = LABEL_WIDTH + tick * scale
        parts.append(f'<line x1="{x:.1f}" y1="{AXIS_HEIGHT - 6}" x2="{x:.1f}" y2="{height}" '
                     f'stroke="#e5e7eb"/><text x="{x + 2:.1f}" y="{AXIS_HEIGHT - 10}">'
                     f"{_duration(tick)}</text>")
        tick += step
    parts.append("</g>")
    return parts


def _tick_step(span: float) -> float:
    """About eight ticks on round numbers of seconds, minutes or hours."""
    for step in (0.1, 0.25, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600,
                 7200, 14400, 28800, 86400):
        if span / step <= 8:
            return float(step)
    return span / 8


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:g}s"
    if seconds < 3600:
        return f"{seconds / 60:g}m"
    return f"{seconds / 3600:g}h"


def _idle(bars: list[Bar]) -> float:
    """Seconds between the first start and the last end when no bar was open."""
    idle, reach = 0.0, None
    for bar in sorted(bars, key=lambda b: b.start):
        if reach is not None and bar.start > reach:
            idle += bar.start - reach
        reach = bar.end if reach is None else max(reach, bar.end)
    return round(idle, 3)


def bars_of_run(run: dict[str, Any], *, prefix: str = "") -> list[Bar]:
    """A `clavain run`'s timeline entries as bars, a lane per worker."""
    return [Bar(f"{prefix}worker {entry['worker']}", entry["node"],
                float(entry["start_epoch"]), float(entry["end_epoch"]),
                entry["outcome"],
                " · ".join(str(part) for part in (entry.get("role"), entry.get("runner"),
                                                  entry.get("summary")) if part))
            for entry in run["timeline"]]


def bars_of_running(run: dict[str, Any], *, now: float, prefix: str = "") -> list[Bar]:
    """The runners a live run has at work now, as bars open until `now` on their worker's
    lane (a record from before workers were recorded: one lane each)."""
    bars = []
    for number, runner in enumerate(run.get("running") or [], start=1):
        try:
            start = _epoch(runner["started_at"])
        except (KeyError, TypeError, ValueError):
            continue
        worker = runner.get("worker")
        lane = f"worker {worker}" if isinstance(worker, int) and not isinstance(worker, bool) \
            else f"running {number}"
        bars.append(Bar(f"{prefix}{lane}", str(runner["node"]), start, now, "running",
                        "still running when the page was written"))
    return bars


def _epoch(text: Any) -> float:
    from clavain.clock import parse_iso

    return parse_iso(str(text)).timestamp()


def bars_of_loop(loop: dict[str, Any]) -> list[Bar]:
    """A loop run's iterations as bars on one lane, coloured by progress."""
    bars = []
    for record in loop["iterations"]:
        try:
            start, end = _epoch(record["started_at"]), _epoch(record["finished_at"])
        except (KeyError, TypeError, ValueError):
            continue
        progress = record.get("progress") if isinstance(record.get("progress"), dict) else {}
        status = record.get("status") if isinstance(record.get("status"), dict) else {}
        outcome = ("error" if record.get("runner_error") else
                   "progress" if progress.get("progress") else "no_progress")
        bars.append(Bar(f"loop {loop['run_id']}", f"iteration {record.get('iteration')}",
                        start, end, outcome,
                        f"{status.get('status') or record.get('status_error') or ''} "
                        f"breaker {record.get('breaker')}".strip()))
    return bars
