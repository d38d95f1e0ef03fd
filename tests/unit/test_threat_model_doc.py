"""The threat model says what the tests try: every attempt the e2e tier has the agent make is
listed in docs/THREAT_MODEL.md, as written there (an interpreter's path as `{python}`, the CLI's
as `{cli}`), and the page lists no attempt the tests do not make."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.e2e.test_person_only_e2e import ATTEMPTS, CLI

DOC = Path(__file__).resolve().parents[2] / "docs" / "THREAT_MODEL.md"


def _listed() -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    block = text.split("```text\n", 1)[1].split("\n```", 1)[0]
    return block.splitlines()


def test_every_attempt_the_tests_make_is_listed_and_nothing_else() -> None:
    tried = "\n".join(a.replace(sys.executable, "{python}").replace(CLI, "{cli}")
                      for a in ATTEMPTS).splitlines()
    assert _listed() == tried
