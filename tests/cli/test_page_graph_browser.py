"""The workgraph picture in a real browser (Debian's headless Chromium, tests/browser.py) at
1,440 px, inside a section of the page's own stylesheet (`html.CSS`): pictures of 200 and 1,000
nodes shaped like a sprint scroll nothing sideways, even beside a classic 15 px scroll bar, and
every node box is inside the visible width. A screenshot of each is kept in test-artifacts/."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from clavain.page.graph_svg import draw
from clavain.page.html import CSS
from tests.browser import chromium_or_skip, open_page
from tests.unit.test_page_graph_fit import sprint

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("CLAVAIN_TEST_ARTIFACTS") or REPO / "test-artifacts")
SCROLL_BAR = 15  # px a classic (not overlay) scroll bar takes from the page's width


@pytest.fixture(autouse=True)
def _chromium() -> None:
    chromium_or_skip()


@pytest.mark.parametrize("size", [200, 1000])
def test_the_picture_fits_a_section_of_the_page_at_1440(size: int, tmp_path: Path) -> None:
    picture = draw(sprint(size))
    target = tmp_path / f"graph-{size}.html"
    target.write_text(f"<!doctype html><html><head><style>{CSS}</style></head><body><main>"
                      f'<section id="graph"><div class="scroll">{picture.svg}</div></section>'
                      "</main></body></html>", encoding="utf-8")
    with open_page(target, width=1440, height=900) as page:
        box = page.evaluate("(() => { const s = document.querySelector('#graph .scroll');"
                            " return [s.clientWidth, s.scrollWidth]; })()")
        client, scroll = box
        assert scroll == client and picture.width <= client - SCROLL_BAR
        rights = page.evaluate("[...document.querySelectorAll('svg [data-node-id]')]"
                               ".map(n => n.getBoundingClientRect().right)")
        assert len(rights) == picture.shown_nodes and max(rights) <= 1440 - SCROLL_BAR
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(ARTIFACTS / f"graph-{size}.png")
