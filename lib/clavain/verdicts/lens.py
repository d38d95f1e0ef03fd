"""Which lens a `clavain:reviewer` dispatch reviews through: its prompt's first line names it
(`Lens: quality`), and its answer begins with the same line. Verdicts are filed per lens
(`clavain:reviewer/quality`), and a review gate counts them per lens. Stdlib only."""

from __future__ import annotations

from clavain.markdown_keys import is_word_char

_LOWER = frozenset("abcdefghijklmnopqrstuvwxyz")
_LENS_CHARS = _LOWER | {"-"}
_LENS_MAX_CHARS = 32


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
    found = lens_named(first_line)
    return found if found in LENSES else None


def lens_named(line: str) -> str | None:
    """The lens word a line starts with (`Lens: quality`, `**Lens:** quality`, `Lens: `x``):
    up to 32 lower-case letters and hyphens, starting with a letter, cut where a word ends.
    The rule of the pattern `\\**Lens:?\\**:?\\s*`?([a-z][a-z-]{0,31})\\b`, without `re`
    (SubagentStop reads every reviewer's lens)."""
    at = len(line) - len(line.lstrip("*"))
    if not line.startswith("Lens", at):
        return None
    at += len("Lens")
    at += line.startswith(":", at)
    at += len(line[at:]) - len(line[at:].lstrip("*"))
    at += line.startswith(":", at)
    at += len(line[at:]) - len(line[at:].lstrip())
    at += line.startswith("`", at)
    if at >= len(line) or line[at] not in _LOWER:
        return None
    end = at + 1
    while end < len(line) and end - at < _LENS_MAX_CHARS and line[end] in _LENS_CHARS:
        end += 1
    while end > at:  # back to where a word ends (`\\b`)
        if is_word_char(line[end - 1]) != (end < len(line) and is_word_char(line[end])):
            return line[at:end]
        end -= 1
    return None
