"""Finding the real `claude` binary: for doctor, the e2e tier and benchmarks."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

PINNED_VERSION = "2.1.330"


def cache_install_dir(version: str = PINNED_VERSION) -> Path:
    """Where `.ci/run` installs the pinned binary with npm (outside the repo)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "clavain" / f"claude-code-{version}"


def find_claude() -> Path | None:
    """CLAVAIN_CLAUDE_BIN, else the pinned cache install, else `claude` on PATH, else the binary
    running this session (CLAUDE_CODE_EXECPATH)."""
    explicit = os.environ.get("CLAVAIN_CLAUDE_BIN")
    if explicit:
        return Path(explicit) if os.access(explicit, os.X_OK) else None
    modules = cache_install_dir() / "node_modules"
    for candidate in (
        modules / ".bin" / "claude",
        modules / "@anthropic-ai" / "claude-code-linux-x64" / "claude",
    ):
        if candidate.exists() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("claude")
    if found:
        return Path(found)
    # Inside a session the Bash tool gets the running binary's path, even when it is on no PATH.
    running = os.environ.get("CLAUDE_CODE_EXECPATH")
    if running and os.access(running, os.X_OK):
        return Path(running)
    return None
