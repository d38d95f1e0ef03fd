"""What the project's files are now, as one short id: the shell verifier records the tree its
commands ran on, and a sprint ships only when its final gate ran on the tree as it is.

In a git work tree the id is the git tree of the working files as they are (tracked changes,
untracked files not ignored, staged or not), written through a throwaway index so the user's
own index is never touched: `git:<tree sha>`. The state folder is left out (the database and
the verdicts change while a sprint runs; the code does not). Outside git it is a digest of every
file's path, size and modification time: `files:<sha256>`. None when it cannot be told (git
failed, or more than MAX_FILES files outside git).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

GIT_TIMEOUT_SECONDS = 120.0
MAX_FILES = 200_000
SKIPPED_FOLDERS = (".git", ".clavain", "node_modules", "__pycache__", ".venv")


def _git(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                              timeout=GIT_TIMEOUT_SECONDS, stdin=subprocess.DEVNULL, env=env)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def fingerprint(project: Path, *, state_root: Path | None = None) -> str | None:
    """`git:<sha>` or `files:<sha256>` for the project's files now; None when unknown."""
    project = Path(project)
    state_root = Path(state_root) if state_root else project / ".clavain"
    top = _git(["rev-parse", "--show-toplevel"], project)
    if top is None:
        return _walk_digest(project, state_root)
    return _git_tree(Path(top), state_root)


def _git_tree(top: Path, state_root: Path) -> str | None:
    index = _git(["rev-parse", "--git-path", "index"], top)  # relative to `top`, or absolute
    index = os.path.join(top, index) if index else None
    excluded: list[str] = []
    inside = None
    with contextlib.suppress(ValueError, OSError):  # elsewhere: nothing of it in the tree
        inside = state_root.resolve().relative_to(top.resolve())
    # An ignored state folder is left out by `add -A` already, and naming it in a pathspec
    # would make git refuse the whole add ("paths are ignored").
    if inside is not None and _git(["check-ignore", "-q", inside.as_posix()], top) is None:
        excluded = [f":(exclude){inside.as_posix()}"]
    with tempfile.TemporaryDirectory(prefix="clavain-tree-") as scratch:
        scratch_index = os.path.join(scratch, "index")
        if index and os.path.isfile(index):
            # A copy of the real index: its stat cache spares hashing every unchanged file.
            shutil.copyfile(index, scratch_index)
        env = {**os.environ, "GIT_INDEX_FILE": scratch_index}
        env.pop("GIT_DIR", None)
        env.pop("GIT_WORK_TREE", None)
        if _git(["add", "-A", "--", ".", *excluded], top, env) is None:
            return None
        if inside is not None:  # the copied index may still hold the state folder's files
            _git(["rm", "-r", "-q", "--cached", "--ignore-unmatch", "--", inside.as_posix()],
                 top, env)
        tree = _git(["write-tree"], top, env)
    return f"git:{tree}" if tree else None


def _walk_digest(project: Path, state_root: Path) -> str | None:
    digest = hashlib.sha256()
    count = 0
    skip_state = os.path.abspath(state_root)
    for folder, subfolders, files in os.walk(project):
        subfolders[:] = sorted(d for d in subfolders if d not in SKIPPED_FOLDERS
                               and os.path.join(folder, d) != skip_state)
        for name in sorted(files):
            path = os.path.join(folder, name)
            try:
                info = os.lstat(path)
            except OSError:
                continue
            count += 1
            if count > MAX_FILES:
                return None
            relative = os.path.relpath(path, project)
            digest.update(f"{relative}\0{info.st_size}\0{info.st_mtime_ns}\n".encode(
                "utf-8", "surrogateescape"))
    return f"files:{digest.hexdigest()}"
