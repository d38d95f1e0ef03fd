"""The threat model says what the tests try: every attempt the e2e tier has the agent make is
listed in docs/THREAT_MODEL.md, as written there (an interpreter's path as `{python}`, the CLI's
as `{cli}`), and the page lists no attempt the tests do not make; the attempts the hook cannot
read are the ones its best-effort column names as not caught."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.e2e.test_os_authority_e2e import BEST_EFFORT_MISSES, listed_attempts
from tests.e2e.test_person_only_e2e import ATTEMPTS, CLI

DOC = Path(__file__).resolve().parents[2] / "docs" / "THREAT_MODEL.md"


def _listed(block: int = 0) -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    return text.split("```text\n")[block + 1].split("\n```", 1)[0].splitlines()


def test_every_attempt_the_tests_make_is_listed_and_nothing_else() -> None:
    tried = "\n".join(a.replace(sys.executable, "{python}").replace(CLI, "{cli}")
                      for a in ATTEMPTS).splitlines()
    assert _listed() == tried


def test_the_os_attempts_are_listed_and_the_best_effort_misses_named() -> None:
    assert _listed(1) == listed_attempts()
    text = DOC.read_text(encoding="utf-8")
    table = text.split("## Two promises", 1)[1].split("## What hard mode", 1)[0]
    missed = [line for line in _listed(1) if "(best effort: not caught)" in line]
    assert [line.split(". ", 1)[1].split(" ", 1)[0] for line in missed] == list(BEST_EFFORT_MISSES)
    for clue in ("ls -A \\| grep lava", "setsid script", "computed at run time"):
        assert clue in table, clue  # the column says what the hook cannot read
