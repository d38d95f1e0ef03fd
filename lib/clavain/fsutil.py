"""Crash-safe file writes: temp file in the same folder, fsync, os.replace; writes inside the
state folder that never follow a symlink planted in it (a committed `.clavain/verdicts ->
~/.ssh` must not turn a verdict into a write elsewhere); and the one rule for what Clavain
opens there (`unsafe_file`): a regular file or nothing, never a FIFO (whose open waits for a
writer for ever), a device or a symlink — checked without blocking, for every hook and command.

The database's open (`store.db`) checks here on every tool call, so this module imports only
`os` and `stat` up front (json, tempfile, pathlib and typing cost more than the whole check).
"""

from __future__ import annotations

import os
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

# What a state file (config, checkpoint, a record) may weigh: they are a few KB.
STATE_FILE_MAX_BYTES = 1 << 20


def _mode_for(path: Path) -> int:
    """The replaced file's permissions, or what a plain `open(..., "w")` would give: the temporary
    file's 0600 would silently tighten a user's .gitignore or hide verdicts from their group."""
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
    """A path inside the state folder goes through a symlink, or is not what Clavain may open
    there (a FIFO, a device, a file where a folder goes). The message names it and the fix."""


def unsafe_file(path: str | os.PathLike[str]) -> str | None:
    """Why Clavain must not open `path`, or None: a regular file, nothing there yet, or what
    the open itself will refuse (a folder). `lstat` only, so this never blocks: a FIFO's open
    would wait for a writer for ever (a hook past the host's timeout lets the call run
    uncounted), a device may never answer, and a symlink would take a read or a write out of
    the state folder."""
    try:
        mode = os.lstat(path).st_mode
    except (OSError, ValueError):  # missing, or the open will say why; ValueError: a NUL
        return None
    if stat.S_ISLNK(mode):
        try:
            target = os.readlink(path)
        except OSError:
            target = "?"
        return (f"{os.fspath(path)} is a symlink (to {target}); Clavain does not follow one "
                "there: replace it with a real file, or remove it")
    kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode)
            or stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else None)
    if kind is None:
        return None
    return (f"{os.fspath(path)} is {kind}, not a regular file; Clavain does not open it (it "
            "could wait for ever): remove it")


def require_regular(path: str | os.PathLike[str]) -> None:
    """Raise UnsafePathError when `unsafe_file` says `path` must not be opened."""
    problem = unsafe_file(path)
    if problem is not None:
        raise UnsafePathError(problem)


def open_regular(path: str | os.PathLike[str], flags: int, *,
                  follow_symlinks: bool = False) -> int:
    """A descriptor on `path`, opened without blocking (O_NONBLOCK: a FIFO's open returns at
    once) and, unless `follow_symlinks`, without following a symlink at its last part; raises
    UnsafePathError when it is not a regular file (FileNotFoundError when missing)."""
    if not follow_symlinks:
        require_regular(path)
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), 0o666)
    except OSError as exc:
        import errno  # built in: free

        # ELOOP: a symlink put there since the check; ENXIO: a FIFO opened for writing.
        if exc.errno in (errno.ELOOP, errno.ENXIO):
            raise UnsafePathError(unsafe_file(path) or f"{os.fspath(path)} is not a regular "
                                  "file; Clavain does not open it") from exc
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped in since the check
            raise UnsafePathError(unsafe_file(path) or f"{os.fspath(path)} is not a regular "
                                  "file; Clavain does not open it")
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_state_file(path: str | os.PathLike[str],
                    max_bytes: int = STATE_FILE_MAX_BYTES) -> bytes | None:
    """The bytes of a small file of the state folder (config, checkpoint, a record), None when
    it is missing. Raises UnsafePathError when it is a symlink, a FIFO, a device or over
    `max_bytes` — never blocking on it — and OSError when it cannot be read."""
    try:
        fd = open_regular(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        raw = read_up_to(fd, max_bytes + 1)
    finally:
        os.close(fd)
    if len(raw) > max_bytes:
        raise UnsafePathError(f"{os.fspath(path)} is over {max_bytes} bytes; Clavain reads "
                              "no state file that large: fix or remove it")
    return raw


def read_up_to(fd: int, max_bytes: int) -> bytes:
    """At most `max_bytes` from a descriptor, to its end."""
    chunks = []
    left = max_bytes
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 16))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _parts(path: str) -> list[str]:
    """The names of a path, as `PurePath.parts` has them past its root (no `.`, no empty)."""
    return [part for part in path.split(os.sep) if part not in ("", ".")]


def real_folder(root: str | Path, folder: str | Path, *, create_root: bool = True
                ) -> str | Path:
    """Create `folder` and its parents up to `root` as real directories and return it.

    Every level strictly below `root` must be a real directory (or missing, then created); a
    symlink or a file there raises UnsafePathError. `root` itself may be anything the user
    chose (a symlinked `.clavain` is their decision, not something planted inside it).
    `create_root=False`: a missing `root` is FileNotFoundError (a person removed it; a
    background writer must not make it again). Paths or text (`os.path` only: the
    UserPromptSubmit hook writes without importing `pathlib`).
    """
    base, inner = os.fspath(root), os.fspath(folder)
    below, above = _parts(inner), _parts(base)
    if os.path.isabs(base) != os.path.isabs(inner) or below[:len(above)] != above:
        raise ValueError(f"{inner!r} is not inside {base!r}")  # a caller's bug
    current = base
    if create_root:
        os.makedirs(base, exist_ok=True)
    elif not os.path.isdir(base):
        raise FileNotFoundError(f"{root} is gone")
    for part in below[len(above):]:
        current = os.path.join(current, part)
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
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if mode == "ab" else os.O_TRUNC)
    return os.fdopen(open_regular(path, flags), mode)  # a FIFO there is refused, not waited on


def read_regular(path: str | Path, max_bytes: int, *, from_end: bool = False,
                 follow_symlinks: bool = False) -> bytes | None:
    """At most `max_bytes` of `path` (its first, or with `from_end` its last) if it is a regular
    file; None when it is missing, a FIFO (which would block the reader), anything else, or -
    unless `follow_symlinks` - a symlink at its last part. For what hooks read and show the
    model: a planted link must not put another file in the context, nor a pipe hang the
    session."""
    try:
        fd = open_regular(path, os.O_RDONLY, follow_symlinks=follow_symlinks)
    except (OSError, ValueError):  # ValueError: a NUL in the path
        return None
    try:
        if from_end:
            os.lseek(fd, max(0, os.fstat(fd).st_size - max_bytes), os.SEEK_SET)
        return read_up_to(fd, max_bytes)
    except OSError:
        return None
    finally:
        os.close(fd)


def names_ending(folder: str | os.PathLike[str], suffix: str, prefix: str = "") -> list[str]:
    """The names in `folder` that start with `prefix` and end with `suffix`, sorted (what
    `folder.glob(f"{prefix}*{suffix}")` finds, without the `re` a glob compiles); none when
    the folder cannot be listed."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return sorted(name for name in names if len(name) >= len(prefix) + len(suffix)
                  and name.startswith(prefix) and name.endswith(suffix))


def json_files(folder: str | Path, suffix: str,
               max_bytes: int = 1 << 20) -> list[tuple[Path, dict[str, Any]]]:
    """Every `*<suffix>` regular file of `folder` that holds a JSON object, by name: small
    records one writer keeps per thing (a dispatch, a resolution). Unreadable, non-object or
    non-regular entries (a FIFO, a symlink) are skipped; a missing folder is none."""
    names = names_ending(folder, suffix)
    from pathlib import Path

    found = []
    for name in names:
        path = Path(folder) / name
        value = read_json_object(path, max_bytes)
        if value is not None:
            found.append((path, value))
    return found


def read_json_object(path: str | os.PathLike[str], max_bytes: int = STATE_FILE_MAX_BYTES,
                     problems: list[str] | None = None) -> dict[str, Any] | None:
    """The one reader of a small JSON file (a state file, a record, a settings file), with one
    failure policy: it never raises. It returns the JSON object the file holds, or None: when
    the file is missing, and when it is there but is not one Clavain reads - a symlink, a FIFO
    or a device (never opened: `read_state_file`), over `max_bytes`, unreadable, not UTF-8 JSON
    (`textio`'s one decoding rule), or JSON that is not an object. Why, for a file that is
    there, is appended to `problems` when the caller wants to name it (a missing file is no
    problem). `fastjson`, not `json`: the hooks and the status line read with it on every call.
    """
    from clavain.textio import decode, load_json

    where = os.fspath(path)
    try:
        raw = read_state_file(path, max_bytes)
        value = None if raw is None else load_json(decode(raw, where), where)
    except (OSError, ValueError) as exc:  # UnsafePathError, an I/O error; BadText
        if problems is not None:
            why = str(exc).removeprefix(f"{where}: ")
            problems.append(why if isinstance(exc, OSError) and where in why
                            else f"{where} is unreadable ({why})")
        return None
    if raw is not None and not isinstance(value, dict):
        if problems is not None:
            problems.append(f"{where} is not a JSON object")
        return None
    return value


def write_atomic(path: str | Path, data: str | bytes, *, inside: str | Path | None = None,
                 mode: int | None = None, create_root: bool = True) -> None:
    """Replace `path` with `data` so a reader sees the old file or the new one, never a torn one.

    With `inside` (the state folder), every folder below it must be real (`real_folder`); the
    final rename replaces a symlink at `path` itself rather than writing through it. `mode`:
    the new file's permissions (default: the replaced file's, else what `open` would give).
    """
    parent, name = os.path.split(os.fspath(path))
    parent = parent or os.curdir
    if inside is not None:
        real_folder(inside, parent, create_root=create_root)
    else:
        os.makedirs(parent, exist_ok=True)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = _temp_file(os.path.abspath(parent), f".{name}.", ".tmp")
    try:
        os.fchmod(fd, _mode_for(path) if mode is None else mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(raw)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:  # noqa: SIM105 - contextlib is one more import for the hooks that write
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


# How many names `_temp_file` tries before giving up, as `tempfile.mkstemp` (TMP_MAX).
_TEMP_ATTEMPTS = 10000


def _temp_file(folder: str, prefix: str, suffix: str) -> tuple[int, str]:
    """A new file of `folder`, created (never an existing one, never through a symlink) and
    opened for writing, readable by its owner alone: (descriptor, path). What
    `tempfile.mkstemp` does, without the `tempfile` import (shutil, random: several ms on
    every hook that writes a file)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | \
        getattr(os, "O_CLOEXEC", 0)
    for _ in range(_TEMP_ATTEMPTS):
        name = os.path.join(folder, f"{prefix}{os.urandom(6).hex()}{suffix}")
        try:
            return os.open(name, flags, 0o600), name
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name in {folder} for {prefix}*{suffix}")


def write_json_atomic(path: Path, value: Any, *, inside: Path | None = None) -> None:
    from clavain import fastjson  # what `json` writes, without its `re`

    write_atomic(path, fastjson.dumps(value, indent=2) + "\n", inside=inside)


def lock_within(fd: int, lock: str | os.PathLike[str], seconds: float) -> None:
    """An exclusive flock on `fd` (the open file `lock`), waited for at most `seconds`. Anyone
    who can read the file can hold its lock for ever (a read-only open will do), so a wait
    without an end would be a hang: past `seconds` this raises ClavainError naming the file,
    and the caller fails closed (nothing changed, nothing allowed)."""
    import fcntl
    import time

    deadline = time.monotonic() + seconds
    pause = 0.01
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        left = deadline - time.monotonic()
        if left <= 0:
            from clavain.errors import ClavainError

            raise ClavainError(f"{os.fspath(lock)} is locked by another process, still after "
                               f"{seconds:g} s: nothing was done; if no Clavain command is "
                               f"running, `fuser {os.fspath(lock)}` names the holder to end")
        time.sleep(min(pause, left))
        pause = min(pause * 2, 0.2)
