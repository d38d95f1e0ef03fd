"""Which lens a `clavain:reviewer` dispatch reviews through: its prompt's first line names it
(`Lens: quality`), and its answer begins with the same line. Verdicts are filed per lens
(`clavain:reviewer/quality`), and a review gate counts them per lens. Stdlib only."""

from __future__ import annotations

import re

_LENS = re.compile(r"\**Lens:?\**:?\s*`?([a-z][a-z-]{0,31})\b")


def prompt_lens(transcript: object) -> str | None:
    """The lens the reviewer's prompt names on its first line (`Lens: quality`): the first line
    of the transcript's first user message, and only a lens the reviewer knows (a lens named
    further down, or in a file the reviewer read, is not the dispatch's)."""
    from clavain.verdicts.transcript import first_user_text

    return first_line_lens(first_user_text(transcript))


def first_line_lens(text: str) -> str | None:
    """The lens a text's first non-empty line names, if it is one the reviewer knows."""
    from clavain.sprint.route import LENSES

    first_line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    found = _LENS.match(first_line)
    return found[1] if found and found[1] in LENSES else None


