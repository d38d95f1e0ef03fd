"""Plan lint's ownership rules (warnings: the plan is recorded, the person is told):

- a glob that owns no file of the project and that no task creates. A literal path (no
  wildcard) is created when its directory exists or when some task's literal ownership names a
  directory above it; a glob with a wildcard is created when it owns a literal ownership path
  of some task (`tests/test_new.py` planned, `tests/*.py` owned);
- two tasks whose ownership overlaps (`workgraph.ownership.globs_overlap`, exact) with no
  order between them: neither reaches the other through `dependsOn`. Their parallel
  worktrees would both change the file and conflict at merge;
- a task far larger than the others by the existing files it owns: more than
  `SIZE_RATIO` times the median of the other tasks and at least `SIZE_MIN_FILES` files (a task
  that size is the plan's one real task, and too coarse to verify).

Fast at 40,000 tasks: two globs can own a common path only when one's literal prefix (leading
segments without a wildcard) is a prefix of the other's, so each glob is compared only with the
globs whose literal prefix is one of its own prefixes (a dictionary look-up per level); the
order between two tasks is computed only for pairs that overlap.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict

from clavain.plans.findings import WARNING, Finding
from clavain.plans.project_files import ProjectFiles, glob_regex, is_literal, literal_prefix, under
from clavain.workgraph.ownership import globs_overlap, normalise

SIZE_RATIO = 3
SIZE_MIN_FILES = 20
SIZE_MIN_TASKS = 3  # with fewer, "the others" is one task: no median to speak of


class Literals:
    """The literal ownership paths of every task: what the plan will create."""

    def __init__(self, tasks: dict[str, list[str]]) -> None:
        self.paths = sorted({normalise(glob) for globs in tasks.values() for glob in globs
                             if is_literal(glob)})
        self.path_set = set(self.paths)

    def names_above(self, path: str) -> bool:
        """Whether a literal ownership names a directory above `path` (or `path` itself)."""
        parts = path.split("/")
        return any("/".join(parts[:cut]) in self.path_set for cut in range(1, len(parts) + 1))

    def owned_by(self, glob: str) -> bool:
        """Whether `glob` owns one of the literal paths."""
        pattern = glob_regex(glob)
        if pattern is None:
            return bool(self.paths)
        start, stop = under(self.paths, "/".join(literal_prefix(glob)))
        prefix = "/".join(literal_prefix(glob))
        names = self.paths[start:stop] + ([prefix] if prefix in self.path_set else [])
        return any(pattern.fullmatch(name) for name in names)


def ownership_findings(tasks: dict[str, list[str]], depends: dict[str, list[str]],
                       files: ProjectFiles, literals: Literals) -> list[Finding]:
    """Every ownership warning for `tasks` (task id -> its globs, plan order); `depends` holds
    every node's `dependsOn` (order between tasks may pass through other nodes)."""
    found = _unmatched(tasks, files, literals)
    found += _overlaps(tasks, depends)
    found += _oversized(tasks, files)
    return found


def _unmatched(tasks: dict[str, list[str]], files: ProjectFiles,
               literals: Literals) -> list[Finding]:
    found = []
    # Literal paths in a directory that does not exist, by the topmost missing directory: one
    # line each (a plan for an empty repository names thousands of files in `src/`).
    missing: dict[str, list[tuple[str, str]]] = {}
    for task, globs in tasks.items():
        for glob in globs:
            if not normalise(glob) or files.owned(glob):
                continue
            if is_literal(glob):
                parent = normalise(glob).rpartition("/")[0]
                if not files.dir_exists(parent) and not literals.names_above(parent):
                    missing.setdefault(_topmost_missing(parent, files), []).append((task, glob))
            elif not literals.owned_by(glob):
                found.append(Finding(WARNING, "ownership_matches_nothing", task,
                                     f"{task}: ownership {glob!r} owns no file of the project "
                                     "and no task creates one"))
    for directory, named in missing.items():
        task, glob = named[0]
        others = len({other for other, _ in named[1:]} - {task})
        more = (f" ({len(named) - 1} more path(s) there, of {others} other task(s))"
                if len(named) > 1 else "")
        found.append(Finding(WARNING, "ownership_matches_nothing", task,
                             f"{task}: ownership {glob!r}: no such file, and the directory "
                             f"{directory} does not exist{more}"))
    return found


def _topmost_missing(path: str, files: ProjectFiles) -> str:
    parts = path.split("/")
    for cut in range(1, len(parts)):
        if not files.dir_exists("/".join(parts[:cut])):
            return "/".join(parts[:cut])
    return path


def _overlaps(tasks: dict[str, list[str]], depends: dict[str, list[str]]) -> list[Finding]:
    """One warning per task that shares a file with later tasks it has no order with (naming
    the first few of them: a glob every task owns is one line per task, not one per pair)."""
    buckets: dict[tuple[str, ...], list[tuple[str, str, bool]]] = defaultdict(list)
    entries = []
    for task, globs in tasks.items():
        for glob in dict.fromkeys(globs):
            prefix = literal_prefix(glob)
            entry = (task, glob, is_literal(glob))
            buckets[prefix].append(entry)
            entries.append((prefix, entry))
    order = _Order(depends)
    position = {task: index for index, task in enumerate(tasks)}
    seen: set[tuple[str, str]] = set()
    clashes: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
    for prefix, (task, glob, literal) in entries:
        for cut in range(len(prefix) + 1):
            for other, other_glob, other_literal in buckets.get(prefix[:cut], ()):
                pair = (task, other) if task < other else (other, task)
                if other == task or pair in seen:
                    continue
                # Both literal, the other's prefix above or equal to ours: one path is
                # under the other (or the same path).
                if not (literal and other_literal) and not globs_overlap(glob, other_glob):
                    continue
                seen.add(pair)
                if order.ordered(task, other):
                    continue
                if position[other] < position[task]:
                    clashes[other].append((other_glob, task, glob))
                else:
                    clashes[task].append((glob, other, other_glob))
    found = []
    for task in sorted(clashes, key=position.__getitem__):
        named = sorted(clashes[task], key=lambda clash: position[clash[1]])
        mine, other, theirs = named[0]
        more = f" (and {len(named) - 1} more task(s): " + ", ".join(
            clash[1] for clash in named[1:1 + NAMED_CLASHES]) + (
            ", ..." if len(named) > 1 + NAMED_CLASHES else "") + ")" if len(named) > 1 else ""
        found.append(Finding(
            WARNING, "ownership_overlap", task,
            f"{task}: owns {mine!r} and {other} owns {theirs!r}{more}, a file in common with "
            "no order between them: their parallel worktrees will conflict at merge; add a "
            "dependsOn or split the ownership"))
    return found


NAMED_CLASHES = 5


class _Order:
    """Whether one node reaches another through `dependsOn`, computed for the nodes asked
    about (each one's ancestors once)."""

    def __init__(self, depends: dict[str, list[str]]) -> None:
        self.depends = depends
        self._ancestors: dict[str, set[str]] = {}

    def ancestors(self, node: str) -> set[str]:
        if node not in self._ancestors:
            seen: set[str] = set()
            todo = list(self.depends.get(node, ()))
            while todo:
                current = todo.pop()
                if current not in seen:
                    seen.add(current)
                    todo.extend(self.depends.get(current, ()))
            self._ancestors[node] = seen
        return self._ancestors[node]

    def ordered(self, a: str, b: str) -> bool:
        return b in self.ancestors(a) or a in self.ancestors(b)


def _oversized(tasks: dict[str, list[str]], files: ProjectFiles) -> list[Finding]:
    counts = {}
    for task, globs in tasks.items():
        owned = [files.owned(glob) for glob in globs]
        counts[task] = (len(owned[0]) if len(owned) == 1 else
                        len(set().union(*owned)) if owned else 0)
    if len(counts) < SIZE_MIN_TASKS:
        return []
    ranked = sorted(counts.values())
    found = []
    for task, count in counts.items():
        if count < SIZE_MIN_FILES:
            continue
        median = _median_without(ranked, count)
        if count > SIZE_RATIO * median:
            found.append(Finding(
                WARNING, "task_too_large", task,
                f"{task}: owns {count} existing files, more than {SIZE_RATIO}x the median of "
                f"the other tasks ({median:g}): split it into tasks a fresh agent can finish "
                "and prove alone"))
    return found


def _median_without(ranked: list[int], value: int) -> float:
    """The median of sorted `ranked` with one `value` taken out (no copy: 40,000 tasks)."""
    cut = bisect_left(ranked, value)
    size = len(ranked) - 1

    def at(k: int) -> int:
        return ranked[k] if k < cut else ranked[k + 1]

    if size % 2:
        return at(size // 2)
    return (at(size // 2 - 1) + at(size // 2)) / 2
