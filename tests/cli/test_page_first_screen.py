"""The page's first screen answers a person who left a run alone (issue 34): did it finish,
what failed and why, what did it cost against the cap, what to run next. In headless Chromium
at 1,440 × 900, for a blocked 200-node four-worker run, a run stopped at its budget, a complete
run and a loop stopped by its breaker: the outcome word, the reason, every failed and waiting
node with its error or question, and the next command lie within the first 900 px (their
bounding boxes say so). A screenshot of each first screen is kept in test-artifacts/."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from tests.browser import chromium_or_skip, open_page
from tests.page_scenarios import (
    ASKING,
    FAILING,
    QUESTION,
    blocked_run,
    budget_run,
    finished_run,
    loop_run,
    sprint_with_verdicts_and_waiver,
)

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("CLAVAIN_TEST_ARTIFACTS") or REPO / "test-artifacts")
WIDTH, HEIGHT = 1440, 900


@pytest.fixture(autouse=True)
def _chromium() -> None:
    chromium_or_skip()


def _page(run_cli, target: Path, *args: str) -> Path:
    result = run_cli("report", "--html", str(target), *args)
    assert result.returncode == 0, result.stderr
    return target


def _on_first_screen(page, selector: str) -> str:
    """The text of the first element `selector` matches, which must be drawn (a real size)
    and lie wholly within the first screen."""
    found = page.evaluate(f"""(() => {{
        const e = document.querySelector({selector!r});
        if (!e) return null;
        const b = e.getBoundingClientRect();
        return {{text: e.innerText, top: b.top + scrollY, bottom: b.bottom + scrollY,
                 left: b.left, right: b.right, width: b.width}}; }})()""")
    assert found is not None, f"nothing matches {selector}"
    assert found["width"] > 0 and found["top"] >= 0, found
    assert found["bottom"] <= HEIGHT and found["right"] <= WIDTH, (selector, found)
    return found["text"]


def _keep_first_screen(page, name: str) -> None:
    shot = page.send("Page.captureScreenshot", {"format": "png", "clip": {
        "x": 0, "y": 0, "width": WIDTH, "height": HEIGHT, "scale": 1}})
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / f"first-screen-{name}.png").write_bytes(base64.b64decode(shot["data"]))


def test_a_blocked_run_says_why_which_nodes_and_what_to_run(run_cli, project: Path,
                                                            tmp_path: Path) -> None:
    blocked_run(project, run_cli)
    target = _page(run_cli, tmp_path / "night.html", "--run", "night")
    with open_page(target, width=WIDTH, height=HEIGHT) as page:
        assert page.evaluate("document.querySelectorAll('svg [data-node-id]').length") > 150
        assert "blocked" in _on_first_screen(page, "#outcome")
        assert "deadlock" in _on_first_screen(page, "#outcome-reason")
        assert "no longer rewritten" in _on_first_screen(page, "#liveness")
        assert "of $60.00 cap" in _on_first_screen(page, "#spent")
        waiting = _on_first_screen(page, f'#next-steps [data-node="{ASKING}"]')
        assert QUESTION in waiting and f"clavain graph answer {ASKING} --answer TEXT" in waiting
        failed = _on_first_screen(page, f'#next-steps [data-node="{FAILING}"]')
        assert "AssertionError" in failed and f"clavain graph reset {FAILING}" in failed
        row = _on_first_screen(page, f'table.attention tr[data-node="{FAILING}"]')
        assert "AssertionError: expected 3 sessions" in row and "3" in row
        assert QUESTION in _on_first_screen(page, f'table.attention tr[data-node="{ASKING}"]')
        retried = _on_first_screen(page, 'table.attention tr[data-node="task-2-3"]')
        assert "ConnectionResetError" in retried
        # Problems before pictures: the table is above the graph.
        assert page.evaluate("document.querySelector('#attention').compareDocumentPosition("
                             "document.querySelector('#graph')) & 4") == 4
        # The every-node table lists what is not done first, with its last error.
        first = page.evaluate("document.querySelector('table.nodes tbody tr').innerText")
        assert "\tdone\t" not in first
        assert page.evaluate("[...document.querySelectorAll('table.nodes th')]"
                             ".some(th => th.textContent === 'last error')")
        assert "$" in page.evaluate("document.querySelector('#cost').innerText")
        costliest = page.evaluate("[...document.querySelectorAll('table.costliest tbody tr')]"
                                  ".map(r => [r.cells[0].textContent, "
                                  "parseFloat(r.cells[2].textContent.slice(1))])")
        dollars = [spent for _, spent in costliest]
        assert 5 <= len(costliest) <= 10 and dollars == sorted(dollars, reverse=True)
        assert FAILING in [node for node, _ in costliest]
        # No node of the plan lies outside the picture's visible width; the legend is drawn;
        # the timeline has its retry bars and its wait spans.
        rights = page.evaluate("[...document.querySelectorAll('svg.workgraph [data-node-id]"
                               ", svg.workgraph [data-group-id]')]"
                               ".map(n => n.getBoundingClientRect().right)")
        assert rights and max(rights) <= WIDTH
        assert page.evaluate("document.querySelector('#graph .scroll').scrollWidth <= "
                             "document.querySelector('#graph .scroll').clientWidth")
        assert page.evaluate("document.querySelectorAll('svg.workgraph .legend-entry')"
                             ".length") >= 3
        assert page.evaluate("document.querySelector('svg.timeline .bar.look-retry') !== null")
        assert page.evaluate("document.querySelectorAll('svg.timeline .wait').length") >= 2
        _keep_first_screen(page, "blocked")


def test_a_run_stopped_at_its_budget_says_so_and_how_to_go_on(run_cli, project: Path,
                                                              tmp_path: Path) -> None:
    budget_run(project, run_cli)
    target = _page(run_cli, tmp_path / "capped.html", "--run", "capped")
    with open_page(target, width=WIDTH, height=HEIGHT) as page:
        assert "stopped: budget" in _on_first_screen(page, "#outcome")
        reason = _on_first_screen(page, "#outcome-reason")
        assert "spend reached its cap" in reason and "of $3.00" in reason
        go_on = _on_first_screen(page, '#next-steps [data-label="Go on"]')
        assert "maxCostUsd" in go_on and "clavain run --resume capped" in go_on
        assert "projected to finish" in page.evaluate(
            "document.querySelector('#cost').innerText")
        # Only what cost something is among the costliest (verify nodes run no model).
        costliest = page.evaluate("[...document.querySelectorAll('table.costliest tbody tr')]"
                                  ".map(r => r.cells[0].textContent)")
        assert costliest and not any(node.startswith("verify-") for node in costliest)
        _keep_first_screen(page, "budget")


def test_a_complete_run_says_complete_and_shows_no_problem_table(run_cli, project: Path,
                                                                 tmp_path: Path) -> None:
    finished_run(project, run_cli)
    target = _page(run_cli, tmp_path / "demo.html", "--run", "demo")
    with open_page(target, width=WIDTH, height=HEIGHT) as page:
        assert "complete" in _on_first_screen(page, "#outcome")
        assert "every node is done" in _on_first_screen(page, "#outcome-reason")
        assert "wall" in _on_first_screen(page, "p.times")
        assert page.evaluate("document.querySelector('#attention')") is None
        assert "Go on" not in page.evaluate("document.querySelector('#standing').innerText")
        _keep_first_screen(page, "complete")


def test_a_loop_stopped_by_its_breaker_says_so_and_how_to_reset_it(run_cli, project: Path,
                                                                   tmp_path: Path) -> None:
    loop_run(project, run_cli, run_id="loop-p", runner="pretender", ends="breaker_open")
    target = _page(run_cli, tmp_path / "loop.html", "--run", "loop-p")
    with open_page(target, width=WIDTH, height=HEIGHT) as page:
        assert "stopped: breaker open" in _on_first_screen(page, "#outcome")
        reason = _on_first_screen(page, "#outcome-reason")
        assert "circuit breaker open" in reason and "iterations in a row with no progress" \
            in reason
        command = _on_first_screen(page, '#next-steps [data-label="Go on"]')
        assert "clavain loop --reset-circuit --run loop-p" in command
        _keep_first_screen(page, "loop-breaker")


def test_a_sprint_leads_with_its_step_gate_and_the_verdicts_needing_attention(
        run_cli, project: Path, tmp_path: Path) -> None:
    sprint_with_verdicts_and_waiver(project, run_cli)
    target = _page(run_cli, tmp_path / "sprint.html")
    with open_page(target, width=WIDTH, height=HEIGHT) as page:
        assert "in progress" in _on_first_screen(page, "#outcome")
        assert "test" in _on_first_screen(page, "#current-step")
        assert "Gate" in _on_first_screen(page, ".sprint-lead .gate")
        verdict = _on_first_screen(page, ".sprint-lead .verdict-attention")
        assert "NEEDS_ATTENTION" in verdict and "fd-safety" in verdict
        assert page.evaluate("document.querySelector('#standing').compareDocumentPosition("
                             "document.querySelector('#route')) & 4") == 4
        _keep_first_screen(page, "sprint")
