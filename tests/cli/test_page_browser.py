"""The HTML page in a real browser: Debian's headless Chromium (tests/browser.py) opens the file
of a finished run of the demo, of a sprint with verdicts and a waiver, and of a loop run, and the
tests read the DOM it built — node ids, lanes, budget rows — check that the page asked for
nothing but itself and logged no error, and keep a screenshot of each in test-artifacts/
(`$CLAVAIN_TEST_ARTIFACTS` elsewhere)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.browser import chromium_or_skip, open_page
from tests.page_scenarios import finished_run, loop_run, sprint_with_verdicts_and_waiver

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("CLAVAIN_TEST_ARTIFACTS") or REPO / "test-artifacts")


@pytest.fixture(autouse=True)
def _chromium() -> None:
    chromium_or_skip()


def _write(run_cli, target: Path, *args: str) -> Path:
    result = run_cli("report", "--html", str(target), *args)
    assert result.returncode == 0, result.stderr
    return target


def _check_offline(page, target: Path, name: str) -> None:
    """Nothing but the file itself was requested, nothing was logged as an error, and a
    screenshot is kept."""
    assert page.requests == [target.resolve().as_uri()], page.requests
    assert page.console_errors == []
    assert page.evaluate("document.scripts.length") == 0
    ARTIFACTS.mkdir(exist_ok=True)
    shot = page.screenshot(ARTIFACTS / f"page-{name}.png")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_demo_runs_page_shows_two_workers_side_by_side(run_cli, project: Path,
                                                           tmp_path: Path) -> None:
    finished_run(project, run_cli)
    target = _write(run_cli, tmp_path / "demo.html", "--run", "demo")
    with open_page(target) as page:
        nodes = page.evaluate("[...document.querySelectorAll('svg [data-node-id]')]"
                              ".map(n => n.dataset.nodeId).sort()")
        assert nodes == sorted(["task-greet", "task-farewell", "task-cli", "verify-task-greet",
                                "verify-task-farewell", "verify-task-cli", "integrate",
                                "final-verify"])
        lanes = page.evaluate("[...document.querySelectorAll('svg.timeline .lane')]"
                              ".map(l => [l.dataset.lane, l.querySelectorAll('.bar').length])")
        assert [lane for lane, _ in lanes] == ["worker 1", "worker 2"]
        assert all(bars >= 1 for _, bars in lanes) and sum(b for _, b in lanes) == 8
        # Side by side: a bar of worker 1 and one of worker 2 overlap on the screen.
        overlap = page.evaluate("""(() => {
            const spans = l => [...document.querySelectorAll(
                `svg.timeline .lane[data-lane="${l}"] .bar rect`)].map(r => {
                const b = r.getBoundingClientRect(); return [b.left, b.right]; });
            return spans('worker 1').some(([a, b]) => spans('worker 2').some(
                ([c, d]) => a < d && c < b)); })()""")
        assert overlap is True
        budgets = page.evaluate("[...document.querySelectorAll('table.budgets tbody tr')]"
                                ".map(r => r.cells[0].textContent)")
        assert budgets == ["Bash commands", "Test runs", "Web requests", "Tokens", "Dollars"]
        # The picture is laid out: every node box has a real size on the screen.
        sizes = page.evaluate("[...document.querySelectorAll('svg [data-node-id] > rect, "
                              "svg [data-node-id] > path, svg [data-node-id] > polygon')]"
                              ".map(e => e.getBoundingClientRect().width)")
        assert sizes and min(sizes) > 20
        _check_offline(page, target, "demo-run")


def test_a_sprints_page_shows_its_route_waiver_and_verdicts(run_cli, project: Path,
                                                            tmp_path: Path) -> None:
    sprint_with_verdicts_and_waiver(project, run_cli)
    target = _write(run_cli, tmp_path / "sprint.html")
    with open_page(target) as page:
        steps = page.evaluate("[...document.querySelectorAll('ol.route li')]"
                              ".map(li => [li.dataset.step, li.dataset.state])")
        assert ["execute", "waived"] in steps and ["test", "current"] in steps
        waiver = page.evaluate("document.querySelector('table.waivers tbody tr').innerText")
        assert "ran it on staging by hand" in waiver and "a person at /dev/" in waiver
        verdicts = page.evaluate("[...document.querySelectorAll('table.verdicts tbody tr')]"
                                 ".map(r => [r.cells[0].textContent, r.cells[1].textContent])")
        assert sorted(verdicts) == [["clavain:fd-quality", "CLEAN"],
                                    ["clavain:fd-safety", "NEEDS_ATTENTION"]]
        # An agent's markup stayed text: no image was made of it.
        assert page.evaluate("document.images.length") == 0
        assert page.evaluate("document.querySelector('#liveness').dataset.live") == "true"
        _check_offline(page, target, "sprint")


def test_a_loop_runs_page_shows_its_iterations(run_cli, project: Path, tmp_path: Path) -> None:
    loop_run(project, run_cli)
    target = _write(run_cli, tmp_path / "loop.html", "--run", "loop-t")
    with open_page(target) as page:
        rows = page.evaluate("document.querySelectorAll('table.iterations tbody tr').length")
        assert rows == 4
        lanes = page.evaluate("[...document.querySelectorAll('svg.timeline .lane')]"
                              ".map(l => l.dataset.lane)")
        assert lanes == ["loop loop-t"]
        _check_offline(page, target, "loop")


def test_a_page_rewritten_on_disk_shows_the_new_state_on_reload(run_cli, project: Path,
                                                                tmp_path: Path) -> None:
    assert run_cli("init").returncode == 0
    assert run_cli("graph", "add", "--id", "first", "--type", "task",
                   "--title", "one").returncode == 0
    target = _write(run_cli, tmp_path / "graph.html", "--graph", "default")
    with open_page(target) as page:
        count = "document.querySelectorAll('svg [data-node-id]').length"
        assert page.evaluate(count) == 1
        assert run_cli("graph", "add", "--id", "second", "--type", "task", "--title", "two",
                       "--dep", "first").returncode == 0
        _write(run_cli, target, "--graph", "default")
        page.reload()
        assert page.evaluate(count) == 2
