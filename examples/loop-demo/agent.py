#!/usr/bin/env python3
"""A scripted stand-in for a model, so `clavain loop` can be watched with no API key.

Configured in `.clavain/config.json` as `"runners": {"agent": {"command": ["./agent.py"]}}`, it
is what a real agent is to the loop: it gets one iteration's prompt on stdin, in the project
root, and prints its reply ending with a status block. It picks the first item of the prompt's
work list (the loop sorts them by priority), "does" it by copying the files prepared under
`patches/<check id>/` into the project — as a model would write them — and reports COMPLETE.
Given the exit prompt (nothing left), it confirms with `EXIT_SIGNAL: true`.

`./agent.py --pretend` is the agent a loop must not believe: it says the first item is done,
that it changed a file and that nothing is left, and changes nothing. The loop re-runs the
checks, sees no progress, and its circuit breaker opens.

Stdlib only; it never calls a network.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

PATCHES = Path(__file__).resolve().parent / "patches"
EXIT_PROMPT = "---CLAVAIN_ITERATE---"
# `1. [HIGH] check:greeting — greeting.txt says hello` (clavain.loop.iterate._item_lines)
FIRST_ITEM = re.compile(r"^1\. \[\w+\] (\S+)", re.MULTILINE)


def status_block(task: str, status: str, files: int, tests: str, exit_signal: bool,
                 next_step: str) -> str:
    return "\n".join([
        "---CLAVAIN_STATUS---",
        f"TASK_COMPLETED: {task}",
        f"STATUS: {status}",
        f"FILES_MODIFIED: {files}",
        f"TESTS_STATUS: {tests}",
        f"EXIT_SIGNAL: {'true' if exit_signal else 'false'}",
        f"NEXT_RECOMMENDATION: {next_step}",
        "---END_CLAVAIN_STATUS---",
    ])


def reply(prompt: str, *, pretend: bool) -> str:
    if f"\n{EXIT_PROMPT}\n" in prompt:
        return ("Every check passes and nothing is left to do.\n\n"
                + status_block("none", "COMPLETE", 0, "PASSING", True, "nothing: done"))
    found = FIRST_ITEM.search(prompt)
    if found is None:
        return ("I cannot find a work list in this prompt.\n\n"
                + status_block("none", "BLOCKED", 0, "NOT_RUN", False,
                               "the prompt had no numbered items"))
    item = found.group(1)
    if pretend:  # claims everything, does nothing
        return (f"Fixed {item}; all done.\n\n"
                + status_block(item, "COMPLETE", 1, "PASSING", True, "nothing: all done"))
    kind, _, name = item.partition(":")
    source = PATCHES / name
    if kind != "check" or not source.is_dir():
        return (f"I have no way to do {item}: this demo agent only writes the files under "
                f"patches/<check id>/.\n\n"
                + status_block(item, "BLOCKED", 0, "NOT_RUN", False,
                               f"a person (or a real model) must do {item}"))
    written = []
    for path in sorted(p for p in source.rglob("*") if p.is_file()):
        target = Path.cwd() / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
        written.append(str(path.relative_to(source)))
    return (f"Picked {item}: wrote {', '.join(written)}.\n\n"
            + status_block(item, "COMPLETE", len(written), "NOT_RUN", False,
                           "the next failing check"))


def main(argv: list[str]) -> int:
    print(reply(sys.stdin.read(), pretend="--pretend" in argv[1:]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
