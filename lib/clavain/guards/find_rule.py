"""Whether a `find` may change a state file: it starts at or above the state folder (or inside
it), runs a changing `-exec`/`-execdir`/`-ok`/`-delete`, and one of its name tests (`-name`,
`-path`, `-iname`, `-ipath`, `-wholename`, `-regex`) could match a real name in the state
folder (or `.clavain` itself), unless the folder is left out (`-prune`, `-not -path`,
`! -path`). `find . -name '*.pyc' -delete` still runs. Imported only for such a `find`.
"""

from __future__ import annotations

import os

from clavain.guards.landing import STATE_WALK_LIMIT, judge, under, walk_tree

FIND_OPTIONS = {"-H", "-L", "-P", "-O0", "-O1", "-O2", "-O3"}
NEGATIONS = ("!", "-not")
# A name test, and whether it ignores case.
FIND_NAME_TESTS = {"-name": False, "-iname": True, "-path": False, "-ipath": True,
                   "-wholename": False, "-iwholename": True, "-regex": False, "-iregex": True}


def reaches_state(walk, words: list[str]) -> bool:
    """Whether `find` with these words may change a file in the state folder."""
    from clavain.guards.writes import find_changes

    if not find_changes(words):
        return False
    index = 1
    while index < len(words) and words[index] in FIND_OPTIONS:
        index += 1
    starts = []
    while index < len(words) and words[index][:1] not in ("-", "(", "!", ")"):
        starts.append(words[index])
        index += 1
    entries = _entries(walk, starts or ["."])
    if "-maxdepth" in words[:-1] and words[words.index("-maxdepth") + 1].isdigit():
        deepest = int(words[words.index("-maxdepth") + 1])  # `find . -maxdepth 1 …`
        entries = [entry for entry in entries if entry[3] <= deepest]
    if not entries:
        return False
    tests, excluded = [], []
    for at in range(index, len(words) - 1):
        test = words[at]
        if test not in FIND_NAME_TESTS:
            continue
        pattern = words[at + 1]
        negated = at > 0 and words[at - 1] in NEGATIONS
        pruned = words[at + 2:at + 3] == ["-prune"]
        (excluded if negated or pruned else tests).append((test, pattern))
    folder = [(name, path) for name, path, top, _ in entries if top]
    inside = [(name, path) for name, path, top, _ in entries if not top]
    if excluded and (any(_hit(excluded, name, path) for name, path in folder) or (
            inside and all(_hit(excluded, name, path) for name, path in inside))):
        return False  # the state folder itself, or every file in it, is left out
    if not tests:
        return True
    return any(_hit(tests, name, path) for name, path, _, _ in entries)


def _hit(tests: list[tuple[str, str]], name: str, path: str) -> bool:
    return any(_match(test, pattern, name, path) for test, pattern in tests)


def _entries(walk, starts: list[str]) -> list[tuple[str, str, bool, int]]:
    """(name, path as find would print it, is the state folder itself, depth below its start)
    of what the starts reach in the state folder (agents' folders left out), bounded."""
    places = walk.places
    root = places["root"]
    entries: list[tuple[str, str, bool, int]] = []
    for start in starts:
        landed = walk.land(start)
        if landed is None:
            continue
        base = start.rstrip("/") or "/"
        if under(root, landed):  # at or above the state folder
            rel = os.path.relpath(root, landed)
            prefix = f"{base}/{rel}" if rel != "." else base
            top = root
        elif judge(landed, places) == "state":
            prefix, top = base, landed
        else:
            continue

        def add(name: str, path: str, is_top: bool = False, base: str = base) -> None:
            entries.append((name, path, is_top, path.count("/") - base.count("/")))

        add(os.path.basename(top), prefix, True)
        seen = 0
        for folder, names in walk_tree(top):
            if any(under(folder, agent) for agent in places["agents"]):
                continue
            inner = os.path.relpath(folder, top)
            here = prefix if inner == "." else f"{prefix}/{inner}"
            if folder != top:
                add(os.path.basename(folder), here)
            for name in names:
                add(name, f"{here}/{name}")
            seen += len(names) + 1
            if seen > STATE_WALK_LIMIT:
                add("*", f"{prefix}/*")  # too many to list: take any name
                break
    return entries


def _match(test: str, pattern: str, name: str, path: str) -> bool:
    if name == "*":
        return True
    fold = FIND_NAME_TESTS[test]
    subject = name if test in ("-name", "-iname") else path
    if test in ("-regex", "-iregex"):
        import re

        try:
            return re.fullmatch(pattern, subject, re.IGNORECASE if fold else 0) is not None
        except re.error:
            return True
    import fnmatch

    if fold:
        return fnmatch.fnmatchcase(subject.lower(), pattern.lower())
    return fnmatch.fnmatchcase(subject, pattern)

