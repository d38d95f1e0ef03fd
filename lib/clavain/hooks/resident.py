"""Where the resident hook server is and its lifetime: the address file, starting, reviving,
replacing and stopping it (the server itself is `hook_server`). One warm Python process per
plugin install runs the per-tool-call hooks for every session and project of its user, so a
tool call pays for bash and a loopback round trip instead of an interpreter start, imports and
loading SQLite.

Address: `<plugin data>/hookd.addr`, one line `PORT TOKEN SERVER_KEY PID STAMP ROOT`, mode
0600. The token (128 random bits) keeps other local users off the loopback port and the server
key proves the server to the client (`hook_server` has the protocol); the client checks that
PID is alive and ROOT is its own plugin folder; STAMP names the code the server runs. One
server per data folder: SessionStart replaces a server running other code or an older plugin
version, never a newer one. A tool call that found no server starts one (at most one try per
30 s). CLAVAIN_RESIDENT_HOOKS=0 turns all of it off. Stdlib only, `os` and `time` at
import: `revive` runs in the spawned hook.
"""

from __future__ import annotations

import os
import time

ADDRESS_NAME = "hookd.addr"
LOCK_NAME = "hookd.lock"
SPAWNED_NAME = "hookd.spawned"
RESPAWN_EVERY_SECONDS = 30.0


def enabled() -> bool:
    return os.environ.get("CLAVAIN_RESIDENT_HOOKS", "1") != "0"


def data_dir() -> str | None:
    """The plugin data folder the server's address lives in (hooks get CLAUDE_PLUGIN_DATA; Bash
    tool calls get CLAVAIN_PLUGIN_DATA from SessionStart)."""
    return os.environ.get("CLAUDE_PLUGIN_DATA") or os.environ.get("CLAVAIN_PLUGIN_DATA") or None


def plugin_root() -> str:
    """The plugin folder as bin/clavain-hook names it (it exports CLAVAIN_ROOT), so the client's
    string comparison matches; else derived from this file."""
    explicit = os.environ.get("CLAVAIN_ROOT")
    if explicit:
        return explicit
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))


def read_address(data: str) -> dict | None:
    """{"port", "token", "server_key", "pid", "stamp", "root"} from the address file, or
    None."""
    try:
        with open(os.path.join(data, ADDRESS_NAME), encoding="utf-8") as handle:
            line = handle.readline(8192).rstrip("\n")
    except (OSError, ValueError):
        return None
    parts = line.split(" ", 5)
    if len(parts) != 6 or not parts[0].isdigit() or not parts[3].isdigit():
        return None
    return {"port": int(parts[0]), "token": parts[1], "server_key": parts[2],
            "pid": int(parts[3]), "stamp": parts[4], "root": parts[5]}


def alive(pid: int) -> bool:
    """Whether `pid` is a live process this user may signal (as the client's `kill -0`)."""
    try:
        os.kill(pid, 0)
    except (OSError, OverflowError):
        return False
    return True


def code_stamp(lib: str | None = None) -> str:
    """A short hash of the library's files (path, size, mtime): what a server runs."""
    import hashlib

    from clavain.detached import LIB_DIR

    lib = lib or LIB_DIR
    digest = hashlib.blake2b(digest_size=8)
    for folder, dirs, files in os.walk(os.path.join(lib, "clavain")):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith((".py", ".sql")):
                path = os.path.join(folder, name)
                try:
                    info = os.stat(path)
                except OSError:
                    continue
                digest.update(f"{path}\0{info.st_size}\0{info.st_mtime_ns}\n".encode(
                    "utf-8", "surrogateescape"))
    return digest.hexdigest()


def spawn(data: str, root: str) -> None:
    """Start a detached server, and note when, so a tool call racing its start does not start
    another."""
    from clavain import detached

    marker = os.path.join(data, SPAWNED_NAME)
    with open(marker, "w", encoding="utf-8"):
        pass
    os.utime(marker)  # an empty file truncated again need not get a new mtime
    detached.start("clavain.hooks.hook_server", [data, root], cwd=data)


def revive() -> bool:
    """From a tool call that was not served by a server: start one when none runs in the data
    folder and no start was tried in the last 30 s. True when one was started."""
    data = data_dir()
    if not enabled() or not data or not os.path.isdir(data):
        return False
    address = read_address(data)
    if address is not None and alive(address["pid"]):
        return False  # ours, or another plugin version's: SessionStart decides between them
    try:
        if time.time() - os.stat(os.path.join(data, SPAWNED_NAME)).st_mtime \
                < RESPAWN_EVERY_SECONDS:
            return False
    except OSError:
        pass
    spawn(data, plugin_root())
    return True


def ensure(data: str, root: str | None = None) -> str:
    """From SessionStart: "running" (a server for this plugin folder and code is up), "newer"
    (one serves a newer plugin version: an old session must not take the data folder back),
    "restarted" (one for other code or an older version was stopped and a new one started) or
    "started"."""
    root = root or plugin_root()
    address = read_address(data)
    live = address is not None and alive(address["pid"])
    if live and address["root"] == root and address["stamp"] == code_stamp():
        return "running"
    if live and address["root"] != root and \
            plugin_version(address["root"]) > plugin_version(root):
        return "newer"
    if live:
        stop(data)
    spawn(data, root)
    return "restarted" if live else "started"


def plugin_version(root: str) -> tuple:
    """The version in a plugin folder's manifest, comparable; () when it has none (a folder
    gone or unreadable loses to any version)."""
    import json

    try:
        with open(os.path.join(root, ".claude-plugin", "plugin.json"), encoding="utf-8") as f:
            text = json.load(f).get("version", "")
    except (OSError, ValueError, AttributeError):
        return ()
    parts = str(text).split("+")[0].split("-")[0].split(".")
    return tuple(int(part) if part.isdigit() else 0 for part in parts)


def stop(data: str) -> int | None:
    """Stop the server of `data`: its address file goes (it exits within a second, after the
    calls at hand) and, where /proc shows the pid is still that server, SIGTERM. The server's
    pid, or None when no server was there (without /proc: the pid the address named)."""
    address = read_address(data)
    try:  # noqa: SIM105 - contextlib is one more import in this module of the hot path
        os.unlink(os.path.join(data, ADDRESS_NAME))
    except OSError:
        pass
    if address is None or not alive(address["pid"]):
        return None
    if not os.path.isdir("/proc/self"):
        return address["pid"]
    try:
        with open(f"/proc/{address['pid']}/cmdline", "rb") as handle:
            if b"clavain.hooks.hook_server" not in handle.read():
                return None
    except OSError:
        return None
    import signal

    try:
        os.kill(address["pid"], signal.SIGTERM)
    except OSError:
        return None
    return address["pid"]


def data_dirs() -> list[str]:
    """The plugin data folders a person's `clavain hook-server` looks at: the one named by the
    session (CLAUDE_PLUGIN_DATA / CLAVAIN_PLUGIN_DATA), else Clavain's under Claude Code's
    `plugins/data/` (a marketplace install and a `--plugin-dir` one each have their own)."""
    named = data_dir()
    if named:
        return [named]
    root = plugins_data_root()
    try:
        folders = sorted(os.path.join(root, name) for name in os.listdir(root))
    except OSError:
        return []
    from pathlib import Path

    from clavain import bootstrap

    def clavains(folder: str) -> bool:
        """Holds the server's files or the plugin venv."""
        return any(os.path.exists(os.path.join(folder, name)) for name in
                   (ADDRESS_NAME, LOCK_NAME)) or \
            (bootstrap.venv_dir(Path(folder)) / bootstrap.READY_MARKER).exists()

    return [folder for folder in folders if clavains(folder)]


def plugins_data_root() -> str:
    config = os.environ.get("CLAUDE_CONFIG_DIR") or os.path.join(os.path.expanduser("~"),
                                                                 ".claude")
    return os.path.join(config, "plugins", "data")


def status(data: str) -> dict:
    """The server of one data folder: {"state": "running", pid, port, root, code_current} or
    {"state": "stopped"}; `data_dir` in both."""
    address = read_address(data)
    if address is None or not alive(address["pid"]):
        return {"state": "stopped", "data_dir": data}
    current = address["stamp"] == code_stamp(os.path.join(address["root"], "lib"))
    return {"state": "running", "data_dir": data, "pid": address["pid"],
            "port": address["port"], "root": address["root"], "code_current": current}


def overview() -> dict:
    """What `clavain hook-server status` and `clavain doctor` show: whether resident hooks are
    on, where it looked, and each data folder's server."""
    return {"enabled": enabled(), "looked_in": data_dir() or plugins_data_root(),
            "servers": [status(data) for data in data_dirs()]}


def describe(shown: dict) -> list[str]:
    """Lines for a person: what `overview` found."""
    lines = []
    if not shown["enabled"]:
        lines.append("Resident hooks are off here (CLAVAIN_RESIDENT_HOOKS=0): every tool-call "
                     "hook starts its own Python process.")
    if not shown["servers"]:
        lines.append(f"No Clavain plugin data folder in {shown['looked_in']} (Claude Code "
                     "makes one when the plugin runs; CLAVAIN_PLUGIN_DATA names another).")
    for server in shown["servers"]:
        if server["state"] == "running":
            code = "current code" if server["code_current"] else \
                "older code: the next session replaces it"
            lines.append(f"Hook server running: pid {server['pid']}, "
                         f"127.0.0.1:{server['port']}, {code} ({server['data_dir']})")
        else:
            lines.append(f"Hook server not running: the next session or tool call starts one "
                         f"({server['data_dir']})")
    return lines
