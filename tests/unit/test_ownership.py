"""Ownership globs: a table of glob vs path and glob vs glob, and hypothesis against a brute
force over a finite universe of paths (exact in both directions for the grammar below)."""

from __future__ import annotations

import itertools
from fnmatch import fnmatchcase

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clavain.workgraph.ownership import (
    first_conflict,
    glob_matches,
    globs_overlap,
    ownership_overlaps,
)

MATCHES = [
    # (glob, path, owned)
    ("src/x.py", "src/x.py", True),
    ("src/x.py", "src/y.py", False),
    ("src/*.py", "src/x.py", True),
    ("src/*.py", "src/a/x.py", False),
    ("*.py", "src/x.py", False),
    ("*.py", "x.py", True),
    ("*", ".hidden", True),
    ("src/?.py", "src/x.py", True),
    ("src/?.py", "src/xy.py", False),
    ("src/?", "src/", False),  # the path is `src`: `?` needs a character
    ("**", "a/b/c", True),
    ("**/x.py", "x.py", True),
    ("**/x.py", "a/b/x.py", True),
    ("**/x.py", "a/b/y.py", False),
    ("a/**/b", "a/b", True),
    ("a/**/b", "a/x/y/b", True),
    ("a/**/b", "ab", False),
    ("a/**/b", "a/x/c", False),
    ("a/**", "a", True),
    ("a/**", "a/b/c", True),
    ("a/**", "ab/c", False),
    ("a**b", "axxb", True),  # not a whole segment: `*`
    ("a**b", "ax/xb", False),
    ("src/[abc].py", "src/b.py", True),
    ("src/[abc].py", "src/d.py", False),
    ("src/[a-c].py", "src/b.py", True),
    ("src/[!abc].py", "src/d.py", True),
    ("src/[!abc].py", "src/a.py", False),
    ("src/[^abc].py", "src/a.py", False),
    ("src/[^abc].py", "src/^.py", True),
    ("src/[]x].py", "src/].py", True),
    ("src/[a-].py", "src/-.py", True),
    ("a[/b", "a[/b", True),  # a class never spans `/`: both brackets are literal
    ("src/[x.py", "src/[x.py", True),
    ("src/config", "src/config/x.py", True),  # a directory owns what is under it
    ("src/config/", "src/config/deep/x.py", True),
    ("src/config", "src/configx.py", False),
    ("./src/x.py", "src/x.py", True),
    ("/src//x.py", "./src/x.py", True),
    ("src/x.py", "src/x.py/y", True),
    (".", "any/thing", True),  # the root owns everything
    ("", "x", True),
    ("src/**", "", False),  # the root is not a path anything owns
    ("Src/x.py", "src/x.py", False),
]

OVERLAPS = [
    # (glob, glob, overlap)
    ("src/*.py", "src/*.js", False),
    ("src/**", "src/a/*.py", True),
    ("*.py", "src/x.py", False),
    ("**/*.py", "src/x.py", True),
    ("src", "src/x.py", True),
    ("src/", "src/a/b", True),
    ("src", "srcx", False),
    ("src/a", "src/b", False),
    ("src/[ab]", "src/[bc]", True),
    ("src/[ab]", "src/[cd]", False),
    ("src/[!a]", "src/a", False),
    ("src/[!a]", "src/[ab]", True),
    ("src/[^a]", "src/a*", False),
    ("src/?", "src/ab", False),
    ("src/?", "src/a*", True),
    ("src/??", "src/*b", True),
    ("a/**/b", "a/b", True),
    ("a/**/b", "c/**", False),
    ("**/b", "a/**/c", True),  # a/b/c: under a/b, and ends in c
    ("**/x.py", "lib/**/y.py", True),  # lib/x.py/y.py
    ("a/*/c", "a/b", True),  # a/b/c
    ("a/*/c", "a/b/d", False),
    ("*", "**", True),
    ("x*", "*y", True),
    ("x*", "y*", False),
    ("*.py", "*.js", False),
    ("[a-m]*", "[n-z]*", False),
    ("[a-m]*", "[m-z]*", True),
    ("[!a-y]", "[a-z]", True),  # z
    ("./docs/", "/docs//a.md", True),
    (".", "anything/at/all", True),
    ("a/**/**/b", "a/b", True),
]


@pytest.mark.parametrize(("glob", "path", "owned"), MATCHES)
def test_glob_owns_path(glob: str, path: str, owned: bool) -> None:
    assert glob_matches(glob, path) is owned


@pytest.mark.parametrize(("a", "b", "overlap"), OVERLAPS)
def test_globs_overlap_exactly(a: str, b: str, overlap: bool) -> None:
    assert globs_overlap(a, b) is overlap
    assert globs_overlap(b, a) is overlap


def test_lists_and_first_conflict() -> None:
    assert not ownership_overlaps([], ["**"])
    assert not ownership_overlaps(["src/**"], [])
    assert ownership_overlaps(["docs/**", "src/a.py"], ["src/*.py"])
    running = {"t1": ["docs/**"], "t2": ["lib/*.py", "src/**"], "t3": ["src/**"]}
    assert first_conflict(["src/a/b.py"], running) == ("t2", "src/a/b.py", "src/**")
    assert first_conflict(["tests/**"], running) is None
    assert first_conflict([], running) is None


# ---------------------------------------------------------------- brute force

SEGMENTS = ["a", "b", "*", "?", "**", "[ab]", "[!a]", "a*"]
NAMES = ["a", "b", "ab", "c"]
# Every path of 1-4 segments over NAMES. Exact for globs of 1-3 SEGMENTS: a segment pattern
# pair that shares a name shares one of NAMES (only `a*` matches more than one character, and
# with anything it shares `a`), and a common path of two such globs needs at most four
# segments (three of one glob's plus one the other's `**` skips or its ownership covers).
UNIVERSE = [tuple(p) for n in range(1, 5) for p in itertools.product(NAMES, repeat=n)]


def _matches(pattern: tuple[str, ...], path: tuple[str, ...]) -> bool:
    if not pattern:
        return not path
    if pattern[0] == "**":
        return any(_matches(pattern[1:], path[k:]) for k in range(len(path) + 1))
    return bool(path) and fnmatchcase(path[0], pattern[0]) and _matches(pattern[1:], path[1:])


def _owns(glob: str, path: tuple[str, ...]) -> bool:
    pattern = tuple(s for s in glob.split("/") if s and s != ".")
    return any(_matches(pattern, path[:k]) for k in range(1, len(path) + 1))


def _owned(glob: str) -> frozenset[tuple[str, ...]]:
    return frozenset(path for path in UNIVERSE if _owns(glob, path))


def _decorated(glob: str, prefix: str, trailing: bool) -> str:
    return prefix + glob + ("/" if trailing else "")


GLOB = st.builds(_decorated, st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=3)
                 .map("/".join), st.sampled_from(["", "./", "/"]), st.booleans())


@settings(max_examples=300, deadline=None)
@given(x=GLOB, y=GLOB)
def test_overlap_is_exact_over_the_universe(x: str, y: str) -> None:
    assert globs_overlap(x, y) is bool(_owned(x) & _owned(y))


@settings(max_examples=200, deadline=None)
@given(glob=GLOB)
def test_glob_matches_agrees_with_brute_force(glob: str) -> None:
    for path in UNIVERSE:
        assert glob_matches(glob, "/".join(path)) is _owns(glob, path), path
