"""Tools that work beside Clavain, found at SessionStart and exported as `CLAVAIN_COMPANIONS`
for Bash tool calls (and the skills that read it), never put in the model's context: beads'
`bd` on the PATH, and the other plugins the host has installed and not disabled.

Installed plugins are the keys of `<config>/plugins/installed_plugins.json` (`name@marketplace`,
as 2.1.330 writes it), else the folders of the plugin cache
(`<config>/plugins/cache/<marketplace>/<plugin>/`); a plugin set to `false` under
`enabledPlugins` in the user's or the project's settings is left out. Stdlib only.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:  # SessionStart imports this: no `pathlib` import of its own
    from pathlib import Path

SELF = "clavain"
MAX_NAMES = 20
MAX_FILE_BYTES = 1 << 20


def detect(config_dir: Path, path: str | None = None, project: Path | None = None) -> list[str]:
    """Sorted names: `bd` when it is on `path`, and the other installed, enabled plugins."""
    names: set[str] = set()
    if _on_path("bd", path if path is not None else os.environ.get("PATH")):
        names.add("bd")
    disabled = _disabled([config_dir / "settings.json"] + (
        [project / ".claude" / "settings.json", project / ".claude" / "settings.local.json"]
        if project is not None else []))
    installed = _json(config_dir / "plugins" / "installed_plugins.json")
    plugins = installed.get("plugins") if isinstance(installed, dict) else None
    if isinstance(plugins, dict):
        keys = [key for key in plugins if isinstance(key, str) and key not in disabled]
        names.update(key.split("@", 1)[0] for key in keys)
    else:
        names.update(_cached(config_dir / "plugins" / "cache"))
    names.discard(SELF)
    return sorted(name for name in names if _plain(name))[:MAX_NAMES]


def _disabled(settings_files: list[Path]) -> set[str]:
    disabled = set()
    for settings in settings_files:
        document = _json(settings)
        enabled = document.get("enabledPlugins") if isinstance(document, dict) else None
        if isinstance(enabled, dict):
            disabled.update(key for key, value in enabled.items() if value is False)
    return disabled


def _cached(cache: Path) -> set[str]:
    names: set[str] = set()
    try:
        marketplaces = [entry.path for entry in os.scandir(cache) if entry.is_dir()]
    except OSError:
        return names
    for marketplace in marketplaces:
        try:
            names.update(entry.name for entry in os.scandir(marketplace) if entry.is_dir())
        except OSError:
            continue
    return names


def _on_path(name: str, path: str | None) -> bool:
    """Whether `shutil.which(name, path=path)` finds `name` (a plain command name) on POSIX:
    an executable that is not a folder in one of `path`'s folders (None: the system's default
    search path). `shutil` costs SessionStart bz2, lzma and fnmatch imports."""
    if path is None:
        try:
            path = os.confstr("CS_PATH")
        except (AttributeError, ValueError):
            path = os.defpath
    if not path:
        return False
    for folder in dict.fromkeys(os.path.normcase(part) for part in path.split(os.pathsep)):
        candidate = os.path.join(folder, name)
        if os.path.exists(candidate) and os.access(candidate, os.F_OK | os.X_OK) and \
                not os.path.isdir(candidate):
            return True
    return False


def _json(path: Path) -> object:
    from clavain import fastjson  # `json` costs an import (and `re`); the same results
    from clavain.fsutil import read_regular

    raw = read_regular(path, MAX_FILE_BYTES)
    try:
        return fastjson.loads(raw.decode("utf-8")) if raw else None
    except ValueError:
        return None


def _plain(name: str) -> bool:
    """A name safe in a comma-separated list: letters, digits, `-`, `_`, `.`."""
    return bool(name) and not name.startswith(".") and \
        all(c.isascii() and (c.isalnum() or c in "-_.") for c in name)
