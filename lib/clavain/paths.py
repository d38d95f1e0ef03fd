"""Where Clavain keeps things: the project's `.clavain/` state folder and the plugin's own folders.

Stdlib only: hooks import this on every call. Environment overrides, each for one root:
CLAVAIN_PROJECT_DIR (the project; else CLAUDE_PROJECT_DIR and a search), CLAVAIN_STATE_DIR
(the state folder), CLAVAIN_DB (the database file; a PostgreSQL URL puts the workgraph on that
server instead). They are read once, by `StatePaths.discover`.
"""

from __future__ import annotations

import os
from _collections_abc import Mapping  # what collections.abc holds, without `collections`
from pathlib import Path

from clavain.locate import STATE_DIR_NAME  # noqa: F401  (re-exported)

# Where parallel runners' git worktrees live: beside the state folder, in the project, not in
# it. Hard mode keeps the state folder read-only to every sandboxed or confined process, and a
# runner's session and its checks must write their worktree; inside the project, the host's
# sandbox and `confine` already let them (both write only their folder and the temp folders).
# Clavain alone creates and removes it; it ignores itself in git (a `*` .gitignore inside).
WORKTREES_DIR_NAME = ".clavain-worktrees"

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
    "worktrees/",  # where an older Clavain kept runners' worktrees
    "hard-mode.json",
    "scratch/",
    "loops/",
    "logs/",
    "*.lock",
    "*.pending",
)


# What an id may keep in a folder name: the rest becomes `_` (ASCII letters and digits only).
_SAFE_PATH_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-")


def safe_path_part(name: str) -> str:
    """A node or run id as one folder or file name (runs, worktrees, logs, checks): ids come
    from agents, so no `/` or `..` escapes, and nothing hidden."""
    cleaned = "".join(c if c in _SAFE_PATH_CHARS else "_" for c in name).lstrip(".")
    return cleaned or "_"


def project_root(cwd: str | os.PathLike[str] | None = None,
                 env: Mapping[str, str] | None = None) -> Path:
    """The project a command or hook works on (the rules: `clavain.locate`)."""
    from clavain.locate import project_dir

    return Path(project_dir(cwd, env))


class StatePaths:
    """Where one project's state lives, resolved once: the project root (where verify commands
    run), the state folder and the database, plus every path under the state folder.

    Immutable, and nothing reads the environment after `discover`: the value passed down is
    the one every layer uses. A plain class rather than a dataclass: `dataclasses` drags in
    `inspect` (~7 ms), and hooks construct this on every call.
    """

    __slots__ = ("db", "project", "root", "store_url")

    def __init__(self, root: str | os.PathLike[str], *,
                 project: str | os.PathLike[str] | None = None,
                 db: str | os.PathLike[str] | None = None,
                 store_url: str | None = None) -> None:
        root = Path(root)
        object.__setattr__(self, "root", root)
        object.__setattr__(self, "project", Path(project) if project else root.parent)
        object.__setattr__(self, "db", Path(db) if db else root / "state.sqlite")
        # A shared workgraph server (CLAVAIN_DB=postgresql://…); None: the graph is in `db`.
        object.__setattr__(self, "store_url", store_url or None)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("StatePaths is immutable; build a new one")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StatePaths) and (
            other.root, other.project, other.db, other.store_url) == (
            self.root, self.project, self.db, self.store_url)

    def __hash__(self) -> int:
        return hash((self.root, self.project, self.db, self.store_url))

    def __repr__(self) -> str:
        return (f"StatePaths({str(self.root)!r}, project={str(self.project)!r}, "
                f"db={str(self.db)!r})")

    @classmethod
    def discover(cls, cwd: str | os.PathLike[str] | None = None,
                 env: Mapping[str, str] | None = None) -> StatePaths:
        """Resolve the three roots from the environment (read here and only here):
        project = CLAVAIN_PROJECT_DIR or the search in `project_root`; state folder =
        CLAVAIN_STATE_DIR or `<project>/.clavain`; database = CLAVAIN_DB or
        `<state>/state.sqlite`, unless CLAVAIN_DB is a PostgreSQL URL (then the workgraph is
        there and the database is `<state>/state.sqlite`)."""
        from clavain import locate

        env = os.environ if env is None else env
        project = locate.project_dir(cwd, env)
        root = locate.state_dir(project, env)
        return cls(root, project=project, db=locate.db_file(root, env),
                   store_url=locate.store_url(env))

    @property
    def worktrees(self) -> Path:
        """Parallel runners' git worktrees (`WORKTREES_DIR_NAME`, beside the state folder)."""
        return self.project / WORKTREES_DIR_NAME

    @property
    def workgraph_json(self) -> Path:
        return self.root / "workgraph.json"

    @property
    def sprint_checkpoint(self) -> Path:
        """The active sprint's checkpoint (not a node's question to a human)."""
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
    def handoff_note(self) -> Path:
        """What one session leaves the next; archived with the sprint."""
        return self.scratch / "handoff.md"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def hooks_log(self) -> Path:
        return self.logs / "hooks.log"

    @property
    def config(self) -> Path:
        return self.root / "config.json"


# Where a wheel carries skills/, commands/, agents/ and schemas/ (see setup.py).
PACKAGED_PLUGIN = "_plugin"


def plugin_root() -> Path:
    """The plugin folder (holds skills/, commands/, agents/; bin/ and hooks/ too unless a
    package). Changes on every plugin update.

    In a clone (an editable install, bin/clavain) and in Claude Code's plugin cache the package
    sits at `<root>/lib/clavain`; a built wheel carries the folders the CLI names inside the
    package, at `clavain/_plugin/` (setup.py puts them there), since its parents are
    site-packages.
    """
    explicit = os.environ.get("CLAUDE_PLUGIN_ROOT")
    if explicit:
        return Path(explicit)
    package = Path(__file__).resolve().parent
    shipped = package / PACKAGED_PLUGIN
    if shipped.is_dir():
        return shipped
    return package.parents[1]


def install_kind(root: Path | None = None) -> str:
    """How this Clavain is installed, from where its plugin root is: "plugin" (Claude Code's
    plugin cache, or a session naming CLAUDE_PLUGIN_ROOT), "package" (a non-editable pip
    install: a wheel's folders), "clone" (a checkout: editable install or bin/clavain),
    "export" (the plugin's files copied out of a clone for Claude Code, no .git), or "unknown"
    (a root holding none of the plugin's folders)."""
    root = plugin_root() if root is None else root
    if os.environ.get("CLAUDE_PLUGIN_ROOT"):
        return "plugin"
    if root.name == PACKAGED_PLUGIN and root.parent.name == "clavain":
        return "package"
    plugins = claude_config_dir() / "plugins"
    if root.resolve().is_relative_to(plugins.resolve()):
        return "plugin"
    if (root / ".claude-plugin" / "plugin.json").is_file():
        # scripts/install-plugin.sh exports what git tracks, without .git (or a venv).
        return "clone" if (root / ".git").exists() else "export"
    return "unknown"


def plugin_data_dir() -> Path | None:
    """Claude Code's per-plugin folder that survives updates (where the venv lives), if known.

    Hooks get CLAUDE_PLUGIN_DATA; Bash tool calls do not, so SessionStart exports it to them
    as CLAVAIN_PLUGIN_DATA.
    """
    explicit = os.environ.get("CLAUDE_PLUGIN_DATA") or os.environ.get("CLAVAIN_PLUGIN_DATA")
    return Path(explicit) if explicit else None


def claude_config_dir() -> Path:
    """Claude Code's own folder (transcripts, plugins, settings): CLAUDE_CONFIG_DIR, else
    `~/.claude`."""
    explicit = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(explicit) if explicit else Path.home() / ".claude"
