import json
import os
import stat
from pathlib import Path

import pytest

from clavain.fsutil import write_atomic, write_json_atomic


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_new_file_gets_the_umask_mode(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        write_atomic(tmp_path / "a" / "new.txt", "x")
    finally:
        os.umask(old)
    assert _mode(tmp_path / "a" / "new.txt") == 0o644


def test_replacing_keeps_the_existing_mode(tmp_path: Path) -> None:
    target = tmp_path / ".gitignore"
    target.write_text("old\n")
    target.chmod(0o640)
    write_atomic(target, "new\n")
    assert target.read_text() == "new\n" and _mode(target) == 0o640


def test_failed_write_leaves_old_content_and_no_temp_files(tmp_path: Path, monkeypatch) -> None:
    target = tmp_path / "state.json"
    write_json_atomic(target, {"v": 1})

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        write_json_atomic(target, {"v": 2})
    assert json.loads(target.read_text()) == {"v": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]
