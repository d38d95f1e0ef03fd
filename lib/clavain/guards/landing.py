"""Where a path lands, and whether an agent may write there: the PreToolUse hook judges the real
path (symlinks, `.` and `..` resolved), not its spelling, so `st/config.json` with `st ->
.clavain` is the state folder and `.claude/./settings.json` is Claude Code's settings.

Places no agent writes (`places`): the state folder outside the agents' folders
(`state_paths.AGENT_FOLDERS`), Claude Code's settings (the project's `.claude/settings.json`
and `settings.local.json`, the user's in CLAUDE_CONFIG_DIR or `~/.claude`), the plugin's own
files (CLAUDE_PLUGIN_ROOT, else the root this package runs from, and the package itself) and
its data folder (CLAUDE_PLUGIN_DATA: the plugin's venv). A state file with a second name (a
hard link) is written through that name unseen: such a file is named (`linked_state_files`).
Stdlib only; nothing here runs unless a word may be a path a call changes.
"""

from __future__ import annotations

import os

# Top-level state files whose link count is watched (a hard link elsewhere edits them unseen).
STATE_FILES = ("config.json", "checkpoint.json", "workgraph.json", "state.sqlite",
               "state.sqlite-wal", "state.sqlite-shm", "state.sqlite-journal")
SETTINGS_NAMES = ("settings.json", "settings.local.json")
# How many entries of the state folder a search for a same-inode file looks at (hook: bounded).
STATE_WALK_LIMIT = 2000

STATE, SETTINGS, PLUGIN, HOLDS = "state", "settings", "plugin", "holds"
_PLACES: dict[tuple[str, str], dict] = {}


def real(path: str) -> str:
    try:
        return os.path.realpath(path)
    except (ValueError, OSError):  # a NUL in the path
        return os.path.abspath(path)


def places(project: str, root: str) -> dict:
    """The real paths of what no agent writes, for the project whose state folder is `root`
    (computed once per process)."""
    key = (project, root)
    if key in _PLACES:
        return _PLACES[key]
    from clavain.guards.state_paths import AGENT_FOLDERS, STATE_NAME

    real_project, real_root = real(project), real(root)
    # An agents' folder is taken as spelled under the real state folder, never through a link
    # planted there (`scratch -> ..` would make the whole folder the agents').
    agents = [os.path.join(real_root, folder[len(STATE_NAME) + 1:].strip("/"))
              if folder.startswith(STATE_NAME + "/") else real(os.path.join(project, folder))
              for folder in AGENT_FOLDERS]
    config = os.environ.get("CLAUDE_CONFIG_DIR") or os.path.join(os.path.expanduser("~"),
                                                                 ".claude")
    projects = {real_project}
    if os.environ.get("CLAUDE_PROJECT_DIR"):
        projects.add(real(os.environ["CLAUDE_PROJECT_DIR"]))
    settings = {real(os.path.join(folder, name)) for name in SETTINGS_NAMES
                for folder in [config] + [os.path.join(p, ".claude") for p in projects]}
    package = real(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    plugin_root = real(os.environ.get("CLAUDE_PLUGIN_ROOT") or os.environ.get(
        "CLAVAIN_ROOT") or os.path.dirname(os.path.dirname(package)))
    # Developing Clavain in its own clone (the project is the plugin): its files are the
    # agent's to edit. A plugin inside a project (`--plugin-dir ./clavain`) stays guarded.
    plugin = [] if under(real_project, plugin_root) else [package, plugin_root]
    data = os.environ.get("CLAUDE_PLUGIN_DATA") or os.environ.get("CLAVAIN_PLUGIN_DATA")
    if data:
        plugin.append(real(data))
    found = {"project": real_project, "root": real_root, "agents": agents,
             "settings": settings, "plugin": plugin}
    _PLACES[key] = found
    return found


def under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def land(path: str, cwd: str | None) -> str | None:
    """The real path `path` (relative to the real folder `cwd`) names, or None when it cannot
    be told (relative to an unknown folder). Symlinks are followed where they exist; a part
    that does not exist yet is taken as spelled (it is no link), and the walk goes on."""
    if path.startswith("~"):
        path = os.path.expanduser(path)
    if path.startswith("/"):
        current = "/"
    elif cwd is None:
        return None
    else:
        current = cwd  # already real: only the parts the word adds are looked at
    for name in path.split("/"):
        if name in ("", "."):
            continue
        if name == "..":
            current = os.path.dirname(current)
            continue
        step = os.path.join(current, name)
        try:
            mode = os.lstat(step).st_mode
        except (ValueError, OSError):  # made by the command: not a link; a `..` after it
            current = step  # climbs back to parts that may be (`mkdir nd; … nd/../st/…`)
            continue
        current = real(step) if mode & 0o170000 == 0o120000 else step  # S_ISLNK
    return current


def judge(landed: str | None, found: dict, *, removing: bool = False) -> str | None:
    """Which place a real path is in (STATE, SETTINGS, PLUGIN), HOLDS when `removing` it
    would take the state folder with it (the folder itself or one holding it), else None."""
    if landed is None:
        return None
    root = found["root"]
    if removing and under(root, landed):
        return HOLDS
    if under(landed, root):
        return None if any(under(landed, a) for a in found["agents"]) else STATE
    if landed in found["settings"]:
        return SETTINGS
    if any(under(landed, p) for p in found["plugin"]):
        return PLUGIN
    return None


def same_inode_as_state(landed: str, root: str) -> str | None:
    """The state file an existing `landed` is another name of (a hard link), else None."""
    try:
        info = os.stat(landed)
    except (OSError, ValueError):
        return None
    if info.st_nlink < 2 or info.st_mode & 0o170000 != 0o100000:  # a folder has 2 or more
        return None
    seen = 0
    for folder, names in walk_tree(root):
        for name in names:
            seen += 1
            path = os.path.join(folder, name)
            try:
                other = os.lstat(path)
            except OSError:
                continue
            if (other.st_ino, other.st_dev) == (info.st_ino, info.st_dev):
                return path
            if seen > STATE_WALK_LIMIT:
                return None
    return None


def walk_tree(root: str):
    """(folder, file names) under `root`, links not followed; bounded by the caller."""
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        names = []
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                else:
                    names.append(entry.name)
            except OSError:
                continue
        yield folder, names


def linked_state_files(root: str) -> list[tuple[str, int]]:
    """(path, link count) of each top-level state file that has another name (st_nlink > 1):
    a write through that name changes the state unseen by any check on paths."""
    found = []
    for name in STATE_FILES:
        path = os.path.join(root, name)
        try:
            info = os.lstat(path)
        except (OSError, ValueError):
            continue
        if info.st_nlink > 1:
            found.append((path, info.st_nlink))
    return found


def other_names(path: str, search: str, limit: int = 50000) -> list[str]:
    """Other names of the file `path` under `search` (for `clavain doctor`; bounded)."""
    try:
        info = os.lstat(path)
    except OSError:
        return []
    others, seen = [], 0
    for folder, names in walk_tree(search):
        for name in names:
            seen += 1
            if seen > limit:
                return others
            candidate = os.path.join(folder, name)
            try:
                other = os.lstat(candidate)
            except OSError:
                continue
            if (other.st_ino, other.st_dev) == (info.st_ino, info.st_dev) and \
                    os.path.abspath(candidate) != os.path.abspath(path):
                others.append(candidate)
    return others


def edit_lands(path: str, cwd: str, project: str, root: str) -> str | None:
    """Where an edit tool's `path` (relative to the call's `cwd`) lands: STATE (the folder, or
    another name of one of its files), SETTINGS, PLUGIN, or None."""
    found = places(project, root)
    landed = land(path, real(cwd))
    verdict = judge(landed, found)
    if verdict is None and landed is not None and same_inode_as_state(landed, found["root"]):
        return STATE
    return verdict


def where_call_lands(call: dict, cwd: str, project: str, root: str, patterns: list) -> str | None:
    """Where a changing call (`budget.describe`'s) writes that no agent may: STATE, SETTINGS,
    PLUGIN or None. A bug here leaves the call to the spelling checks, which already ran: the
    hook must answer, and a crash would drop their denials too."""
    try:
        if call["tool"] == "Bash":
            from clavain.guards.command_landing import lands

            return lands(call["subject"], cwd, project, root, patterns)
        return edit_lands(call["subject"], cwd, project, root) if call["subject"] else None
    except Exception:
        return None
