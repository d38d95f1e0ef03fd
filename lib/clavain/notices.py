"""Warnings that must not fail an operation that already committed (a snapshot that could not be
refreshed, a checkpoint whose git sha moved): the library notes them here, the CLI prints them
to stderr after the command's own output, hooks log them. Stdlib only, no imports."""

from __future__ import annotations

_pending: list[str] = []


def warn(message: str) -> None:
    _pending.append(message)


def take() -> list[str]:
    """The warnings noted so far, once."""
    taken = list(_pending)
    _pending.clear()
    return taken
