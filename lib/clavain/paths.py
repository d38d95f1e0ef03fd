"""Where Clavain keeps things: the project's `.clavain/` state folder and the plugin's own folders.

Stdlib only: hooks import this on every call. Environment overrides, strongest first:
CLAVAIN_STATE_DIR (the whole state folder), CLAVAIN_DB (just the database file),
CLAVAIN_PROJECT_DIR / CLAUDE_PROJECT_DIR (the project root).
"""

from __future__ import annotations

import os
from pathlib import Path

STATE_DIR_NAME = ".clavain"

# Parts of .clavain/ that are machine state, not something to commit.
VOLATILE_PARTS = (
    "state.sqlite",
    "state.sqlite-wal",
    "state.sqlite-shm",
    "workgraph.json",
    "checkpoint.json",
    "verdicts/",
    "artifacts/",
    "runs/",
    "scratch/",
    "logs/",
    "*.lock",
)


def _walk_up(start: Path, marker: str) -> Path | None:
    for folder in (start, *start.parents):
        if (folder / marker).exists():
            return folder
    return None


def project_root(cwd: str | os.PathLike[str] | None = None) -> Path:
    """The project a command or hook works on.

    An explicit env root wins; else the nearest folder above `cwd` holding `.clavain/`;
    else Claude Code's project dir; else the nearest git root; else `cwd` itself.
    """
    explicit = os.environ.get("CLAVAIN_PROJECT_DIR")
    if explicit:
        return Path(explicit)
    start = Path(cwd) if cwd else Path.cwd()
    found = _walk_up(start, STATE_DIR_NAME)
    if found is not None and found != Path.home():
        return found
    claude_dir = os.environ.get("CLAUDE_PROJECT_DIR")
    if claude_dir:
        return Path(claude_dir)
    return _walk_up(start, ".git") or start


class StatePaths:
    """Every path under a project's `.clavain/` folder.

    A plain class rather than a dataclass: `dataclasses` drags in `inspect` (~7 ms), and hooks
    construct this on every call.
    """

    __slots__ = ("root",)

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StatePaths) and other.root == self.root

    def __hash__(self) -> int:
        return hash(self.root)

    def __repr__(self) -> str:
        return f"StatePaths({str(self.root)!r})"

    @classmethod
    def discover(cls, cwd: str | os.PathLike[str] | None = None) -> StatePaths:
        explicit = os.environ.get("CLAVAIN_STATE_DIR")
        if explicit:
            return cls(Path(explicit))
        return cls(project_root(cwd) / STATE_DIR_NAME)

    @property
    def project(self) -> Path:
        return self.root.parent

    @property
    def db(self) -> Path:
        explicit = os.environ.get("CLAVAIN_DB")
        return Path(explicit) if explicit else self.root / "state.sqlite"

    @property
    def workgraph_json(self) -> Path:
        return self.root / "workgraph.json"

    @property
    def checkpoint(self) -> Path:
        return self.root / "checkpoint.json"

    @property
    def verdicts(self) -> Path:
        return self.root / "verdicts"

    @property
    def artifacts(self) -> Path:
        return self.root / "artifacts"

    @property
    def runs(self) -> Path:
        return self.root / "runs"

    @property
    def scratch(self) -> Path:
        return self.root / "scratch"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def hooks_log(self) -> Path:
        return self.logs / "hooks.log"

    @property
    def config(self) -> Path:
        return self.root / "config.json"


def plugin_root() -> Path:
    """The plugin folder (holds bin/, agents/, skills/). Changes on every plugin update."""
    explicit = os.environ.get("CLAUDE_PLUGIN_ROOT")
    if explicit:
        return Path(explicit)
    return Path(__file__).resolve().parents[2]


def plugin_data_dir() -> Path | None:
    """Claude Code's per-plugin folder that survives updates (where the venv lives), if known.

    Hooks get CLAUDE_PLUGIN_DATA; Bash tool calls do not, so SessionStart exports it to them
    as CLAVAIN_PLUGIN_DATA.
    """
    explicit = os.environ.get("CLAUDE_PLUGIN_DATA") or os.environ.get("CLAVAIN_PLUGIN_DATA")
    return Path(explicit) if explicit else None
