"""A real headless Chromium for tests, driven over the DevTools protocol on a pipe
(`--remote-debugging-pipe`: commands go in on the browser's fd 3, replies and events come out on
its fd 4, one JSON object per NUL-terminated message). Stdlib only, no port, no websocket: every
`open_page` starts its own browser with its own temporary profile, so pytest-xdist workers never
share one, and its whole process group is gone when the `with` block ends, whatever happened."""

from __future__ import annotations

import base64
import fcntl
import json
import os
import queue
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
SETTLE = 0.2  # after the load event: late console messages and failed loads still arrive


class BrowserError(RuntimeError):
    """The browser did not answer, went away, or refused a command."""


class EvaluateError(AssertionError):
    """The page's JavaScript threw while a test evaluated an expression."""


def find_chromium() -> str | None:
    """`$CLAVAIN_CHROMIUM` if set, else the first Chromium or Chrome on PATH."""
    chosen = os.environ.get("CLAVAIN_CHROMIUM")
    if chosen:
        return shutil.which(chosen) or chosen
    return next((found for name in NAMES if (found := shutil.which(name))), None)


def chromium_or_skip() -> str:
    """The browser binary; a missing one skips the test with the reason, and fails it in CI
    (CI=true) so browser tests can never silently vanish there (as `pg_cluster` does)."""
    binary = find_chromium()
    if binary is None:
        reason = "no Chromium: set CLAVAIN_CHROMIUM or apt-get install chromium"
    elif not os.access(binary, os.X_OK):
        reason = f"Chromium {binary!r} (CLAVAIN_CHROMIUM) is not an executable file"
    else:
        return binary
    if os.environ.get("CI"):
        pytest.fail(f"Chromium tests cannot run in CI: {reason}")
    pytest.skip(reason)


class Page:
    """One tab: what it requested and logged since it was opened, and a few commands on it."""

    def __init__(self, browser: _Browser, session: str, url: str) -> None:
        self._browser, self._session, self.url = browser, session, url
        self.pid = browser.pid  # also the browser's process group
        self.requests: list[str] = []
        self.console_errors: list[str] = []
        self._loaded = False

    def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return self._browser.send(method, params, session=self._session, page=self)

    def evaluate(self, expression: str) -> Any:
        reply = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                               "awaitPromise": True})
        if "exceptionDetails" in reply:
            text = _exception_text(reply["exceptionDetails"])
            raise EvaluateError(f"{expression!r} threw: {text}")
        return reply["result"].get("value")

    def screenshot(self, path: Path) -> Path:
        size = self.send("Page.getLayoutMetrics")["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
        shot = self.send("Page.captureScreenshot",
                         {"format": "png", "captureBeyondViewport": True, "clip": clip})
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    def reload(self) -> None:
        """Load the file again (as it is on disk now), keeping what was collected so far."""
        self._navigate("Page.reload", {"ignoreCache": True})

    def _navigate(self, method: str, params: dict[str, Any]) -> None:
        self._loaded = False
        reply = self.send(method, params)
        if reply.get("errorText"):
            raise BrowserError(f"{self.url} did not load: {reply['errorText']}")
        self._browser.pump(self, f"load event for {self.url}", lambda: self._loaded)
        self._browser.pump(self, "", None, wait=SETTLE)

    def _on_event(self, method: str, params: dict[str, Any]) -> None:
        if method == "Page.loadEventFired":
            self._loaded = True
        elif method == "Network.requestWillBeSent":  # also for a load CSP then blocks
            self.requests.append(params["request"]["url"])
        elif method == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
            self.console_errors.append(" ".join(_describe(arg) for arg in params["args"]))
        elif method == "Runtime.exceptionThrown":
            self.console_errors.append(_exception_text(params["exceptionDetails"]))
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            entry, url = params["entry"], params["entry"].get("url", "")
            # "Failed to load resource: net::ERR_…" does not say which one
            self.console_errors.append(f"{entry['text']} ({url})" if url else entry["text"])
            # a failed load Network did not report (none seen in Chromium 156) is still a request
            if url and entry.get("source") == "network" and url not in self.requests:
                self.requests.append(url)


class _Browser:
    """The process, its pipe ends, and a reader thread so that no read can block a test."""

    def __init__(self, binary: str, width: int, height: int, timeout: float) -> None:
        self.timeout = timeout
        self.root = Path(tempfile.mkdtemp(prefix="clavain-chromium-"))
        self.log = self.root / "stderr.log"
        self.inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.next_id = 0
        args = [binary, f"--user-data-dir={self.root / 'profile'}", "--headless=new",
                "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--disable-extensions", "--remote-debugging-pipe",
                # a scrollbar would take 15 px off the width of a tall page, and of its screenshot
                "--hide-scrollbars", f"--window-size={width},{height}", "about:blank"]
        to_browser_r, self.to_browser = os.pipe()
        self.from_browser, from_browser_w = os.pipe()
        # Copies above 9 so that moving them onto 3 and 4 cannot overwrite one another; they and
        # every other descriptor of this process are close-on-exec, so only 0-4 reach Chromium.
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (to_browser_r, from_browser_w)]
        try:
            # posix_spawn, not fork + preexec_fn: safe beside threads, and no Popen bookkeeping
            # descriptor can land on 3 or 4 first. setsid: one group to kill, browser and helpers.
            self.pid = os.posix_spawn(binary, args, dict(os.environ), setsid=True, file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_OPEN, 1, str(self.log), os.O_WRONLY | os.O_CREAT, 0o600),
                (os.POSIX_SPAWN_DUP2, 1, 2),
                (os.POSIX_SPAWN_DUP2, high[0], 3),
                (os.POSIX_SPAWN_DUP2, high[1], 4)])
        except OSError as error:
            os.close(self.to_browser)
            os.close(self.from_browser)
            shutil.rmtree(self.root, ignore_errors=True)
            raise BrowserError(f"cannot start Chromium {binary!r}: {error}") from error
        finally:
            for fd in (to_browser_r, from_browser_w, *high):
                os.close(fd)  # else the reader would never see end-of-file when Chromium dies
        self.reader = threading.Thread(target=self._read, daemon=True, name=f"cdp-{self.pid}")
        self.reader.start()

    def _read(self) -> None:
        partial: list[bytes] = []  # a screenshot is megabytes: no re-splitting what was read
        try:
            while chunk := os.read(self.from_browser, 1 << 20):
                *ends, rest = chunk.split(b"\0")
                for end in ends:
                    self.inbox.put(json.loads(b"".join([*partial, end])))
                    partial = []
                partial.append(rest)
        finally:
            self.inbox.put(None)  # the browser closed its end (exited, crashed), or garbage

    def stderr_tail(self) -> str:
        """The end of Chromium's stderr, without the D-Bus complaints of a machine with no bus."""
        with suppress(OSError):
            lines = self.log.read_text(errors="replace").splitlines()
            return "\n".join([line for line in lines if ":dbus/" not in line][-15:])
        return ""

    def error(self, what: str) -> BrowserError:
        return BrowserError(f"Chromium {what}; its stderr ends:\n{self.stderr_tail()}")

    def _next(self, deadline: float, waiting_for: str) -> dict[str, Any] | None:
        """The next message, or None once `deadline` passed."""
        try:
            message = self.inbox.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            return None
        if message is None:
            self.inbox.put(None)  # stays closed for whoever asks next
            raise self.error(f"closed the DevTools pipe while we waited for {waiting_for}")
        return message

    def send(self, method: str, params: dict[str, Any] | None = None, *, session: str = "",
             page: Page | None = None) -> dict[str, Any]:
        self.next_id += 1
        command: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            command["sessionId"] = session
        try:  # a few hundred bytes, far below the pipe's buffer: cannot block
            os.write(self.to_browser, json.dumps(command).encode() + b"\0")
        except BrokenPipeError:
            raise self.error(f"closed the DevTools pipe: cannot send {method}") from None
        deadline = time.monotonic() + self.timeout
        while True:
            message = self._next(deadline, f"reply to {method}")
            if message is None:
                raise self.error(f"gave no reply to {method} within {self.timeout:g} s")
            if message.get("id") != self.next_id:
                self._dispatch(message, page)
            elif "error" in message:
                raise BrowserError(f"{method} failed: {message['error']}")
            else:
                return message.get("result", {})

    def _dispatch(self, message: dict[str, Any], page: Page | None) -> None:
        # before the page exists only target events arrive, none of them the page's
        if page is not None and "method" in message and message.get("sessionId") == page._session:
            page._on_event(message["method"], message.get("params", {}))

    def pump(self, page: Page, waiting_for: str, done: Callable[[], bool] | None,
             wait: float | None = None) -> None:
        """Hand events to `page` until `done()`, or for `wait` seconds when `done` is None."""
        deadline = time.monotonic() + (self.timeout if wait is None else wait)
        while done is None or not done():
            message = self._next(deadline, waiting_for)
            if message is None:
                if done is None:
                    return
                raise self.error(f"gave no {waiting_for} within {self.timeout:g} s")
            self._dispatch(message, page)

    def close(self) -> None:
        """Kill the whole group, reap the browser, and return once no process of the group is
        alive. Its helpers are the browser's children: orphaned by the kill, they stay zombies
        until init reaps them, which this machine's init does only every second or two."""
        deadline = time.monotonic() + 10
        with suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)
        with suppress(ChildProcessError):
            os.waitpid(self.pid, 0)  # SIGKILL cannot be ignored: this returns
        while time.monotonic() < deadline and any(s != "Z" for _, s in group_members(self.pid)):
            time.sleep(0.02)
        os.close(self.to_browser)
        # Only once the reader saw end-of-file: closing under a blocked read could let it read
        # a descriptor number reused by someone else.
        self.reader.join(max(0.0, deadline - time.monotonic()))
        if not self.reader.is_alive():
            os.close(self.from_browser)
        shutil.rmtree(self.root, ignore_errors=True)


def group_members(pgid: int) -> list[tuple[int, str]]:
    """(pid, state) of every process in group `pgid`, zombies ("Z") included (Linux /proc)."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with suppress(OSError, IndexError, ValueError):  # gone meanwhile
                fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[2]) == pgid:
                    found.append((int(entry.name), fields[0]))
    return found


@contextmanager
def open_page(path: Path, *, width: int = 1400, height: int = 900,
              timeout: float = 30.0) -> Iterator[Page]:
    """A fresh browser showing the file `path`, loaded and settled."""
    browser = _Browser(chromium_or_skip(), width, height, timeout)
    try:
        browser.send("Target.setDiscoverTargets", {"discover": True})
        target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = browser.send("Target.attachToTarget",
                               {"targetId": target, "flatten": True})["sessionId"]
        page = Page(browser, session, path.resolve().as_uri())
        # Everything enabled before navigating, so the file's own request and its first
        # console messages are seen; one CSS pixel per device pixel, for screenshot sizes.
        for method in ("Network.enable", "Runtime.enable", "Log.enable", "Page.enable"):
            page.send(method)
        page.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        page._navigate("Page.navigate", {"url": page.url})
        yield page
    finally:
        browser.close()


def _describe(arg: dict[str, Any]) -> str:
    return str(arg["value"]) if "value" in arg else arg.get("description", arg.get("type", ""))


def _exception_text(details: dict[str, Any]) -> str:
    exception = details.get("exception") or {}
    return exception.get("description") or details.get("text", "unknown exception")
