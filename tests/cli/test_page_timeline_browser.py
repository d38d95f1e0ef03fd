"""The timeline of a blocked 200-node four-worker run (issue 34, item 4), in headless Chromium
at 1,440 × 900: the picture takes its section's width, the retried node's bar is drawn as a
retry and its back-off as a hatched span, the node waiting for a person has its span to the
run's end, the legend names every look drawn, the axis says clock times and node ids sit inside
the bars wide enough. A screenshot of the section is kept in test-artifacts/."""

from __future__ import annotations

import base64
import os
import re
from pathlib import Path

import pytest

from tests.browser import chromium_or_skip, open_page
from tests.page_scenarios import ASKING, FAILING, FLAKY, blocked_run

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("CLAVAIN_TEST_ARTIFACTS") or REPO / "test-artifacts")


@pytest.fixture(autouse=True)
def _chromium() -> None:
    chromium_or_skip()


def test_a_blocked_runs_timeline_explains_its_time(run_cli, project: Path,
                                                   tmp_path: Path) -> None:
    blocked_run(project, run_cli)
    target = tmp_path / "night.html"
    assert run_cli("report", "--html", str(target), "--run", "night").returncode == 0
    with open_page(target, width=1440, height=900) as page:
        widths = page.evaluate("""(() => {
            const s = document.querySelector('#timeline');
            const cs = getComputedStyle(s);
            return [document.querySelector('svg.timeline').getBoundingClientRect().width,
                    s.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight)];
            })()""")
        assert widths[0] > 1000 and abs(widths[0] - widths[1]) <= 2, widths
        looks = page.evaluate("""(() => {
            const of = (sel, key) => [...document.querySelectorAll(sel)].map(
                e => e.getAttribute(key));
            return {bars: [...new Set(of('svg.timeline .bar', 'data-look'))].sort(),
                    legend: of('svg.timeline .legend-entry[data-look]', 'data-look').sort(),
                    waits: [...new Set(of('svg.timeline .wait', 'data-wait'))].sort(),
                    wait_legend: of('svg.timeline .legend-entry[data-wait]', 'data-wait')
                        .sort()}; })()""")
        assert {"done", "retry", "failed", "needs_human"} <= set(looks["bars"])
        assert looks["legend"] == looks["bars"] and looks["wait_legend"] == looks["waits"]
        assert {"backoff", "needs_human"} <= set(looks["waits"])
        spans = page.evaluate("""(() => Object.fromEntries(
            [...document.querySelectorAll('svg.timeline .wait')].map(e => [
                e.dataset.wait + ' ' + e.dataset.node,
                e.querySelector('rect').getBoundingClientRect().width])))()""")
        # Drawn with a real size on the screen, not only present in the markup.
        assert spans[f"backoff {FLAKY}"] > 0 and spans[f"needs_human {ASKING}"] > 0
        assert page.evaluate(f"""document.querySelector(
            'svg.timeline .bar.look-retry[data-node="{FLAKY}"]') !== null""")
        assert page.evaluate(f"""document.querySelector(
            'svg.timeline .bar.look-failed[data-node="{FAILING}"]') !== null""")
        ticks = page.evaluate("[...document.querySelectorAll('svg.timeline .tick text')]"
                              ".map(t => t.textContent)")
        assert ticks and all(re.fullmatch(r"\d\d:\d\d:\d\d(\.\d)?", t) for t in ticks)
        # Every label drawn lies within its bar on the screen.
        outside = page.evaluate("""[...document.querySelectorAll('svg.timeline .bar')]
            .filter(g => g.querySelector('text.label')).filter(g => {
                const r = g.querySelector('rect').getBoundingClientRect();
                const t = g.querySelector('text.label').getBoundingClientRect();
                return t.left < r.left - 0.5 || t.right > r.right + 0.5; }).length""")
        labelled = page.evaluate("document.querySelectorAll('svg.timeline text.label')"
                                 ".length")
        assert labelled > 0 and outside == 0
        box = page.evaluate("""(() => { const b = document.querySelector('#timeline')
            .getBoundingClientRect(); return [b.left, b.top + scrollY, b.width, b.height];
            })()""")
        shot = page.send("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True, "clip": {
                "x": box[0], "y": box[1], "width": box[2], "height": min(box[3], 900),
                "scale": 1}})
        ARTIFACTS.mkdir(exist_ok=True)
        (ARTIFACTS / "timeline-blocked.png").write_bytes(base64.b64decode(shot["data"]))
