"""The project's files as plan lint sees them: one walk per lint (git's list of tracked and
untracked-but-not-ignored files when the project is a git work tree, else a walk that skips
state, dependency and cache folders), and which of them an ownership glob owns.

Matching follows `workgraph.ownership` exactly (same tokens per segment, `**` as whole
segments, a glob owns what is under a directory it matches); each glob becomes one regular
expression, tried only on the files under its literal prefix (the leading segments without a
wildcard), so 40,000 globs like `src/mod_1.py` cost a dictionary look-up each.
"""

from __future__ import annotations

import os
import re
import subprocess
from bisect import bisect_left
from functools import lru_cache
from pathlib import Path

from clavain.workgraph.ownership import Pred, segment_tokens, segments

# State, parallel runners' worktrees (copies of the project), dependencies and caches.
SKIPPED_DIRS = frozenset({".git", ".clavain", ".clavain-worktrees", "node_modules", ".venv",
                          "venv", "__pycache__"})
GIT_TIMEOUT_SECONDS = 60


def walk(project: Path) -> list[str]:
    """Every file of the project, `/`-separated and relative to it (module docstring)."""
    listed = _git_files(project)
    if listed is not None:
        return listed
    found = []
    for root, dirs, files in os.walk(project):
        dirs[:] = [name for name in dirs if name not in SKIPPED_DIRS]
        rel = os.path.relpath(root, project)
        prefix = "" if rel == "." else rel.replace(os.sep, "/") + "/"
        found.extend(prefix + name for name in files)
    return found


def _git_files(project: Path) -> list[str] | None:
    """git's list, or None when the project is not in a git work tree (or git is missing)."""
    if not (project / ".git").exists() and not any(
            (parent / ".git").exists() for parent in project.resolve().parents):
        return None
    try:
        done = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=project, capture_output=True, timeout=GIT_TIMEOUT_SECONDS, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    names = done.stdout.decode("utf-8", errors="surrogateescape").split("\0")
    # A nested repository (a runner's worktree) is listed as its folder: not a file.
    return sorted({name for name in names if name and not name.endswith("/") and
                   name.split("/", 1)[0] not in (".clavain", ".clavain-worktrees")})


@lru_cache(maxsize=65536)
def literal_prefix(glob: str) -> tuple[str, ...]:
    """The glob's leading segments that hold no wildcard (all of them for a literal path)."""
    prefix = []
    for segment in segments(glob):
        if segment == "**" or not _is_literal(segment):
            break
        prefix.append(segment)
    return tuple(prefix)


@lru_cache(maxsize=65536)
def is_literal(glob: str) -> bool:
    """Whether the glob names one path (no wildcard in any segment); `` is not literal."""
    parts = segments(glob)
    return bool(parts) and len(literal_prefix(glob)) == len(parts)


def _is_literal(segment: str) -> bool:
    if "*" not in segment and "?" not in segment and "[" not in segment:
        return True
    return all(token is not None and not token.negated and not token.slash and
               len(token.ranges) == 1 and token.ranges[0][0] == token.ranges[0][1]
               for token in segment_tokens(segment))


def glob_regex(glob: str) -> re.Pattern[str] | None:
    """A regular expression a normalised path fully matches when the glob owns it; None when
    the glob owns every path."""
    parts: list[str] = []
    for part in segments(glob):
        if not (part == "**" and parts and parts[-1] == "**"):
            parts.append(part)
    if not parts:
        return None
    out = []
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "**":
            out.append((".*" if index == 0 else "(?:/.*)?") if last else
                       ("(?:.*/)?" if index == 0 else "/(?:.*/)?"))
            continue
        if index > 0 and parts[index - 1] != "**":
            out.append("/")
        out.extend(_token_regex(token) for token in segment_tokens(part))
    return re.compile("".join(out) + "(?:/.*)?", re.DOTALL)


def _token_regex(token: Pred | None) -> str:
    if token is None:
        return "[^/]*"
    items = "".join(f"\\U{lo:08x}" if lo == hi else f"\\U{lo:08x}-\\U{hi:08x}"
                    for lo, hi in token.ranges)
    if token.negated:
        return f"[^/{items}]"
    return f"[{items}]" if items else "(?!)"


class ProjectFiles:
    """The walked files, sorted, and the files each glob owns (cached per glob)."""

    def __init__(self, project: Path, files: list[str]) -> None:
        self.project = project
        self.files = sorted(files)
        self.file_set = set(self.files)
        self.dirs = {""}
        for name in self.files:
            cut = name.rfind("/")
            while cut > 0:
                parent = name[:cut]
                if parent in self.dirs:
                    break
                self.dirs.add(parent)
                cut = name.rfind("/", 0, cut)
        self._owned: dict[str, list[int]] = {}
        self._on_disk: dict[str, bool] = {}

    @classmethod
    def of(cls, project: Path) -> ProjectFiles:
        return cls(project, walk(project))

    def owned(self, glob: str) -> list[int]:
        """Indices (into `files`) of the files `glob` owns."""
        if glob not in self._owned:
            self._owned[glob] = self._match(glob)
        return self._owned[glob]

    def _match(self, glob: str) -> list[int]:
        prefix = "/".join(literal_prefix(glob))
        start, stop = under(self.files, prefix)
        if is_literal(glob):
            exact = bisect_left(self.files, prefix)
            hit = [exact] if exact < len(self.files) and self.files[exact] == prefix else []
            return hit + list(range(start, stop))
        pattern = glob_regex(glob)
        if pattern is None:
            return list(range(len(self.files)))
        candidates = range(len(self.files)) if not prefix else range(start, stop)
        if prefix and prefix in self.file_set:
            candidates = [bisect_left(self.files, prefix), *candidates]
        return [index for index in candidates if pattern.fullmatch(self.files[index])]

    def dir_exists(self, path: str) -> bool:
        """A directory of the walked files, or one on disk (empty, or all its files ignored)."""
        if path not in self._on_disk:
            self._on_disk[path] = path in self.dirs or (self.project / path).is_dir()
        return self._on_disk[path]


def under(names: list[str], prefix: str) -> tuple[int, int]:
    """The slice of sorted `names` below the directory `prefix` (all of them for ``)."""
    if not prefix:
        return 0, len(names)
    # "0" follows "/": every name starting with "prefix/" lies between the two.
    return bisect_left(names, prefix + "/"), bisect_left(names, prefix + "0")
