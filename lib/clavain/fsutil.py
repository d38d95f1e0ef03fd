"""Crash-safe file writes: temp file in the same folder, fsync, os.replace; and writes inside
the state folder that never follow a symlink planted in it (a committed `.clavain/verdicts ->
~/.ssh` must not turn a verdict into a write elsewhere)."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any


def _mode_for(path: Path) -> int:
    """The replaced file's permissions, or what a plain `open(..., "w")` would give: mkstemp's
    0600 would silently tighten a user's .gitignore or hide verdicts from their group."""
    try:
        info = os.lstat(path)
        if not stat.S_ISLNK(info.st_mode):  # a planted symlink lends no mode (nor setuid)
            return info.st_mode & 0o777
    except FileNotFoundError:
        pass
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


class UnsafePathError(OSError):
    """A path inside the state folder goes through a symlink (or is not a folder)."""


def real_folder(root: Path, folder: Path, *, create_root: bool = True) -> Path:
    """Create `folder` and its parents up to `root` as real directories and return it.

    Every level strictly below `root` must be a real directory (or missing, then created); a
    symlink or a file there raises UnsafePathError. `root` itself may be anything the user
    chose (a symlinked `.clavain` is their decision, not something planted inside it).
    `create_root=False`: a missing `root` is FileNotFoundError (a person removed it; a
    background writer must not make it again).
    """
    relative = folder.relative_to(root)  # ValueError: not inside root, a caller's bug
    current = root
    if create_root:
        root.mkdir(parents=True, exist_ok=True)
    elif not root.is_dir():
        raise FileNotFoundError(f"{root} is gone")
    for part in relative.parts:
        current = current / part
        try:
            os.mkdir(current)
            continue
        except FileExistsError:
            pass
        info = os.lstat(current)
        if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
            raise UnsafePathError(f"{current} is a symlink or a file, not a folder; "
                                  "Clavain writes only into real folders inside its state")
    return folder


def open_inside(root: Path, path: Path, mode: str = "ab", *, create_root: bool = True) -> Any:
    """Open `path` (inside `root`) for appending or writing bytes without following a symlink
    at any level below `root`: `mode` is "ab" or "wb"."""
    real_folder(root, path.parent, create_root=create_root)
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    flags |= os.O_APPEND if mode == "ab" else os.O_TRUNC
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as exc:
        if os.path.islink(path):
            raise UnsafePathError(f"{path} is a symlink; Clavain does not write through it") \
                from exc
        raise
    return os.fdopen(fd, mode)


def read_regular(path: str | Path, max_bytes: int, *, from_end: bool = False,
                 follow_symlinks: bool = False) -> bytes | None:
    """At most `max_bytes` of `path` (its first, or with `from_end` its last) if it is a regular
    file; None when it is missing, a FIFO (which would block the reader), anything else, or -
    unless `follow_symlinks` - a symlink at its last part. For what hooks read and show the
    model: a planted link must not put another file in the context, nor a pipe hang the
    session."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except (OSError, ValueError):  # ValueError: a NUL in the path
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        if from_end:
            os.lseek(fd, max(0, info.st_size - max_bytes), os.SEEK_SET)
        chunks = []
        left = max_bytes
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def json_files(folder: str | Path, suffix: str,
               max_bytes: int = 1 << 20) -> list[tuple[Path, dict[str, Any]]]:
    """Every `*<suffix>` regular file of `folder` that holds a JSON object, by name: small
    records one writer keeps per thing (a dispatch, a resolution). Unreadable, non-object or
    non-regular entries (a FIFO, a symlink) are skipped; a missing folder is none."""
    try:
        names = sorted(name for name in os.listdir(folder) if name.endswith(suffix))
    except OSError:
        return []
    found = []
    for name in names:
        path = Path(folder) / name
        value = read_json_object(path, max_bytes)
        if value is not None:
            found.append((path, value))
    return found


def read_json_object(path: str | Path, max_bytes: int = 1 << 20) -> dict[str, Any] | None:
    """The JSON object a small regular file holds (`read_regular`'s guards: no FIFO, no
    symlink, a size cap), or None when it is missing, unreadable or not an object."""
    raw = read_regular(path, max_bytes)
    try:
        value = json.loads(raw) if raw is not None else None
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def write_atomic(path: Path, data: str | bytes, *, inside: Path | None = None,
                 mode: int | None = None, create_root: bool = True) -> None:
    """Replace `path` with `data` so a reader sees the old file or the new one, never a torn one.

    With `inside` (the state folder), every folder below it must be real (`real_folder`); the
    final rename replaces a symlink at `path` itself rather than writing through it. `mode`:
    the new file's permissions (default: the replaced file's, else what `open` would give).
    """
    if inside is not None:
        real_folder(inside, path.parent, create_root=create_root)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, _mode_for(path) if mode is None else mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(raw)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_json_atomic(path: Path, value: Any, *, inside: Path | None = None) -> None:
    write_atomic(path, json.dumps(value, indent=2, sort_keys=False) + "\n", inside=inside)
