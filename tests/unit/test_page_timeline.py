"""The page's timeline: a run's metrics.json (written by the supervisor's own `RunMetrics`,
read back by the page's `collect`) drawn with its back-offs, rate-limit waits and a node
waiting for a person as hatched spans; retries in their own look; outcomes told apart by
pattern, outline and glyph, not only by fill; UTC clock times on the axis; the picture as wide
as its section; node ids inside the bars they fit in."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path

import pytest

from clavain.clock import now_iso
from clavain.page import collect, timeline_section
from clavain.paths import StatePaths
from clavain.supervisor import run_record
from clavain.supervisor.metrics import METRICS_NAME, RunMetrics

T0 = datetime(2026, 11, 28, 14, 0, 0, tzinfo=timezone.utc).timestamp()


def _at(seconds: float) -> str:
    return now_iso(datetime.fromtimestamp(T0 + seconds, timezone.utc))


def _call(node: str, worker: int, start: float, end: float, outcome: str,
          **extra: object) -> dict[str, object]:
    return {"node": node, "role": "implementer", "runner": "claude", "model": "sonnet",
            "worker": worker, "start": _at(start), "end": _at(end), "start_epoch": T0 + start,
            "end_epoch": T0 + end, "seconds": end - start, "outcome": outcome, "llm": True,
            "tokens": 100, "cost_usd": 0.01, "summary": extra.pop("summary", ""), **extra}


@pytest.fixture
def state(tmp_path: Path) -> StatePaths:
    found = StatePaths(tmp_path / ".clavain", project=tmp_path)
    found.root.mkdir()
    return found


def _run(state: StatePaths) -> dict[str, object]:
    """A blocked run: task-a fails, backs off until +40 s and passes on its retry at +45 s;
    task-c fails; task-q asks a person at +70 s; the run then waits out a rate limit (two
    turns of the supervisor's loop, one wait) and ends at +120 s."""
    folder = run_record.run_dir(state, "r1")
    folder.mkdir(parents=True)
    metrics = RunMetrics(folder / METRICS_NAME, state_root=state.root, run_id="r1",
                         graph_id="g")
    metrics.record(_call("task-a", 1, 0, 10, "retry", retry_at=_at(40),
                         summary="tests failed"))
    metrics.record(_call("task-b", 2, 0, 20, "done"))
    metrics.record(_call("task-c", 2, 20, 30, "failed", summary="verify failed"))
    metrics.record(_call("task-a", 1, 45, 60, "done"))
    metrics.record(_call("task-z", 2, 60, 60.2, "done"))  # a sliver: no room for its id
    metrics.record(_call("task-q", 1, 60, 70, "needs_human",
                         summary="Drop the legacy sessions table now?"))
    metrics.waited("rate_limit", T0 + 70, T0 + 85, "rate limited until 14:01:40")
    metrics.waited("rate_limit", T0 + 85.4, T0 + 100, "rate limited until 14:01:40")
    metrics.write(status="blocked", reason="deadlock")
    (folder / run_record.RECORD_NAME).write_text(json.dumps(
        {"run_id": "r1", "graph_id": "g", "status": "blocked", "started_at": _at(0),
         "finished_at": _at(120), "runners": {}}))
    problems: list[str] = []
    run = collect._run(state, "r1", problems)
    assert problems == []
    return run


def _section(state: StatePaths) -> str:
    return timeline_section.section({"runs": [_run(state)], "loops": [],
                                     "generated_at": _at(300)})


def _group(text: str, cls: str, node: str) -> str:
    found = re.search(rf'<g class="{cls}[^"]*"[^>]*data-node="{node}"[^>]*>.*?</g>', text,
                      re.S)
    assert found, (cls, node)
    return found.group(0)


def test_the_waits_are_recorded_and_joined_in_metrics(state: StatePaths) -> None:
    run = _run(state)
    # Two turns of one rate-limit wait are one span; nothing else waited.
    assert [(w["why"], w["start_epoch"] - T0, w["end_epoch"] - T0) for w in run["waits"]] \
        == [("rate_limit", 70, 100)]


def test_backoff_rate_limit_and_person_are_hatched_spans_with_titles(
        state: StatePaths) -> None:
    text = _section(state)
    backoff = _group(text, "wait wait-backoff", "task-a")
    # Held until +40 s, its retry started at +45 s: the back-off is 30 s, not the 35 s gap.
    assert 'data-seconds="30.000"' in backoff and 'fill="url(#tl-hatch-up)"' in backoff
    assert "back-off before a retry" in backoff and "held until 14:00:40" in backoff
    limit = _group(text, "wait wait-rate_limit run-wait", "r1")
    assert 'data-seconds="30.000"' in limit
    assert re.search(r'class="label"[^>]*>rate-limit wait<', limit)  # said, not only hovered
    assert 'fill="url(#tl-hatch-down)"' in limit
    person = _group(text, "wait wait-needs_human", "task-q")
    # From its last call's end (+70 s) to the run's end (+120 s).
    assert 'data-seconds="50.000"' in person and "Drop the legacy sessions table" in person
    assert 'fill="url(#tl-hatch-vertical)"' in person
    # Each hatch a pattern the picture defines.
    for pattern in ("hatch-up", "hatch-down", "hatch-vertical"):
        assert f'<pattern id="tl-{pattern}"' in text
    # The waits are counted in words too.
    assert "back-off before a retry" in text.split("<svg")[0]


def test_a_retry_has_its_own_look_and_every_drawn_look_a_legend_entry(
        state: StatePaths) -> None:
    text = _section(state)
    retry = _group(text, "bar outcome-retry", "task-a")
    assert "look-retry" in retry and 'fill="#ffedd5"' in retry and "no progress" not in retry
    drawn = set(re.findall(r'<g class="bar [^"]*" [^>]*data-look="([^"]+)"', text))
    legend = set(re.findall(r'<g class="legend-entry" data-look="([^"]+)"', text))
    waits = set(re.findall(r'<g class="wait [^"]*" data-wait="([^"]+)"', text))
    assert drawn == legend == {"done", "retry", "failed", "needs_human"}
    assert set(re.findall(r'<g class="legend-entry" data-wait="([^"]+)"', text)) == waits == {
        "backoff", "rate_limit", "needs_human"}
    assert "asks a person" in text and "failed, retried" in text


def _without_colours(group: str) -> str:
    return re.sub(r'(fill|stroke)="#[0-9a-f]{6}"', "", re.sub(r"<title>.*?</title>", "",
                                                              group))


def test_done_and_failed_differ_by_more_than_fill(state: StatePaths) -> None:
    text = _section(state)
    done = _group(text, "bar outcome-done", "task-b")
    failed = _group(text, "bar outcome-failed", "task-c")
    # With every colour taken away the two bars still differ: pattern, outline, glyph.
    shape = re.compile(r'(fill="url\([^)]*\)"|stroke-width="[^"]+"|stroke-dasharray)')
    assert shape.findall(done) != shape.findall(failed)
    assert 'fill="url(#tl-cross)"' in failed and "url(" not in done
    assert "✓ task-b" in done and "✕ task-c" in failed
    assert _without_colours(done).replace("task-b", "X").replace("✓", "") != \
        _without_colours(failed).replace("task-c", "X").replace("✕", "")


def test_the_axis_says_clock_times_and_the_picture_takes_the_section_width(
        state: StatePaths) -> None:
    text = _section(state)
    svg = re.search(r"<svg [^>]*>", text).group(0)
    assert 'width="100%"' in svg and re.search(r'viewBox="0 0 \d+ \d+"', svg)
    assert "height=" not in svg.replace("height:auto", "")
    ticks = re.findall(r'<g class="tick">.*?<text [^>]*>([^<]+)</text></g>', text, re.S)
    assert ticks and all(re.fullmatch(r"\d\d:\d\d:\d\d", tick) for tick in ticks)
    assert "14:00:00" in ticks and "14:02:00" in ticks
    assert ">UTC 2026-11-28<" in text


def test_labels_sit_inside_the_bars_they_fit_in(state: StatePaths) -> None:
    text = _section(state)
    assert re.search(r'class="label"[^>]*>✓ task-a<', _group(text, "bar outcome-done",
                                                              "task-a"))
    assert 'class="label"' not in _group(text, "bar outcome-done", "task-z")


def test_an_old_record_without_waits_or_retry_times_still_draws(state: StatePaths) -> None:
    """A metrics.json from before waits and `retry_at` were kept: the retry's back-off runs
    to its next start; nothing else is made up."""
    run = _run(state)
    run["waits"] = []
    for entry in run["timeline"]:
        entry.pop("retry_at", None)
    text = timeline_section.section({"runs": [run], "loops": [], "generated_at": _at(300)})
    assert 'data-seconds="35.000"' in _group(text, "wait wait-backoff", "task-a")
    assert "wait-rate_limit" not in text
    assert 'data-wait="rate_limit"' not in text
