"""What Clavain opens under `.clavain/` is a regular file or nothing, checked without blocking
(`fsutil.unsafe_file`, `read_state_file`, `open_inside`; `db.connect`, `connect_readonly`),
and the counters of a WAL database stay readable in a folder nobody may write."""

from __future__ import annotations

import json
import os
import socket
import threading
from pathlib import Path

import pytest

from clavain import config
from clavain.errors import ClavainError
from clavain.fsutil import (
    UnsafePathError,
    open_inside,
    read_regular,
    read_state_file,
    unsafe_file,
)
from clavain.store import db
from tests.unwritable import unwritable


def _in_a_thread(call, seconds: float = 20.0):
    """`call()`'s result or exception, failing the test if it has not returned in `seconds`
    (a blocked open would otherwise hang the whole run)."""
    box: dict = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:
            box["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"{call} blocked for {seconds} s"
    if "error" in box:
        raise box["error"]
    return box["value"]


def test_only_a_regular_file_or_nothing_may_be_opened(tmp_path: Path) -> None:
    regular = tmp_path / "config.json"
    regular.write_text("{}")
    assert unsafe_file(regular) is None
    assert unsafe_file(tmp_path / "missing.json") is None
    os.mkfifo(tmp_path / "fifo")
    assert "is a FIFO, not a regular file" in unsafe_file(tmp_path / "fifo")
    (tmp_path / "link").symlink_to(regular)
    assert unsafe_file(tmp_path / "link") == (
        f"{tmp_path / 'link'} is a symlink (to {regular}); Clavain does not follow one there: "
        "replace it with a real file, or remove it")
    (tmp_path / "null").symlink_to("/dev/null")
    assert "is a symlink (to /dev/null)" in unsafe_file(tmp_path / "null")
    listening = socket.socket(socket.AF_UNIX)
    try:
        listening.bind(str(tmp_path / "sock"))
        assert "is a socket" in unsafe_file(tmp_path / "sock")
    finally:
        listening.close()


def test_a_state_file_that_is_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "checkpoint.json"
    os.mkfifo(fifo)
    with pytest.raises(UnsafePathError, match="is a FIFO"):
        _in_a_thread(lambda: read_state_file(fifo))
    assert _in_a_thread(lambda: read_regular(fifo, 100)) is None
    # Writing (hooks.log, every lock file): a FIFO with no reader and one with a reader.
    root = tmp_path / ".clavain"
    (root / "logs").mkdir(parents=True)
    os.mkfifo(root / "logs" / "hooks.log")
    with pytest.raises(UnsafePathError, match="is a FIFO"):
        _in_a_thread(lambda: open_inside(root, root / "logs" / "hooks.log", "ab"))
    reader = os.open(root / "logs" / "hooks.log", os.O_RDONLY | os.O_NONBLOCK)
    try:
        with pytest.raises(UnsafePathError, match="is a FIFO"):
            _in_a_thread(lambda: open_inside(root, root / "logs" / "hooks.log", "ab"))
    finally:
        os.close(reader)


def test_a_state_file_read_is_bounded(tmp_path: Path) -> None:
    assert read_state_file(tmp_path / "missing.json") is None
    big = tmp_path / "config.json"
    big.write_bytes(b" " * 101)
    assert read_state_file(big, 101) == b" " * 101
    with pytest.raises(UnsafePathError, match="is over 100 bytes"):
        read_state_file(big, 100)


@pytest.mark.parametrize("kind", ["fifo", "symlink"])
def test_the_config_reader_names_the_file_and_the_fix(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "config.json"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        outside = tmp_path / "elsewhere.json"
        outside.write_text(json.dumps({"checks": []}))
        path.symlink_to(outside)
    with pytest.raises(ClavainError) as refused:
        _in_a_thread(lambda: config.load(path))
    assert str(refused.value).startswith(f"{path} is a ")
    assert "remove it" in str(refused.value)


@pytest.mark.parametrize("side", ["", "-wal", "-shm", "-journal"])
@pytest.mark.parametrize("opener", ["connect", "connect_readonly"])
def test_a_fifo_database_or_side_file_is_refused_without_blocking(tmp_path: Path, side: str,
                                                                  opener: str) -> None:
    path = tmp_path / "state.sqlite"
    db.connect(path).close()  # a real database; then one of its files is a FIFO
    target = Path(f"{path}{side}")
    target.unlink(missing_ok=True)
    os.mkfifo(target)
    with pytest.raises(UnsafePathError, match=f"{target.name} is a FIFO"):
        _in_a_thread(lambda: getattr(db, opener)(path))
    assert db.unsafe_database(path) == unsafe_file(target)


def test_a_symlinked_database_is_never_opened(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.sqlite"
    db.connect(outside).close()
    before = outside.read_bytes()
    link = tmp_path / "state.sqlite"
    link.symlink_to(outside)
    for opener in (db.connect, db.connect_readonly):
        with pytest.raises(UnsafePathError, match="is a symlink"):
            opener(link)
    assert outside.read_bytes() == before


def test_a_wal_database_in_an_unwritable_folder_is_read_immutable(tmp_path: Path) -> None:
    folder = tmp_path / "state"
    folder.mkdir()
    path = folder / "state.sqlite"
    conn = db.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()  # the last connection: the WAL is checkpointed, -wal and -shm removed
    assert not Path(f"{path}-shm").exists()
    with unwritable(folder):
        # What mode=ro alone does there: no -shm can be made, so nothing can be read.
        plain = db._open_readonly(str(path), 1000, False)
        try:
            with pytest.raises(db.sqlite3.OperationalError, match="unable to open"):
                plain.execute("PRAGMA user_version").fetchone()
        finally:
            plain.close()
        conn = db.connect_readonly(path)
        try:
            assert conn.execute("PRAGMA user_version").fetchone()[0] == db.latest_version()
        finally:
            conn.close()
        assert not Path(f"{path}-shm").exists()


def test_a_missing_database_is_not_read_immutable(tmp_path: Path) -> None:
    with pytest.raises(db.sqlite3.OperationalError, match="unable to open"):
        db.connect_readonly(tmp_path / "missing.sqlite")
    assert not (tmp_path / "missing.sqlite").exists()
