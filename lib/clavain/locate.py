"""Where a project's Clavain state is, with `os.path` alone: the rules `paths.StatePaths` wraps
in `pathlib` objects, kept here so the per-tool-call hook can find the database without paying
for `pathlib` (which imports `re`, `fnmatch` and `urllib.parse`).

project: CLAVAIN_PROJECT_DIR; else the nearest folder above `cwd` holding `.clavain/` (not the
home folder); else Claude Code's project dir; else the nearest git root; else `cwd` itself.
state folder: CLAVAIN_STATE_DIR, else `<project>/.clavain`. database: CLAVAIN_DB, else
`<state>/state.sqlite`; a CLAVAIN_DB that is a PostgreSQL URL names the shared workgraph store
instead (`store_url`), and the project's own file keeps budgets and session state.
"""

from __future__ import annotations

import os

STATE_DIR_NAME = ".clavain"
DB_NAME = "state.sqlite"
# What a person typed after a slash command (`sprint.typed_once`): named here so the tool-call
# hook looks for a record with one listdir, without importing the module that reads it.
TYPED_DIR_NAME = "typed"


def typed_record(kind: str, session_id: str) -> str:
    """A typed record's file name in TYPED_DIR_NAME (kind "" gives the session's suffix)."""
    return f"{kind}-request-{session_id}.txt"


def _walk_up(start: str, marker: str, *, folder_only: bool = False) -> str | None:
    """The nearest folder from `start` up holding `marker` (a folder, with `folder_only`: a
    file named `.clavain` is no Clavain project; `.git` may be a worktree's file)."""
    exists = os.path.isdir if folder_only else os.path.exists
    folder = start
    while True:
        if exists(os.path.join(folder, marker)):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def payload_cwd(payload: object) -> str:
    """The folder a hook works from. The payload's `cwd` only if it is text naming an existing
    folder (a number, a list, a 5,000-character or missing path must neither lose the verdict
    and the log line nor make a hook create folders there); else CLAUDE_PROJECT_DIR if it is
    one; else this process's own cwd."""
    cwd = payload.get("cwd") if isinstance(payload, dict) else None
    if isinstance(cwd, str) and cwd and os.path.isdir(cwd):  # isdir: False on any OSError
        return cwd
    project = os.environ.get("CLAUDE_PROJECT_DIR")
    if project and os.path.isdir(project):
        return project
    return os.getcwd()


def project_dir(cwd: str | os.PathLike[str] | None = None,
                env: os._Environ[str] | dict[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    explicit = env.get("CLAVAIN_PROJECT_DIR")
    if explicit:
        return os.path.abspath(explicit)
    start = os.path.abspath(cwd) if cwd else os.getcwd()
    found = _walk_up(start, STATE_DIR_NAME, folder_only=True)
    if found is not None and found != os.path.normpath(os.path.expanduser("~")):
        return found
    claude_dir = env.get("CLAUDE_PROJECT_DIR")
    if claude_dir:
        return os.path.abspath(claude_dir)
    return _walk_up(start, ".git") or start


def state_dir(project: str, env: os._Environ[str] | dict[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    explicit = env.get("CLAVAIN_STATE_DIR")
    return os.path.abspath(explicit) if explicit else os.path.join(project, STATE_DIR_NAME)


URL_SCHEMES = ("postgresql://", "postgres://")


def looks_like_url(value: str) -> bool:
    """`scheme:…` (two letters or more: `C:` is a drive): a URL, right or mistyped, never a
    file name to create."""
    head, sep, _ = value.partition(":")
    return bool(sep) and len(head) > 1 and head[0].isalpha() and all(
        c.isalnum() or c in "+.-" for c in head)


def db_file(root: str, env: os._Environ[str] | dict[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    explicit = env.get("CLAVAIN_DB")
    if not explicit or looks_like_url(explicit):  # a URL (or a mistyped one) is no file
        return os.path.join(root, DB_NAME)
    return os.path.abspath(explicit)


def store_url(env: os._Environ[str] | dict[str, str] | None = None) -> str | None:
    """CLAVAIN_DB when it names a server (the team's shared workgraph): a PostgreSQL URL, or
    anything else shaped like a URL, which the store refuses with its reason."""
    env = os.environ if env is None else env
    explicit = env.get("CLAVAIN_DB") or ""
    return explicit if looks_like_url(explicit) else None
