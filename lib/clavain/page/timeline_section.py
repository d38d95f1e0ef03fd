"""The page's timeline section: every runner call of the runs and loop runs on the page as a
bar (`timeline_svg`), and the time between them explained as waits, read from what the run
recorded:

- a back-off: from a node's failed attempt's end (outcome `retry`, its `retry_at` the time the
  scheduler held it until) to its next start or that time, whichever is first — a gap past
  `retry_at` is the node waiting for a worker, not its back-off;
- the run's waits with nothing running (`metrics.json`'s `waits`: a rate limit's reset, a
  subscription window, a budget, other runs, a restarting store);
- a node waiting for a person: from its last runner call's end (outcome `needs_human`) to the
  run's end (or the page's writing, for a run still live)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from clavain.page import timeline_svg
from clavain.page.sections import _cards, _section, _table
from clavain.page.timeline_svg import Bar, Span


def section(page: dict[str, Any]) -> str:
    from clavain.clock import parse_iso

    several = len(page["runs"]) > 1
    now = parse_iso(page["generated_at"]).timestamp()
    bars: list[Bar] = []
    spans: list[Span] = []
    for run in page["runs"]:
        prefix = f"{run['run_id']} · " if several else ""
        bars += bars_of_run(run, prefix=prefix)
        bars += bars_of_running(run, now=now, prefix=prefix)
        spans += spans_of_run(run, now=now, prefix=prefix)
    bars += [bar for loop in page["loops"] for bar in bars_of_loop(loop)]
    if not bars:
        return _section("timeline", "Timeline",
                        '<p class="empty">No runner calls recorded yet: a headless '
                        "<code>clavain run</code> or <code>clavain loop</code> records each "
                        "one.</p>")
    picture = timeline_svg.draw(bars, spans)
    span = picture.span_seconds
    lanes = [{"lane": lane, "busy s": round(busy, 1),
              "busy": f"{100 * busy / span:.0f}%" if span else "",
              "idle s": round(max(span - busy, 0), 1)}
             for lane, busy in picture.busy_by_lane.items()]
    calls = [{"lane": bar.lane, "node": bar.label, "outcome": bar.outcome,
              "seconds": round(bar.end - bar.start, 2), "detail": bar.detail}
             for bar in sorted(bars, key=lambda b: b.start)]
    waits = [{"wait": timeline_svg.WAITS[s.kind][0], "node": s.label,
              "from": timeline_svg.clock(s.start), "to": timeline_svg.clock(s.end),
              "seconds": round(s.end - s.start, 1), "detail": s.detail}
             for s in sorted(spans, key=lambda s: s.start)]
    cards = [("most bars at once", picture.peak_concurrency), ("lanes", len(picture.lanes)),
             ("span", f"{span:.1f} s ({timeline_svg.clock(picture.first)}–"
                      f"{timeline_svg.clock(picture.last)} UTC)"),
             ("idle (nothing running)", f"{picture.idle_seconds:.1f} s")]
    cards += [(words, f"{seconds:.1f} s") for words, seconds in waited(spans).items()]
    return _section(
        "timeline", "Timeline",
        _cards(cards),
        f'<div class="timeline-box">{picture.svg}</div>',
        _table(lanes, ["lane", "busy s", "busy", "idle s"], numeric=("busy s", "idle s"),
               css="lanes"),
        *([f"<details><summary>Every wait ({len(waits)})</summary>",
           _table(waits, ["wait", "node", "from", "to", "seconds", "detail"],
                  numeric=("seconds",), css="waits"), "</details>"] if waits else []),
        f"<details><summary>Every runner call ({len(calls)})</summary>",
        _table(calls, ["lane", "node", "outcome", "seconds", "detail"], numeric=("seconds",)),
        "</details>")


def waited(spans: list[Span]) -> dict[str, float]:
    """Seconds of each kind of wait (overlapping spans of a kind counted once), by its words."""
    by_kind: dict[str, list[Span]] = defaultdict(list)
    for s in spans:
        by_kind[s.kind].append(s)
    found = {}
    for kind, (words, _, _) in timeline_svg.WAITS.items():
        total, reach = 0.0, float("-inf")
        for s in sorted(by_kind.get(kind, []), key=lambda s: s.start):
            total += max(s.end - max(s.start, reach), 0.0)
            reach = max(reach, s.end)
        if total:
            found[words] = round(total, 1)
    return found


def _epoch(text: Any) -> float:
    from clavain.clock import parse_iso

    return parse_iso(str(text)).timestamp()


def _epoch_or_none(text: Any) -> float | None:
    try:
        return _epoch(text) if text else None
    except (TypeError, ValueError):
        return None


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


def spans_of_run(run: dict[str, Any], *, now: float, prefix: str = "") -> list[Span]:
    """A `clavain run`'s waits (module docstring)."""
    timeline = sorted(run["timeline"], key=lambda e: float(e["start_epoch"]))
    ended = [float(e["end_epoch"]) for e in timeline] + [float(w["end_epoch"])
                                                         for w in run.get("waits") or []]
    finished = _epoch_or_none(run.get("finished_at"))
    run_end = now if run.get("live") else finished or max(ended, default=now)
    spans = []
    by_node: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for entry in timeline:
        by_node[entry["node"]].append(entry)
    for node, entries in by_node.items():
        for index, entry in enumerate(entries):
            end = float(entry["end_epoch"])
            later = entries[index + 1] if index + 1 < len(entries) else None
            if entry["outcome"] == "retry":
                held = _epoch_or_none(entry.get("retry_at"))
                if held is None and later is None:
                    continue  # an old record: no time the node was held until
                ends = [run_end] + ([held] if held is not None else []) + (
                    [float(later["start_epoch"])] if later else [])
                until = min(ends)
                spans.append(Span("backoff", f"{prefix}{node}", end, until, _backoff_words(
                    entry, held, later)))
            elif entry["outcome"] == "needs_human" and later is None and run_end > end:
                spans.append(Span("needs_human", f"{prefix}{node}", end, run_end,
                                  f"asked a person: {entry.get('summary') or '?'}; waiting "
                                  + ("still" if run.get("live") else "when the run ended")))
    for wait in run.get("waits") or []:
        why = str(wait.get("why") or "")
        if why == "backoff":  # every open node in back-off: the nodes' own spans say it
            continue
        if why in timeline_svg.WAITS:
            spans.append(Span(why, f"{prefix}{run['run_id']}", float(wait["start_epoch"]),
                              float(wait["end_epoch"]), str(wait.get("message") or "")))
    return spans


def _backoff_words(entry: dict[str, Any], held: float | None,
                   later: dict[str, Any] | None) -> str:
    attempt = f"attempt {entry['attempts']}" if entry.get("attempts") else "an attempt"
    words = f"{attempt} failed at {timeline_svg.clock(float(entry['end_epoch']))}"
    if held is not None:
        words += f"; held until {timeline_svg.clock(held)} UTC"
    words += (f"; next attempt started {timeline_svg.clock(float(later['start_epoch']))}"
              if later else "; not started again")
    summary = str(entry.get("summary") or "")
    return words + (f" — {summary}" if summary else "")


def bars_of_loop(loop: dict[str, Any]) -> list[Bar]:
    """A loop run's iterations as bars on one lane, by progress."""
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
