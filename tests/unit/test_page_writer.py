"""The page writer's unhappy paths, on a real project folder: a page that cannot be written never
stops the run that keeps it, a watcher stopped while live leaves a still page, and a watched
subject that is not live is written once."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from clavain.page import writer
from clavain.page.subjects import Subject
from clavain.paths import StatePaths
from clavain.workgraph.claims import this_host


@pytest.fixture
def state(project: Path) -> StatePaths:
    found = StatePaths.discover()
    found.root.mkdir()
    return found


@pytest.fixture
def supervisor() -> Iterator[int]:
    """A live process standing in for a run's supervisor (its pid is what liveness checks)."""
    process = subprocess.Popen(["sleep", "60"])
    yield process.pid
    process.kill()
    process.wait()


def _record(state: StatePaths, run_id: str, *, status: str, pid: int) -> None:
    folder = state.runs / run_id
    folder.mkdir(parents=True)
    (folder / "supervisor.json").write_text(json.dumps(
        {"run_id": run_id, "graph_id": "default", "pid": pid, "host": this_host(),
         "status": status,
         "started_at": "2026-11-27T10:00:00.000Z", "runners": {}}))


def test_a_page_that_cannot_be_written_never_stops_the_run(state: StatePaths, tmp_path: Path,
                                                           supervisor: int) -> None:
    _record(state, "r1", status="running", pid=supervisor)
    folder = tmp_path / "pages"
    folder.mkdir()
    target = writer.check_target(state, folder / "run.html")
    page = writer.LivePage(state, "r1", target, interval=0.1)
    with page:
        folder.rmdir()  # the page's folder becomes a file while the run goes on
        folder.write_text("not a folder")
        threading.Event().wait(0.5)
    assert page.problem and "no folder" in page.problem
    assert not page.thread.is_alive()


def test_a_live_page_is_rewritten_then_left_still(state: StatePaths, tmp_path: Path,
                                                  supervisor: int) -> None:
    _record(state, "r2", status="running", pid=supervisor)
    target = writer.check_target(state, tmp_path / "run.html")
    with writer.LivePage(state, "r2", target, interval=0.1):
        deadline = threading.Event()
        for _ in range(50):
            if target.exists() and 'data-live="true"' in target.read_text():
                break
            deadline.wait(0.1)
        live = target.read_text()
        assert 'http-equiv="refresh"' in live and 'data-live="true"' in live
        record = state.runs / "r2" / "supervisor.json"
        record.write_text(record.read_text().replace('"running"', '"complete"'))
    still = target.read_text()
    assert 'data-live="false"' in still and 'http-equiv="refresh"' not in still


def test_a_watcher_stopped_while_live_leaves_a_still_page(state: StatePaths, tmp_path: Path,
                                                          supervisor: int) -> None:
    _record(state, "r3", status="running", pid=supervisor)
    target = writer.check_target(state, tmp_path / "w.html")
    stop = threading.Event()
    written: list[dict] = []

    def on_write(event: dict) -> None:
        written.append(event)
        if len(written) == 2:
            stop.set()

    last = writer.watch(state, Subject("run", "r3"), target, interval=0.1, stop=stop,
                        on_write=on_write)
    assert [event["live"] for event in written[:2]] == [True, True]
    assert last["live"] is True and len(written) == 3  # the still page, written last
    assert 'http-equiv="refresh"' not in target.read_text()


def test_a_subject_that_is_not_live_is_written_once(state: StatePaths, tmp_path: Path) -> None:
    _record(state, "r4", status="running", pid=2**22 + 12345)  # its supervisor is gone
    target = writer.check_target(state, tmp_path / "once.html")
    written: list[dict] = []
    writer.watch(state, Subject("run", "r4"), target, interval=0.1, on_write=written.append)
    assert [event["live"] for event in written] == [False]
    assert 'http-equiv="refresh"' not in target.read_text()


def test_the_run_writing_its_own_page_is_live_until_it_returns(state: StatePaths,
                                                               tmp_path: Path) -> None:
    """Inside `clavain run --html` the supervisor is this very process, which the state files'
    liveness test leaves out: the page says live (and reloads) until the run returns."""
    import os

    _record(state, "r5", status="running", pid=os.getpid())
    target = writer.check_target(state, tmp_path / "own.html")
    with writer.LivePage(state, "r5", target, interval=0.1):
        for _ in range(50):
            if target.exists():
                break
            threading.Event().wait(0.1)
        live = target.read_text()
    assert 'data-live="true"' in live and 'http-equiv="refresh"' in live
    assert 'data-live="false"' in target.read_text()
