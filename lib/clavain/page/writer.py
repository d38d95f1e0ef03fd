"""Writing the HTML page: once, or again every few seconds while its subject is live (`--watch`,
`clavain run --html`), always atomically, so a browser reloading it sees the old page or the new
one. No server and no daemon: the watcher is the command the person started (or a thread of the
run), and it stops when the run or sprint does. While live the page asks the browser to reload it;
the last page written does not.

The file is a person's, so it is checked first: its name ends in `.html`, its folder exists and
is outside the state folder, and a file already there is one Clavain wrote (else it is left
alone)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clavain.errors import ClavainError
from clavain.page.html import GENERATOR
from clavain.page.subjects import Subject
from clavain.paths import StatePaths

DEFAULT_INTERVAL = 3.0


def check_target(state: StatePaths, path: Path) -> Path:
    """The absolute path to write, or ClavainError saying why not."""
    target = Path(os.path.abspath(path))
    if target.suffix.lower() not in (".html", ".htm"):
        raise ClavainError(f"the page's file name must end in .html, got {str(path)!r}")
    if not target.parent.is_dir():
        raise ClavainError(f"no folder {target.parent} for the page (it is not created)")
    real_parent = Path(os.path.realpath(target.parent))
    state_root = Path(os.path.realpath(state.root))
    if real_parent == state_root or state_root in real_parent.parents:
        raise ClavainError(f"the page is not written into the state folder {state.root}")
    if os.path.lexists(target):
        if not target.is_file() or target.is_symlink():
            raise ClavainError(f"{target} is not a regular file; the page replaces only a page "
                               "Clavain wrote")
        with open(target, "rb") as handle:
            head = handle.read(2048)
        if GENERATOR.encode() not in head:
            raise ClavainError(f"{target} exists and is not a page Clavain wrote; pick another "
                               "file name")
    return target


def subject_for(state: StatePaths, *, run: str | None = None, sprint: str | None = None,
                graph: str | None = None) -> Subject:
    from clavain.page.collect import choose
    from clavain.store.graph_db import open_for_reading

    conn = open_for_reading(state)
    try:
        return choose(state, conn, run=run, sprint=sprint, graph=graph)
    finally:
        conn.close()


def write_page(state: StatePaths, subject: Subject, target: Path, *,
               refresh_seconds: float | None = None, live: bool | None = None
               ) -> dict[str, Any]:
    """Read `subject` now and replace `target` with its page; what was written. `live`: the
    caller knows better than the state files (the run that writes its own page is live until
    it returns). The target is checked again before each write: its folder may have been
    swapped for a link into the state folder since the last one."""
    from clavain.fsutil import write_atomic
    from clavain.page.collect import gather
    from clavain.page.html import render
    from clavain.store.graph_db import open_for_reading

    conn = open_for_reading(state)
    try:
        page = gather(state, conn, subject)
    finally:
        conn.close()
    if live is not None:
        page["live"] = live
    text = render(page, refresh_seconds=refresh_seconds)
    write_atomic(check_target(state, target), text)
    nodes = (page["graph"] or {}).get("nodes") or []
    return {"path": str(target), "subject": page["subject"], "live": page["live"],
            "nodes": len(nodes), "bytes": len(text.encode("utf-8")),
            "problems": page["problems"], "generated_at": page["generated_at"]}


def watch(state: StatePaths, subject: Subject, target: Path, *,
          interval: float = DEFAULT_INTERVAL, stop: threading.Event | None = None,
          on_write: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Rewrite the page every `interval` seconds while the subject is live; then once more,
    finished. Interrupted (Ctrl-C, `stop` set), the last page written is a still one."""
    stop = stop or threading.Event()
    written: dict[str, Any] = {}
    try:
        while True:
            written = write_page(state, subject, target, refresh_seconds=interval)
            if on_write is not None:
                on_write(written)
            if not written["live"] or stop.wait(interval):
                break
    finally:
        if not written or written["live"]:
            written = write_page(state, subject, target)
            if on_write is not None:
                on_write(written)
    return written


class LivePage:
    """The page of a `clavain run`, rewritten by a thread of the run itself every `interval`
    seconds once the run has a record, and a last time when it ends (`close`)."""

    def __init__(self, state: StatePaths, run_id: str, target: Path, *,
                 interval: float = DEFAULT_INTERVAL) -> None:
        self.state, self.target, self.interval = state, target, interval
        self.subject = Subject("run", run_id)
        self.stop = threading.Event()
        self.problem: str | None = None
        self.thread = threading.Thread(target=self._rewrite, name="clavain-page", daemon=True)

    def __enter__(self) -> LivePage:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
        if self._started():
            try:
                write_page(self.state, self.subject, self.target, live=False)
            except Exception as error:  # the run's own report and exit code come first
                self.problem = f"{type(error).__name__}: {error}"

    def _started(self) -> bool:
        from clavain.supervisor.run_record import RECORD_NAME, run_dir

        return (run_dir(self.state, self.subject.id) / RECORD_NAME).is_file()

    def _rewrite(self) -> None:
        while not self.stop.wait(self.interval):
            if not self._started():
                continue
            try:
                # This process is the run's supervisor: it is live until `supervise` returns
                # (the state files cannot say so; their liveness test excludes itself).
                write_page(self.state, self.subject, self.target,
                           refresh_seconds=self.interval, live=True)
            except Exception as error:  # a page that cannot be written never stops the run
                self.problem = f"{type(error).__name__}: {error}"
