"""Hard mode: Claude Code's own sandbox keeps `.clavain/` read-only for the agent's Bash.

`clavain init --sandbox` writes a `sandbox` block into the project's
`.claude/settings.local.json` (merged: the person's other settings are kept). Observed on Claude
Code 2.1.330 with bubblewrap 0.8 (Linux):
- `filesystem.denyWrite` with the state folder's absolute path (`//…`) makes it read-only to
  every sandboxed Bash command and its children ("Read-only file system"); a relative `./.clavain`
  resolves against the session's folder, and `settings.json` (unlike `settings.local.json`) is
  not read at all when a session starts in a subfolder: hence the local file and an absolute path.
- `excludedCommands` `clavain` / `clavain *` runs a command that is *only* `clavain …` (also with
  `2>&1`) outside the sandbox, so Clavain's own commands still write their state. Any other
  shape stays sandboxed: a pipe, `&&`, `;`, `||`, `cd … &&`, a redirect, a heredoc, `$(…)`, a
  leading `VAR=…`, `command clavain`, a shell function named `clavain`, `./x/clavain`.
- `allowUnsandboxedCommands: false`: the model's `dangerouslyDisableSandbox` is ignored.
- `failIfUnavailable: true`: Claude Code refuses to start rather than run without the sandbox.
Hooks are not sandboxed (they are the host's), nor are the commands an exempt `clavain` runs:
the verify commands an agent writes into its plan are therefore run by `confine`, under the same
write limits as the agent's Bash. The host's `/sandbox` panel and docs describe the rest
(network through a proxy, writes limited to the project and the temp folder).

Stdlib only, imported lazily: `confine` runs for every verify command.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

SETTINGS_FILE = Path(".claude") / "settings.local.json"
EXCLUDED_COMMANDS = ("clavain", "clavain *")  # the bare word, and with arguments
SETTINGS_MAX_BYTES = 1 << 20
PROBE_TIMEOUT = 30.0
# What a confined command may not write inside the project besides the state folder: the host's
# settings (a planted `excludedCommands` would unsandbox the next session) and git's hooks and
# config (run by the person's git later). Claude Code's sandbox protects the same ones.
PROTECTED_IN_PROJECT = (".claude", ".git/hooks", ".git/config")
INSTALL_HINT = "`sudo apt-get install bubblewrap socat` (or your distribution's packages)"


def settings_file(project: Path) -> Path:
    return Path(project) / SETTINGS_FILE


def deny_entry(state_root: Path) -> str:
    """The `denyWrite` entry for the state folder: `//` + its absolute path (Claude Code's
    prefix for "from the filesystem root"), resolved so a symlinked project matches."""
    return "/" + str(Path(state_root).resolve())


def sandbox_block(state_root: Path) -> dict[str, Any]:
    """What hard mode adds to the settings (`merge` folds it into what is there)."""
    return {
        "enabled": True,
        "failIfUnavailable": True,
        "allowUnsandboxedCommands": False,
        "excludedCommands": list(EXCLUDED_COMMANDS),
        "filesystem": {"denyWrite": [deny_entry(state_root)]},
    }


def merge(settings: dict[str, Any], state_root: Path,
          where: str = str(SETTINGS_FILE)) -> tuple[dict[str, Any], list[str]]:
    """`settings` with hard mode folded in, and what changed (empty: it was already on).
    Every other key is kept; lists gain entries, never lose them. A `sandbox`, `filesystem` or
    list of another type is bad input, named with `where`."""
    from clavain.errors import ClavainError

    result = dict(settings)
    changes: list[str] = []
    sandbox = _object(result.get("sandbox", {}), f"{where}: `sandbox`")
    result["sandbox"] = sandbox = dict(sandbox)
    wanted = sandbox_block(state_root)
    for key in ("enabled", "failIfUnavailable", "allowUnsandboxedCommands"):
        if sandbox.get(key) is not wanted[key]:
            before = json.dumps(sandbox[key]) if key in sandbox else "unset"
            changes.append(f"sandbox.{key}: {before} -> "
                           f"{json.dumps(wanted[key])}")
            sandbox[key] = wanted[key]
    filesystem = dict(_object(sandbox.get("filesystem", {}), f"{where}: `sandbox.filesystem`"))
    for holder, key, label in ((sandbox, "excludedCommands", "sandbox.excludedCommands"),
                               (filesystem, "denyWrite", "sandbox.filesystem.denyWrite")):
        current = holder.get(key, [])
        if not isinstance(current, list):
            raise ClavainError(f"{where}: `{label}` is {type(current).__name__}, not a list: "
                               "fix it, then run the `clavain init` command again")
        source = wanted if holder is sandbox else wanted["filesystem"]
        added = [entry for entry in source[key] if entry not in current]
        if added:
            holder[key] = [*current, *added]
            changes.append(f"{label}: + {', '.join(added)}")
    sandbox["filesystem"] = filesystem
    return result, changes


def _object(value: Any, label: str) -> dict[str, Any]:
    from clavain.errors import ClavainError

    if not isinstance(value, dict):
        raise ClavainError(f"{label} is {type(value).__name__}, not an object: fix it, then run "
                           "the `clavain init` command again")
    return value


def read_settings(path: Path) -> dict[str, Any]:
    """The settings object in `path` ({} when there is none). Anything else is refused with its
    name, so a file Claude Code would reject is never overwritten by a guess."""
    from clavain.errors import ClavainError
    from clavain.fsutil import UnsafePathError, read_state_file

    try:
        raw = read_state_file(path, SETTINGS_MAX_BYTES)
    except UnsafePathError as exc:
        raise ClavainError(str(exc)) from None
    if raw is None:
        return {}
    try:
        value = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ClavainError(f"{path} is not valid JSON ({exc}); Claude Code would not read it "
                           "either: fix it, then run the `clavain init` command again") from None
    return _object(value, str(path))


def host_problem() -> str | None:
    """Why Claude Code's sandbox (and `confine`) cannot run on this machine, or None."""
    if not sys.platform.startswith("linux"):
        return (f"Clavain's hard mode is built on bubblewrap and tested on Linux only (this is "
                f"{sys.platform}); Claude Code's own sandbox (`/sandbox`) still works there")
    missing = [name for name in ("bwrap", "socat") if shutil.which(name) is None]
    if missing:
        return (f"Claude Code's sandbox needs bubblewrap and socat on Linux and "
                f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not on PATH: "
                f"install them with {INSTALL_HINT}")
    # What the host's sandbox needs too: a user namespace with its own network and pid spaces.
    probe = [shutil.which("bwrap") or "bwrap", "--ro-bind", "/", "/", "--dev", "/dev",
             "--unshare-net", "--unshare-pid", "--proc", "/proc", "true"]
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=PROBE_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap cannot run here ({exc})"
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        return (f"bubblewrap cannot run here ({why}): it needs unprivileged user namespaces "
                "(a container may forbid them)")
    return None


def path_entries_inside(project: Path, path_value: str | None = None) -> list[str]:
    """PATH folders inside the project. Claude Code puts the plugin's `bin/` *after* the
    person's PATH, and the exemption matches the name `clavain`: a `clavain` the agent writes
    into such a folder (an activated `.venv/bin`, `node_modules/.bin`) would run unsandboxed."""
    root = Path(project).resolve()
    found = []
    for entry in (os.environ.get("PATH", "") if path_value is None else path_value).split(":"):
        folder = Path(entry or ".").resolve()
        if (folder == root or root in folder.parents) and entry not in found:
            found.append(entry or ".")
    return found


def enable(state_root: Path, project: Path) -> dict[str, Any]:
    """Turn hard mode on for `project`: check the host, merge the block into the settings file
    (written atomically), keep that file out of git (it holds this machine's paths). Returns
    what was done, for printing."""
    from clavain.errors import ClavainError
    from clavain.fsutil import write_json_atomic

    problem = host_problem()
    if problem is not None:
        raise ClavainError(f"hard mode is not available: {problem}", exit_code=1)
    path = settings_file(project)
    settings, changes = merge(read_settings(path), state_root, str(path))
    if changes:
        write_json_atomic(path, settings)
    return {"settings": str(path), "changed": changes, "git_excluded": exclude_from_git(path),
            "deny_write": deny_entry(state_root),
            "path_inside_project": path_entries_inside(project)}


def exclude_from_git(path: Path) -> bool:
    """Add the settings file to the repository's local exclude list (`.git/info/exclude`: this
    clone only, since it names this machine's paths) unless git ignores it already. True when
    it was added."""
    folder = path.parent
    folder.mkdir(parents=True, exist_ok=True)
    try:
        ignored = subprocess.run(["git", "-C", str(folder), "check-ignore", "-q", path.name],
                                 capture_output=True, timeout=30)
        if ignored.returncode != 1:  # 0: ignored already; 128: not a git work tree
            return False
        exclude = subprocess.run(["git", "-C", str(folder), "rev-parse", "--path-format=absolute",
                                  "--git-path", "info/exclude"],
                                 capture_output=True, text=True, timeout=30, check=True)
        top = subprocess.run(["git", "-C", str(folder), "rev-parse", "--show-toplevel"],
                             capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return False
    exclude_file = Path(exclude.stdout.strip())
    line = "/" + path.resolve().relative_to(Path(top.stdout.strip()).resolve()).as_posix()
    exclude_file.parent.mkdir(parents=True, exist_ok=True)
    existing = exclude_file.read_text(encoding="utf-8") if exclude_file.exists() else ""
    with exclude_file.open("a", encoding="utf-8") as handle:
        handle.write(("" if not existing or existing.endswith("\n") else "\n") + line + "\n")
    return True


def hard_mode(project: Path, state_root: Path) -> bool:
    """Whether the project's settings hold hard mode for `state_root` (sandbox on, the folder
    denied): read on each call, so turning the sandbox off in the settings turns this off too."""
    from clavain.fsutil import read_json_object

    settings = read_json_object(settings_file(project), SETTINGS_MAX_BYTES) or {}
    sandbox = settings.get("sandbox")
    if not isinstance(sandbox, dict) or sandbox.get("enabled") is not True:
        return False
    filesystem = sandbox.get("filesystem")
    denied = filesystem.get("denyWrite") if isinstance(filesystem, dict) else None
    return isinstance(denied, list) and deny_entry(state_root) in denied


def confine(argv: list[str], project: Path, state_root: Path) -> list[str]:
    """`argv` as it must run for the agent in hard mode: under bubblewrap, able to write the
    project and the temp folders but not the state folder, the host's settings, git's hooks and
    config, nor anything outside (as the agent's own sandboxed Bash). Unchanged when hard mode is
    off. Same process group and pids (no new pid namespace): stopping the group stops it."""
    if not hard_mode(project, state_root):
        return argv
    from clavain.errors import ClavainError

    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise ClavainError(f"hard mode is on ({settings_file(project)}) and bubblewrap is not "
                           f"installed, so this command cannot run confined: install it with "
                           f"{INSTALL_HINT}, or remove the `sandbox` block from that file",
                           exit_code=1)
    args = [bwrap, "--ro-bind", "/", "/", "--dev-bind", "/dev", "/dev"]
    for writable in dict.fromkeys([*_temp_folders(), Path(project).resolve()]):
        args += ["--bind", str(writable), str(writable)]
    protected = [Path(state_root), *(Path(project) / part for part in PROTECTED_IN_PROJECT)]
    for path in protected:
        if path.exists():
            real = str(path.resolve())
            args += ["--ro-bind", real, real]
    return [*args, "--", *argv]


def _temp_folders() -> list[Path]:
    import tempfile

    found = []
    for candidate in ("/tmp", tempfile.gettempdir()):
        path = Path(candidate).resolve()
        if path.is_dir() and path not in found:
            found.append(path)
    return found


def sandboxed_hint(state_root: Path | None = None) -> str:
    """A clause for an error of a `clavain` that ran inside Claude Code's sandbox with the state
    folder read-only (the host sets SANDBOX_RUNTIME=1 there), else "". Only words: nothing is
    decided on this variable. Never raises: it runs while another error is being reported."""
    if os.environ.get("SANDBOX_RUNTIME") != "1":
        return ""
    try:
        if state_root is None:
            from clavain.paths import StatePaths

            state_root = StatePaths.discover().root
        if not state_root.is_dir() or os.access(state_root, os.W_OK):
            return ""
    except Exception:
        return ""
    return ("; this `clavain` ran inside Claude Code's sandbox, where .clavain/ is read-only "
            "(hard mode): run it as a Bash command of its own, with no pipe, `&&`, `;`, `cd`, "
            "heredoc or redirect around it (`2>&1` is fine), and give input as a file "
            "(`--result FILE`)")
