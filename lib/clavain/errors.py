"""The one exception type the CLI turns into a clean one-line error and exit code."""

from __future__ import annotations


class ClavainError(Exception):
    """Bad input or an impossible request: one line naming the problem and the fix.

    `exit_code` 2 means bad input (nothing was written); other codes are command-specific.
    """

    def __init__(self, message: str, *, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code
