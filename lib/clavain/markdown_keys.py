"""`KEY: value` lines as agents write them in markdown — `> - **Tests Status:** x`,
`1. _STATUS_ :`, `` `EXIT_SIGNAL`: `` — read one way for every parser of agent output (the
verdict header, the loop's status block). Only the short prefix up to the first colon is
read, so run time does not grow with the line.

No `re`: SubagentStop reads every reviewer's answer with this, and `re` (with the `enum` it
imports and the patterns it compiles) cost that hook about a fifth of its time. The rules are
the patterns' (`tests/unit/test_readers_without_re.py` holds them side by side): whitespace is
what `str.isspace` says and a digit what `str.isdecimal` says, as in `re`.

    prefix = (">" whitespace*)* [bullet whitespace+] open whitespace* KEY whitespace* close
             whitespace* ":"
    bullet = one of - * + •, or 1-2 digits and "." or ")"
    open, close = any run of * _ `
    KEY = an ASCII letter, then at most 40 ASCII letters, digits, spaces, "_" or "-" (the
          shortest that lets the rest close the prefix)
"""

from __future__ import annotations

MAX_PREFIX_CHARS = 64
BULLETS = "-*+•"
EMPHASIS = "*_`"
_LETTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_KEY_CHARS = _LETTERS | frozenset("0123456789 _-")
_KEY_MAX_CHARS = 41


def key_line(line: str) -> tuple[dict[str, str], str, str] | None:
    """({"open", "key", "close"} as written, KEY upper-cased with spaces and hyphens as `_`,
    the raw value after the colon) for a `KEY: value` line; None for any other line."""
    text = line.strip()
    colon = text.find(":", 0, MAX_PREFIX_CHARS)
    parts = _prefix(text[:colon + 1]) if colon > 0 else None
    if parts is None:
        return None
    return parts, snake_upper(parts["key"].strip()), text[colon + 1:]


def snake_upper(text: str) -> str:
    """`Needs attention`, `tests-status` → `NEEDS_ATTENTION`, `TESTS_STATUS`: each run of
    whitespace and hyphens becomes one `_`."""
    out: list[str] = []
    in_run = False
    for char in text:
        if char.isspace() or char == "-":
            if not in_run:
                out.append("_")
            in_run = True
        else:
            out.append(char)
            in_run = False
    return "".join(out).upper()


def skip_quotes(text: str, at: int = 0) -> int:
    """Past any block-quote markers (`>`, each with the whitespace after it) from `at`."""
    while at < len(text) and text[at] == ">":
        at = skip_space(text, at + 1)
    return at


def is_word_char(char: str) -> bool:
    """What `re` calls a word character (`\\w`): a letter, a digit or `_`, in any script."""
    return char.isalnum() or char == "_"


def skip_space(text: str, at: int) -> int:
    while at < len(text) and text[at].isspace():
        at += 1
    return at


def bullet_end(text: str, at: int, max_digits: int) -> int | None:
    """Where a list bullet starting at `at` ends (`-`, `*`, `+`, `•`, or 1 to `max_digits`
    digits and `.` or `)`), before the whitespace that must follow it; None if there is none."""
    if at < len(text) and text[at] in BULLETS:
        return at + 1
    end = at
    while end < len(text) and end - at < max_digits and text[end].isdecimal():
        end += 1
    if end == at or end >= len(text) or text[end] not in ".)":
        return None
    return end + 1


def _prefix(prefix: str) -> dict[str, str] | None:
    """The parts of a line's start up to and including its first colon (which ends `prefix`),
    or None when it is no `KEY:` prefix."""
    start = skip_quotes(prefix)
    bullet = bullet_end(prefix, start, 2)
    if bullet is not None and bullet < len(prefix) and prefix[bullet].isspace():
        found = _after_bullet(prefix, skip_space(prefix, bullet))
        if found is not None:
            return found
    return _after_bullet(prefix, start)


def _after_bullet(prefix: str, at: int) -> dict[str, str] | None:
    opened = at
    while at < len(prefix) and prefix[at] in EMPHASIS:
        at += 1
    key_start = skip_space(prefix, at)
    if key_start >= len(prefix) or prefix[key_start] not in _LETTERS:
        return None
    # The shortest key the rest can close: the rest (before the colon) is whitespace, emphasis,
    # whitespace, and every start within the longest such tail closes too.
    end = max(key_start + 1, _closing_start(prefix))
    if end - key_start > _KEY_MAX_CHARS or \
            not all(char in _KEY_CHARS for char in prefix[key_start + 1:end]):
        return None
    close_start = skip_space(prefix, end)
    close_end = close_start
    while prefix[close_end] in EMPHASIS:
        close_end += 1
    return {"open": prefix[opened:at], "key": prefix[key_start:end],
            "close": prefix[close_start:close_end]}


def _closing_start(prefix: str) -> int:
    """Where the longest tail of `prefix` before its colon that is whitespace, then emphasis,
    then whitespace begins."""
    at = len(prefix) - 1  # the colon
    while at > 0 and prefix[at - 1].isspace():
        at -= 1
    while at > 0 and prefix[at - 1] in EMPHASIS:
        at -= 1
    while at > 0 and prefix[at - 1].isspace():
        at -= 1
    return at
