"""Ownership globs: which files a node may change, and whether two nodes could change the same
file. Claims use it so that nodes whose ownership overlaps never run at the same time.

Glob semantics (paths and globs are relative to the project root):

- Paths are `/`-separated. A leading `./` or `/`, repeated slashes and a trailing `/` are
  normalised away, in globs and paths alike; `src/config/` is `src/config`.
- `*` matches any run of characters except `/` (leading dots included); `?` one character
  except `/`; `[abc]`, `[a-z]` one character of the class, `[!abc]` or `[^abc]` one character
  not in it. A class never matches `/`: a glob is split at every `/` first, so a `[` whose `]`
  is missing from its segment is a literal `[` (as is `[]` and `[!]` alone, as in `fnmatch`).
  `]` first in a class is literal; so is `-` first or last. There are no backslash escapes.
  Matching is case-sensitive.
- `**` as a whole segment matches zero or more whole segments: `a/**/b` matches `a/b` and
  `a/x/y/b`, `a/**` everything under `a`, `**/x.py` an `x.py` anywhere. A `**` inside a segment
  (`a**b`) is two `*`.
- A glob owns every path it matches and everything under a directory it matches: `src/config`
  owns `src/config/x.py`. A glob that normalises to nothing (`.`, `/`, ``) owns every path.
  The project root itself is not a path anything owns.

Two globs overlap when some path is owned by both, decided exactly: `src/*.py` and `src/*.js`
do not overlap, `src/**` and `src/a/*.py` do, `*.py` and `src/x.py` do not. Each glob compiles
to a small NFA over characters; overlap is a search of the product of two NFAs and a two-state
automaton that admits only normalised paths (no empty segment). Edges carry character
predicates; whether two predicates share a character is decided by testing the characters at
their boundaries (every range end, its neighbours, and `/` with its neighbours): every other
character behaves like one of those, so the test is exact.

Imports nothing from the workgraph, and nothing slow: the claim path loads it.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

SLASH = 47  # ord("/")
MAX_CODE_POINT = 0x10FFFF


class Pred(NamedTuple):
    """The characters an NFA edge accepts: `/` when `slash`; any other character when it lies in
    one of `ranges` (inclusive code-point pairs), or when it does not and `negated`."""

    negated: bool
    ranges: tuple[tuple[int, int], ...]
    slash: bool


ANY_BUT_SLASH = Pred(True, (), False)
ANY = Pred(True, (), True)
ONLY_SLASH = Pred(False, (), True)


def literal(char: str) -> Pred:
    code = ord(char)
    return ONLY_SLASH if code == SLASH else Pred(False, ((code, code),), False)


def accepts(pred: Pred, code: int) -> bool:
    if code == SLASH:
        return pred.slash
    return any(lo <= code <= hi for lo, hi in pred.ranges) != pred.negated


class Nfa:
    """States are ints; state 0 starts. `closure[s]` is every state reachable from `s` by empty
    moves (`s` included); `edges[s]` the (predicate, target) pairs leaving `s`."""

    __slots__ = ("accepting", "closure", "edges")

    def __init__(self, edges: list[list[tuple[Pred, int]]], empty: list[list[int]],
                 accepting: set[int]) -> None:
        self.edges = edges
        self.accepting = frozenset(accepting)
        self.closure = [_reach(state, empty) for state in range(len(edges))]

    def step(self, states: frozenset[int], code: int) -> frozenset[int]:
        """The states after reading one character, with their empty moves taken."""
        return frozenset(after for state in states for pred, target in self.edges[state]
                         if accepts(pred, code) for after in self.closure[target])


def _reach(start: int, empty: list[list[int]]) -> frozenset[int]:
    seen, todo = {start}, [start]
    while todo:
        for target in empty[todo.pop()]:
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return frozenset(seen)


# ---------------------------------------------------------------- parsing

def segments(text: str) -> list[str]:
    """The non-empty segments of a glob or path, leading `.` segments dropped."""
    parts = [part for part in text.split("/") if part]
    while parts and parts[0] == ".":
        parts.pop(0)
    return parts


def normalise(text: str) -> str:
    return "/".join(segments(text))


def _class_end(segment: str, start: int) -> int:
    """The index of the `]` closing the class opened at `start`, or -1 (`fnmatch`'s rule)."""
    j = start + 1
    if j < len(segment) and segment[j] in "!^":
        j += 1
    if j < len(segment) and segment[j] == "]":
        j += 1
    return segment.find("]", j)


def _class_pred(body: str) -> Pred:
    negated = body[:1] in ("!", "^")
    body = body[1:] if negated else body
    ranges, k = [], 0
    while k < len(body):
        if k + 2 < len(body) and body[k + 1] == "-":
            lo, hi = ord(body[k]), ord(body[k + 2])
            if lo <= hi:  # a reversed range matches nothing
                ranges.append((lo, hi))
            k += 3
        else:
            ranges.append((ord(body[k]), ord(body[k])))
            k += 1
    return Pred(negated, tuple(ranges), False)


def segment_tokens(segment: str) -> list[Pred | None]:
    """One segment as a list of predicates, one per character; None stands for `*`."""
    tokens: list[Pred | None] = []
    i = 0
    while i < len(segment):
        char = segment[i]
        end = _class_end(segment, i) if char == "[" else -1
        if char == "*":
            tokens.append(None)
        elif char == "?":
            tokens.append(ANY_BUT_SLASH)
        elif end > 0:
            tokens.append(_class_pred(segment[i + 1:end]))
            i = end
        else:
            tokens.append(literal(char))
        i += 1
    return tokens


# ---------------------------------------------------------------- compiling

class _Builder:
    __slots__ = ("edges", "empty")

    def __init__(self) -> None:
        self.edges: list[list[tuple[Pred, int]]] = [[]]
        self.empty: list[list[int]] = [[]]

    def state(self) -> int:
        self.edges.append([])
        self.empty.append([])
        return len(self.edges) - 1

    def edge(self, source: int, pred: Pred) -> int:
        target = self.state()
        self.edges[source].append((pred, target))
        return target

    def loop(self, source: int, pred: Pred) -> int:
        """`pred*` after `source`: a new state reached by an empty move, looping on `pred`."""
        target = self.state()
        self.empty[source].append(target)
        self.edges[target].append((pred, target))
        return target

    def segment(self, current: int, text: str) -> int:
        for token in segment_tokens(text):
            current = (self.loop(current, ANY_BUT_SLASH) if token is None
                       else self.edge(current, token))
        return current

    def any_dirs(self, current: int) -> int:
        """`**/` (at the start, or after a `/`): nothing, or anything ending in `/`."""
        after = self.edge(self.loop(current, ANY), ONLY_SLASH)
        self.empty[current].append(after)
        return after


def _parts(glob: str) -> list[str]:
    """The glob's segments with the implicit trailing `**` (it owns what is under a directory it
    matches), runs of `**` collapsed (`**/**` is `**`)."""
    parts: list[str] = []
    for part in [*segments(glob), "**"]:
        if not (part == "**" and parts and parts[-1] == "**"):
            parts.append(part)
    return parts


@lru_cache(maxsize=1024)
def compile_glob(glob: str) -> Nfa:
    """The NFA of every path `glob` owns; cached, as claims ask about the same globs again."""
    build, current, accepting = _Builder(), 0, set()
    parts = _parts(glob)
    for i, part in enumerate(parts):
        if part != "**":
            if i > 0 and parts[i - 1] != "**":
                current = build.edge(current, ONLY_SLASH)
            current = build.segment(current, part)
        elif i < len(parts) - 1:  # `a/**/b`: `a/`, any directories, `b`
            current = build.any_dirs(build.edge(current, ONLY_SLASH) if i > 0 else current)
        elif i == 0:  # a bare `**`: any path at all
            accepting.add(build.loop(current, ANY))
        else:  # `a/**`: `a` itself, or `/` and anything after it
            accepting |= {current, build.loop(build.edge(current, ONLY_SLASH), ANY)}
    return Nfa(build.edges, build.empty, accepting)


# ---------------------------------------------------------------- questions

def glob_matches(glob: str, path: str) -> bool:
    """Whether `glob` owns `path`: matches it or a directory above it (module docstring)."""
    text = normalise(path)
    if not text:
        return False
    nfa = compile_glob(glob)
    states = nfa.closure[0]
    for char in text:
        states = nfa.step(states, ord(char))
        if not states:
            return False
    return not states.isdisjoint(nfa.accepting)


def _boundaries(pred: Pred) -> set[int]:
    found = set()
    for lo, hi in pred.ranges:
        found |= {lo - 1, lo, hi + 1}
    return found


@lru_cache(maxsize=4096)
def shared_characters(a: Pred, b: Pred) -> tuple[bool, bool]:
    """(both accept `/`, both accept some character other than `/`). Characters between two
    boundaries of `a` and `b` are alike for both, so testing the boundaries is exact."""
    candidates = _boundaries(a) | _boundaries(b) | {SLASH - 1, SLASH + 1}
    other = any(accepts(a, c) and accepts(b, c) for c in candidates
                if 0 <= c <= MAX_CODE_POINT and c != SLASH)
    return a.slash and b.slash, other


@lru_cache(maxsize=4096)
def globs_overlap(a: str, b: str) -> bool:
    """Whether some path is owned by both globs: a search of the product automaton, where
    `in_segment` says the path so far ends inside a segment (so `/` or the end may follow)."""
    left, right = compile_glob(a), compile_glob(b)
    todo, seen = [(0, 0, False)], {(0, 0, False)}
    while todo:
        p, q, in_segment = todo.pop()
        for x in left.closure[p]:
            for y in right.closure[q]:
                if in_segment and x in left.accepting and y in right.accepting:
                    return True
                for next_state in _product_moves(left, right, x, y, in_segment):
                    if next_state not in seen:
                        seen.add(next_state)
                        todo.append(next_state)
    return False


def _product_moves(left: Nfa, right: Nfa, x: int, y: int,
                   in_segment: bool) -> list[tuple[int, int, bool]]:
    """The product states one shared character leads to from NFA states `x` and `y`."""
    moves = []
    for pred_x, to_x in left.edges[x]:
        for pred_y, to_y in right.edges[y]:
            slash, other = shared_characters(pred_x, pred_y)
            if slash and in_segment:  # never an empty segment
                moves.append((to_x, to_y, False))
            if other:
                moves.append((to_x, to_y, True))
    return moves


def ownership_overlaps(globs_a: list[str], globs_b: list[str]) -> bool:
    """Whether two nodes' ownership lists share a path; an empty list never overlaps."""
    return any(globs_overlap(a, b) for a in globs_a for b in globs_b)


def first_conflict(globs: list[str], others: dict[str, list[str]]
                   ) -> tuple[str, str, str] | None:
    """(other node id, one of `globs`, its glob) for the first of `others` whose ownership
    overlaps `globs`, in `others`' order; None when none does. For messages."""
    for node_id, theirs in others.items():
        for mine in globs:
            for their in theirs:
                if globs_overlap(mine, their):
                    return node_id, mine, their
    return None
