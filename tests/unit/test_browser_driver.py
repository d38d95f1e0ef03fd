"""The test helper that drives a real headless Chromium over a DevTools pipe (tests/browser.py):
what it reports a page requested and logged, what it evaluates and captures, and that no browser
process outlives a `with open_page(...)` block, whether the block ends well or not."""

from __future__ import annotations

import socket
import struct
import time
from pathlib import Path

import pytest

from tests.browser import (
    BrowserError,
    EvaluateError,
    chromium_or_skip,
    find_chromium,
    group_members,
    open_page,
)


def write(tmp_path: Path, body: str, head: str = "", name: str = "page.html") -> Path:
    page = tmp_path / name
    page.write_text(f"<!doctype html><html><head><meta charset=utf-8>{head}</head>"
                    f"<body>{body}</body></html>", encoding="utf-8")
    return page


def fake_browser(tmp_path: Path, script: str) -> str:
    """An executable that stands where Chromium would, to make it misbehave on purpose."""
    path = tmp_path / "fake-chromium"
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(0o755)
    return str(path)


def assert_group_gone(pgid: int) -> None:
    """Nothing of the group runs any more, and its last zombies (helpers the kill orphaned) are
    reaped by init within a generous bound."""
    assert [m for m in group_members(pgid) if m[1] != "Z"] == []
    deadline = time.monotonic() + 30
    while group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert group_members(pgid) == []


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_a_plain_page_is_evaluated_and_asks_for_nothing_but_itself(tmp_path: Path) -> None:
    page_file = write(tmp_path, '<div id="x" data-k="v">hi</div>')
    with open_page(page_file) as page:
        assert page.evaluate("document.getElementById('x').textContent") == "hi"
        assert page.evaluate("document.getElementById('x').dataset.k") == "v"
        assert page.evaluate("({n: 1, l: [true, null]})") == {"n": 1, "l": [True, None]}
        assert page.requests == [page_file.resolve().as_uri()]
        assert page.console_errors == []


def test_every_outside_request_is_recorded(tmp_path: Path) -> None:
    page_file = write(tmp_path, '<img src="http://127.0.0.1:9/never.png">',
                      head='<link rel=stylesheet href="https://example.invalid/a.css">')
    with open_page(page_file) as page:
        assert page.requests[0] == page_file.resolve().as_uri()
        assert set(page.requests[1:]) == {"http://127.0.0.1:9/never.png",
                                          "https://example.invalid/a.css"}
        # and each failed load names its URL among the errors
        assert any("never.png" in error for error in page.console_errors)


@pytest.mark.parametrize(("script", "expected"), [
    ('console.error("boom", 42)', "boom 42"),
    ('console.assert(1 === 2, "sums")', "sums"),
    ('throw new Error("kaput")', "Error: kaput"),
])
def test_console_errors_and_uncaught_exceptions_are_caught(
        tmp_path: Path, script: str, expected: str) -> None:
    with open_page(write(tmp_path, f"<script>console.log('fine'); {script}</script>")) as page:
        assert len(page.console_errors) == 1
        assert expected in page.console_errors[0]


def test_a_load_refused_by_the_page_policy_is_seen_both_ways(tmp_path: Path) -> None:
    # Chromium 156 announces the image request (requestWillBeSent, then loadingFailed with
    # blockedReason "csp": it never leaves the browser) and logs the violation as an error.
    csp = "<meta http-equiv=Content-Security-Policy content=\"default-src 'none'; " \
          "style-src 'unsafe-inline'\"><style>p { color: red }</style>"
    with open_page(write(tmp_path, '<p>x</p><img src="http://127.0.0.1:9/x.png">', csp)) as page:
        assert "http://127.0.0.1:9/x.png" in page.requests
        [error] = page.console_errors
        assert "Content Security Policy" in error
        assert "http://127.0.0.1:9/x.png" in error
        assert page.evaluate("getComputedStyle(document.querySelector('p')).color") \
            == "rgb(255, 0, 0)"  # the inline style the policy allows did apply


def test_evaluate_names_what_the_expression_threw(tmp_path: Path) -> None:
    with open_page(write(tmp_path, "<p>x</p>")) as page:
        with pytest.raises(EvaluateError, match=r"nosuch\(\).*ReferenceError: nosuch"):
            page.evaluate("nosuch()")
        assert page.evaluate("1 + 1") == 2  # the page is still usable


def test_screenshot_is_a_png_of_the_whole_page(tmp_path: Path) -> None:
    with open_page(write(tmp_path, "<p>short</p>", name="short.html")) as page:
        short = png_size(page.screenshot(tmp_path / "short.png"))
    tall_body = '<div style="height: 3000px; background: linear-gradient(red, blue)"></div>'
    with open_page(write(tmp_path, tall_body, name="tall.html"), width=800, height=600) as page:
        tall = png_size(page.screenshot(tmp_path / "tall.png"))
    assert short == (1400, 900)
    assert tall[0] == 800
    assert tall[1] >= 3000


def test_reload_shows_the_file_as_rewritten_on_disk(tmp_path: Path) -> None:
    page_file = write(tmp_path, '<p id="v">first</p>')
    with open_page(page_file) as page:
        assert page.evaluate("document.getElementById('v').textContent") == "first"
        write(tmp_path, '<p id="v">second</p><script>console.error("after reload")</script>')
        page.reload()
        assert page.evaluate("document.getElementById('v').textContent") == "second"
        assert page.requests == [page_file.resolve().as_uri()] * 2  # collection goes on
        assert page.console_errors == ["after reload"]


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(BrowserError, match="ERR_FILE_NOT_FOUND"), \
            open_page(tmp_path / "absent.html"):
        pass


def test_a_page_that_never_finishes_loading_times_out_naming_the_wait(tmp_path: Path) -> None:
    # a server that takes the connection and never answers keeps the image, so the load, pending
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        page_file = write(tmp_path, f'<img src="http://127.0.0.1:{port}/slow.png">')
        started = time.monotonic()
        with pytest.raises(BrowserError, match=r"gave no load event for file://.* within 2 s"), \
                open_page(page_file, timeout=2):
            pass  # pragma: no cover - never reached
    assert time.monotonic() - started < 20  # returned, did not hang


def test_no_browser_process_outlives_the_block(tmp_path: Path) -> None:
    with open_page(write(tmp_path, "<p>x</p>")) as page:
        pgid, profile = page.pid, page._browser.root
        assert len(group_members(pgid)) > 1  # the browser and its helpers, all in one group
        assert profile.is_dir()
    assert not profile.exists()
    assert_group_gone(pgid)


def test_no_browser_process_outlives_a_block_that_raised(tmp_path: Path) -> None:
    with pytest.raises(ZeroDivisionError), open_page(write(tmp_path, "<p>x</p>")) as page:
        pgid, profile = page.pid, page._browser.root
        _ = 1 / 0
    assert not profile.exists()
    assert_group_gone(pgid)


def test_a_silent_browser_times_out_naming_what_was_awaited(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # it never reads a command nor answers, and a helper it started must die with it
    pid_file = tmp_path / "pid"
    monkeypatch.setenv("CLAVAIN_CHROMIUM", fake_browser(
        tmp_path, f'echo $$ > "{pid_file}"\nsleep 300 &\nexec sleep 300'))
    started = time.monotonic()
    waited = r"no reply to Target\.setDiscoverTargets within 1 s"
    with pytest.raises(BrowserError, match=waited), \
            open_page(write(tmp_path, "<p>x</p>"), timeout=1):
        pass  # pragma: no cover - never reached
    assert time.monotonic() - started < 20  # returned, did not hang
    assert_group_gone(int(pid_file.read_text()))  # setsid: the fake's pid is its group's id


def test_a_browser_that_dies_at_once_is_reported_with_its_stderr(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAVAIN_CHROMIUM",
                       fake_browser(tmp_path, 'echo "Missing X server or \\$DISPLAY" >&2; exit 3'))
    with pytest.raises(BrowserError, match=r"(?s)closed the DevTools pipe.*Missing X server"), \
            open_page(write(tmp_path, "<p>x</p>"), timeout=10):
        pass  # pragma: no cover - never reached


def test_a_missing_browser_skips_here_and_fails_in_ci(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAVAIN_CHROMIUM", str(tmp_path / "no-such-chromium"))
    assert find_chromium() == str(tmp_path / "no-such-chromium")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="not an executable file"):
        chromium_or_skip()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="Chromium tests cannot run in CI"):
        chromium_or_skip()
