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


def test_writes_inside_the_state_folder_never_follow_a_planted_symlink(tmp_path: Path) -> None:
    from clavain.fsutil import UnsafePathError, open_inside, real_folder

    root = tmp_path / ".clavain"
    outside = tmp_path / "outside"
    outside.mkdir()
    root.mkdir()
    (root / "verdicts").symlink_to(outside)
    with pytest.raises(UnsafePathError):
        write_atomic(root / "verdicts" / "a.json", "{}", inside=root)
    with pytest.raises(UnsafePathError):
        open_inside(root, root / "verdicts" / "deep" / "x.log")
    assert list(outside.iterdir()) == []
    # A symlinked file at the final name is replaced, not written through.
    (root / "logs").mkdir()
    target = outside / "victim.txt"
    target.write_text("keep")
    (root / "logs" / "hooks.log").symlink_to(target)
    with pytest.raises(UnsafePathError):
        open_inside(root, root / "logs" / "hooks.log")
    write_atomic(root / "logs" / "hooks.log", "new", inside=root)
    assert target.read_text() == "keep"
    assert (root / "logs" / "hooks.log").read_text() == "new"
    assert real_folder(root, root / "runs" / "r1" / "n1").is_dir()


def test_the_bytes_are_synced_before_the_new_name_points_at_them(tmp_path: Path,
                                                                  monkeypatch) -> None:
    """A crash right after the rename must not leave the name on an empty file: the temporary
    file's data is synced first, and it is the very file then renamed."""
    target = tmp_path / "verdict.json"
    target.write_text("old\n")
    steps: list[tuple[str, str]] = []
    real_replace, real_fsync = os.replace, os.fsync

    def fsync(fd: int) -> None:
        steps.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")
                      if os.path.isdir("/proc/self/fd") else "?"))
        real_fsync(fd)

    def replace(src, dst) -> None:
        steps.append(("replace", os.fspath(src)))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    write_atomic(target, "new\n")
    assert [step for step, _ in steps] == ["fsync", "replace"]
    if steps[0][1] != "?":
        assert steps[0][1] == steps[1][1]
    assert target.read_text() == "new\n"
