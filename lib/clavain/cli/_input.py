"""Reading a command's FILE|- argument: one place for stdin, bytes that are not UTF-8, and the
one-line errors."""

from __future__ import annotations

import sys

from clavain.errors import ClavainError


def _stdin_bytes() -> bytes:
    """Stdin as bytes; a text stream without `.buffer` (stdin replaced in-process) too."""
    stream = getattr(sys.stdin, "buffer", None)
    if stream is not None:
        return stream.read()
    return sys.stdin.read().encode("utf-8", errors="surrogateescape")


def read_input(source: str, *, lenient: bool = False) -> str:
    """The text of FILE or stdin (`-`). `lenient` replaces bytes that are not UTF-8 (a runner's
    log or an agent's answer holds whatever its tools printed); otherwise they are an error."""
    try:
        if source == "-":
            raw = _stdin_bytes()
        else:
            with open(source, "rb") as handle:
                raw = handle.read()
    except OSError as exc:
        raise ClavainError(f"cannot read {source}: {exc.strerror}") from None
    from clavain.textio import BadText, decode

    try:
        return decode(raw, "stdin" if source == "-" else source, lenient=lenient)
    except BadText as exc:
        raise ClavainError(str(exc)) from None


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value
