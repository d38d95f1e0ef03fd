"""`KEY: value` lines as agents write them in markdown — `> - **Tests Status:** x`,
`1. _STATUS_ :`, `` `EXIT_SIGNAL`: `` — read one way for every parser of agent output (the
verdict header, the loop's status block). Only the short prefix up to the first colon is
matched, so run time does not grow with the line."""

from __future__ import annotations

import re

KEY_PREFIX = re.compile(
    r"^(?:>\s*)*(?:(?:[-*+•]|\d{1,2}[.)])\s+)?(?P<open>[*_`]*)\s*"
    r"(?P<key>[A-Za-z][A-Za-z0-9 _-]{0,40}?)\s*(?P<close>[*_`]*)\s*:$"
)
MAX_PREFIX_CHARS = 64


def key_line(line: str) -> tuple[re.Match[str], str, str] | None:
    """(the prefix match, KEY upper-cased with spaces and hyphens as `_`, the raw value after
    the colon) for a `KEY: value` line; None for any other line."""
    text = line.strip()
    colon = text.find(":", 0, MAX_PREFIX_CHARS)
    match = KEY_PREFIX.match(text, 0, colon + 1) if colon > 0 else None
    if not match:
        return None
    return match, re.sub(r"[\s-]+", "_", match["key"].strip()).upper(), text[colon + 1:]
