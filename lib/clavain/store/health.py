"""The one judgement of the state folder and its database, asked by every command, doctor, the
supervisor and the hooks' failure path, so a person reads the same words wherever it shows:

- healthy;
- read-only: the folder or the file cannot be written by this user (fix the owner or modes);
- full: the disk holding it has no room (free space);
- locked: another process holds the database past the wait (wait for it or stop it);
- damaged: SQLite found the file malformed. The advice never throws data away: `clavain db
  recover` (`store.recover`) rebuilds every readable row into a new file, keeps the damaged one
  beside it and puts the new one in its place. Every later open refuses it (a marker beside
  it, `refuse_marked`) until that is done, so no command writes into a damaged file.

Only imported once something failed, or by a command's first open of the database
(`quick_check`): never on the per-tool-call hook path.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
from dataclasses import dataclass
from typing import Any

HEALTHY, READ_ONLY, FULL, LOCKED, DAMAGED = "healthy", "read_only", "full", "locked", "damaged"
# How long a command's first open may spend checking the file page by page; a larger file is
# then used unchecked (SQLite still stops at a damaged page it reads).
QUICK_CHECK_SECONDS = 2.0

_DAMAGE_WORDS = ("malformed", "not a database", "database corruption", "disk image")
_BUSY_WORDS = ("database is locked", "database table is locked", "database is busy")
_READ_ONLY_WORDS = ("readonly database", "read-only file system", "unable to open database")
_FULL_WORDS = ("database or disk is full",)
_READ_ONLY_ERRNOS = (errno.EACCES, errno.EPERM, errno.EROFS)
_FULL_ERRNOS = (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))


@dataclass(frozen=True)
class Judgement:
    kind: str  # HEALTHY, READ_ONLY, FULL, LOCKED or DAMAGED
    path: str  # the database (or the folder) judged
    fix_line: str  # what to do, the same words for every caller of this kind and path
    cause: str = ""  # SQLite's or the system's own words, when there were any

    @property
    def line(self) -> str:
        """The one line a command prints: what is wrong, then the fix."""
        what = _WHAT[self.kind].format(path=self.path)
        if self.kind == LOCKED:  # SQLite's own words ("database is locked") add nothing
            return f"{what}; {self.fix_line}"
        return f"{what}{_cause(self.cause)}: {self.fix_line}"


_WHAT = {
    HEALTHY: "the state database {path} is healthy",
    READ_ONLY: "the state database {path} cannot be written (read-only)",
    FULL: "the disk holding {path} is full",
    LOCKED: "the state database {path} stayed busy (another clavain process holds it)",
    DAMAGED: "the state database {path} is damaged",
}


def _cause(cause: str) -> str:
    return f" ({' '.join(cause.split())[:160]})" if cause else ""


def recovery(path: str) -> str:
    """The one recovery text for a damaged database: nothing is deleted (`store.recover`)."""
    return (f"stop every Clavain process using it, then run `clavain db recover`: it rebuilds "
            f"every row SQLite can still read into a new file, keeps the damaged one beside it "
            f"({os.path.basename(path)}.damaged-<time>) and puts the new one in its place; "
            "every write is refused until then (`clavain doctor` checks it again)")


def _owner(path: str) -> str:
    import pwd

    try:
        uid = os.stat(path).st_uid
    except OSError:
        return "unknown"
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _me() -> str:
    import pwd

    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return str(os.geteuid())


def _unwritable(path: str) -> str | None:
    """The state folder or the database file (or its side files) this user cannot write."""
    folder = os.path.dirname(os.path.abspath(path))
    for candidate in (folder, path, path + "-wal", path + "-shm"):
        if os.path.exists(candidate) and not os.access(candidate, os.W_OK):
            return candidate
    return None


def read_only_fix(blocked: str) -> str:
    owner, me = _owner(blocked), _me()
    mode = ""
    with contextlib.suppress(OSError):
        mode = f", mode {oct(os.stat(blocked).st_mode & 0o777)[2:]}"
    folder = blocked if os.path.isdir(blocked) else os.path.dirname(blocked)
    return (f"{blocked} is not writable by {me} (owner {owner}{mode}); give the state folder "
            f"back to {me} (`chown -R {me} {folder}`) or make it writable "
            f"(`chmod -R u+w {folder}`; `chattr -R -i {folder}` if it was made immutable)")


def _holders(path: str) -> list[str]:
    """Other processes with the database open (Linux /proc), as `pid N (command)`; best effort."""
    target = os.path.realpath(path)
    found = []
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]
    except OSError:
        return []
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                    with open(f"/proc/{pid}/cmdline", "rb") as handle:
                        argv = handle.read().split(b"\0")
                    command = " ".join(a.decode(errors="replace") for a in argv if a)[:80]
                    found.append(f"pid {pid} ({command})")
                    break
            except OSError:
                continue
        if len(found) >= 3:
            break
    return found


def make(kind: str, path: str, cause: str = "") -> Judgement:
    path = os.fspath(path)
    if kind == DAMAGED:
        fix = recovery(path)
    elif kind == READ_ONLY:
        fix = read_only_fix(_unwritable(path) or os.path.dirname(os.path.abspath(path)))
    elif kind == FULL:
        fix = (f"free space on the disk holding {os.path.dirname(os.path.abspath(path))} "
               "(`df -h` shows it), then run the command again")
    elif kind == LOCKED:
        holders = _holders(path)
        held = f"it is held by {', '.join(holders)}: " if holders else ""
        fix = f"try again; {held}wait for it to finish, or stop it"
    else:
        fix = "nothing to do"
    return Judgement(kind, path, fix, cause)


def judge(exc: BaseException, path: Any) -> Judgement | None:
    """What a failure says about the state database at `path`: READ_ONLY, FULL, LOCKED or
    DAMAGED, or None when the failure is not about the state (the caller's own error)."""
    from clavain.store.faults import StoreDamaged

    path = os.fspath(path)
    if isinstance(exc, StoreDamaged):
        return getattr(exc, "judgement", None) or make(DAMAGED, path, str(exc))
    text = str(exc).lower()
    module = type(exc).__module__ or ""
    if module.startswith(("sqlite3", "_sqlite3")):
        if any(word in text for word in _DAMAGE_WORDS):
            return make(DAMAGED, path, str(exc))
        if any(word in text for word in _BUSY_WORDS):
            return make(LOCKED, path, str(exc))
        if any(word in text for word in _FULL_WORDS):
            return make(FULL, path, str(exc))
        if any(word in text for word in _READ_ONLY_WORDS) or "disk i/o error" in text:
            if _unwritable(path):
                return make(READ_ONLY, path, str(exc))
            if _disk_full(path):
                return make(FULL, path, str(exc))
        return None
    if isinstance(exc, OSError) and type(exc).__name__ != "UnsafePathError":
        folder = os.path.dirname(os.path.abspath(path))
        if exc.filename and not os.path.abspath(os.fsdecode(exc.filename)).startswith(folder):
            return None  # a file of the person's, not the state's
        if exc.errno in _FULL_ERRNOS:
            return make(FULL, path, exc.strerror or str(exc))
        if exc.errno in _READ_ONLY_ERRNOS and _unwritable(path):
            return make(READ_ONLY, path, exc.strerror or str(exc))
    return None


def _disk_full(path: str) -> bool:
    try:
        stats = os.statvfs(os.path.dirname(os.path.abspath(path)))
    except OSError:
        return False
    return stats.f_bavail * stats.f_frsize < 1024 * 1024


def quick_check(conn: Any, path: Any, *, seconds: float = QUICK_CHECK_SECONDS) -> Judgement:
    """SQLite's `quick_check` of the open database (every table and index, page by page),
    stopped after `seconds`: DAMAGED at the first damage, else HEALTHY (also when the time ran
    out: SQLite still stops at a damaged page a statement reads)."""
    import time

    path = os.fspath(path)
    deadline = time.monotonic() + seconds
    conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
    try:
        problems = [row[0] for row in conn.execute("PRAGMA quick_check(3)")]
    except Exception as exc:
        if "interrupted" in str(exc):
            return make(HEALTHY, path, f"not fully checked in {seconds:g} s")
        found = judge(exc, path)
        if found is not None:
            return found
        raise
    finally:
        conn.set_progress_handler(None, 0)
    if problems == ["ok"]:
        return make(HEALTHY, path)
    return make(DAMAGED, path, "; ".join(problems))


# ---------------------------------------------------------------- the marker

def marker(path: str) -> str:
    from clavain.store.db import DAMAGE_MARKER

    return os.fspath(path) + DAMAGE_MARKER


def mark_damaged(judgement: Judgement) -> None:
    """Remember the damage beside the file (its identity, so a file put in its place is not
    refused), for every later open to refuse. Best effort: a read-only folder keeps none."""
    if judgement.kind != DAMAGED:
        return
    try:
        stat = os.stat(judgement.path)
        with open(marker(judgement.path), "w", encoding="utf-8") as handle:
            json.dump({"inode": stat.st_ino, "device": stat.st_dev, "cause": judgement.cause,
                       "line": judgement.line}, handle)
    except OSError:
        pass


def refuse_marked(path: str) -> None:
    """StoreDamaged when the database was found damaged before and is still the same file; a
    marker left over a file since replaced (recovered) is removed."""
    try:
        with open(marker(path), encoding="utf-8") as handle:
            seen = json.load(handle)
        stat = os.stat(path)
    except FileNotFoundError:
        _forget(path)
        return
    except (OSError, ValueError):
        return
    if (seen.get("inode"), seen.get("device")) != (stat.st_ino, stat.st_dev):
        _forget(path)
        return
    raise damaged(make(DAMAGED, path, str(seen.get("cause") or "")))


def _forget(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(marker(path))


def forget_damage(path: str) -> None:
    """A recovered file is in place: no later open refuses it."""
    _forget(path)


def confirm_damage(path: Any) -> bool | None:
    """After a statement said "malformed": whether the state database itself is damaged (its
    quick check, read-only: True, and remembered), healthy (False: the damage was another
    file's, such as a copy's target), or not known (None: it could not be checked in time)."""
    from clavain.store import db

    path = os.fspath(path)
    try:
        conn = db.connect_readonly(path, timeout_ms=1000)
    except Exception as exc:
        found = judge(exc, path)
        if found is not None and found.kind == DAMAGED:
            mark_damaged(found)
            return True
        return None
    try:
        found = quick_check(conn, path)
    finally:
        conn.close()
    if found.kind == DAMAGED:
        mark_damaged(found)
        return True
    return False if found.kind == HEALTHY and not found.cause else None


def damaged(judgement: Judgement) -> Exception:
    """The exception every caller raises for a damaged database: its message is the line. A
    StoreDamaged (the CLI prints it, the supervisor halts on it) that is also SQLite's
    DatabaseError, so every place that already stops at a damaged file stops at this one."""
    from clavain.store.db import sqlite3
    from clavain.store.faults import StoreDamaged

    class DamagedDatabase(StoreDamaged, sqlite3.DatabaseError):
        pass

    error = DamagedDatabase(judgement.line, exit_code=1)
    error.judgement = judgement  # type: ignore[attr-defined]
    return error


def check_opened(conn: Any, path: str) -> None:
    """A command's first open of the database: refuse it (closing `conn`) when damaged."""
    found = quick_check(conn, path)
    if found.kind == DAMAGED:
        mark_damaged(found)
        conn.close()
        raise damaged(found)


def judge_path(path: Any) -> Judgement:
    """The state database at `path` judged as doctor shows it: read-only, else damaged (a
    bounded integrity check), else healthy. A missing file is healthy (nothing yet)."""
    from clavain.store import db

    path = os.fspath(path)
    if not os.path.exists(path):
        return make(READ_ONLY if _unwritable(path) else HEALTHY, path)
    status, detail = db.integrity(path)  # read-only: also in a folder nobody may write
    if status == "damaged":
        from clavain.store.db import sqlite3

        found = judge(sqlite3.OperationalError(detail), path)
        if found is None or found.kind == DAMAGED:  # an integrity finding is damage too
            found = make(DAMAGED, path, detail)
            mark_damaged(found)
        return found
    if _unwritable(path) is not None:
        return make(READ_ONLY, path)
    if status == "ok":
        _forget(path)  # recovered in place: no later open refuses it
    return make(HEALTHY, path, "" if status == "ok" else detail)


def damage_message(path: Any, exc: BaseException) -> str:
    """One line naming the damaged file and the fix, the same words every command uses; the
    damage is remembered, so every later write is refused until recovered."""
    from clavain.store.faults import StoreDamaged

    judged = judge(exc, path)
    if judged is None or judged.kind != DAMAGED:
        judged = make(DAMAGED, str(path), str(exc))
    if not isinstance(exc, StoreDamaged):
        confirm_damage(path)  # the file's own check: remembered when it is damaged
    return judged.line
