"""Hard mode: Claude Code's own sandbox keeps `.clavain/`, the plugin and the host's settings
read-only for the agent's Bash, and its file tools refuse them.

A person's `clavain init` turns it on where the machine can sandbox (`confine.host_problem`):
it merges a `sandbox` block and `permissions.deny` rules into the project's
`.claude/settings.local.json` (the person's other settings are kept) and records what it added
(`.clavain/hard-mode.json`), so `clavain init --no-sandbox` takes exactly that away again.
Observed on Claude Code 2.1.330 with bubblewrap 0.8 (Linux):
- `filesystem.denyWrite` with an absolute path (`//…`) makes it read-only to every sandboxed
  Bash command and its children ("Read-only file system"; renaming it: "Device or resource
  busy"); a path that does not exist yet is masked with /dev/null (a write: "Permission
  denied"), so nothing can be created there either. A relative `./x` resolves against the
  session's folder, and `settings.json` (unlike `settings.local.json`) is not read at all when
  a session starts in a subfolder: hence the local file and absolute paths. A session started
  in a git worktree inside the project reads the project's local file too.
- The host keeps the project's `.claude/settings.json` and `settings.local.json` read-only
  itself (also through `cd .claude/. && …`); outside the session's folder nothing is writable.
- `permissions.deny` `Edit(//abs/**)` (a folder) or `Edit(//abs)` (a file) makes Write, Edit
  and NotebookEdit refuse the path ("denied by your permission settings").
- `excludedCommands` `clavain` / `clavain *` runs a command that is *only* `clavain …` (also with
  `2>&1`) outside the sandbox, so Clavain's own commands still write their state. Any other
  shape stays sandboxed: a pipe, `&&`, `;`, `||`, `cd … &&`, a redirect, a heredoc, `$(…)`, a
  leading `VAR=…`, `command clavain`, a shell function named `clavain`, `./x/clavain`.
- `allowUnsandboxedCommands: false`: the model's `dangerouslyDisableSandbox` is ignored.
- `failIfUnavailable: true`: Claude Code refuses to start rather than run without the sandbox.
- The network goes through the host's proxy, which refuses every domain not allowed (headless
  runners cannot be asked): where Clavain turns the sandbox on and the person named no domains,
  it allows `*`, so the network stays as it was without the sandbox.
- `claude --settings '<json>'` takes the same block for one session (a runner's).
Hooks are not sandboxed (they are the host's), nor are the commands an exempt `clavain` runs:
the verify commands an agent writes into its plan are therefore run by `confine`, under the
same write limits as the agent's Bash.

Stdlib only, imported lazily: `confine` runs for every verify command.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

# The status line asks `hard_mode` after every assistant message: nothing heavier than `os` is
# imported here; `json` and `pathlib` inside the functions that need them.
SETTINGS_FILE = os.path.join(".claude", "settings.local.json")
HOST_SETTINGS = ("settings.json", "settings.local.json")
EXCLUDED_COMMANDS = ("clavain", "clavain *")  # the bare word, and with arguments
SETTINGS_MAX_BYTES = 1 << 20
RECORD_NAME = "hard-mode.json"
# What a confined command may not write inside its folder besides the protected paths: the
# host's settings (a planted `excludedCommands` would unsandbox the next session) and git's
# hooks and config (run by the person's git later). Claude Code's sandbox protects the same.
PROTECTED_IN_PROJECT = (".claude", ".git/hooks", ".git/config")
SCALARS = {"enabled": True, "failIfUnavailable": True, "allowUnsandboxedCommands": False}
# The state folder's own parts the file tools are refused, by name (whether there yet or not):
# every part but `scratch/`, where the agent writes its handoff note with the Write tool. A rule
# for the folder itself (or `folder/*`, observed) would refuse that too.
STATE_PARTS = ("checkpoint.json", "config.json", "state.sqlite", "state.sqlite-wal",
               "state.sqlite-shm", "workgraph.json", RECORD_NAME, "verdicts", "artifacts",
               "runs", "logs", "loops", "typed", "usage", "locks", "worktrees")
AGENT_PART = "scratch"
OPEN_NETWORK = ["*"]


def settings_file(project: Path) -> Path:
    from pathlib import Path

    return Path(project) / SETTINGS_FILE


def deny_entry(path: str | os.PathLike[str]) -> str:
    """A settings path entry: `//` + the absolute path (Claude Code's prefix for "from the
    filesystem root"), resolved so a symlinked project matches."""
    return "/" + os.path.realpath(os.fspath(path))


def protected_paths(state_root: Path, project: Path | None = None) -> list[Path]:
    """What hard mode keeps from the agent, resolved: the state folder, the code Clavain runs
    from (the plugin's root, the package), its data folder (the plugin's venv), Claude Code's
    user settings and the project's. A code folder holding the project (Clavain worked on with
    itself) is left out: denying it would deny the whole project."""
    from pathlib import Path

    project = Path(project if project is not None else Path(state_root).parent).resolve()
    from clavain.paths import claude_config_dir

    found = [Path(state_root).resolve()]
    for folder in (*_code_roots(), _data_folder()):
        if folder is not None and folder != project and folder not in project.parents:
            found.append(folder)
    config = claude_config_dir()
    found += [(config / name).resolve() for name in HOST_SETTINGS]
    found += [(project / ".claude" / name).resolve() for name in HOST_SETTINGS]
    return list(dict.fromkeys(found))


def _code_roots() -> list[Path]:
    """The plugin's root (bin/, hooks/, lib/) and the package's folder (a pip install keeps
    the code in site-packages, apart from its `_plugin` folder)."""
    from pathlib import Path

    import clavain
    from clavain.paths import plugin_root

    roots = [plugin_root().resolve(), Path(clavain.__file__).resolve().parent]
    return [root for root in roots
            if not any(other in root.parents for other in roots if other != root)]


def _data_folder() -> Path | None:
    """The plugin's data folder (its venv): named inside a session (CLAUDE_PLUGIN_DATA in hooks,
    CLAVAIN_PLUGIN_DATA in Bash calls), else the folder of the venv this Python runs from when
    that is the plugin's (`<data>/venv` with bootstrap's ready marker), as bin/clavain picks."""
    from pathlib import Path

    from clavain.paths import plugin_data_dir

    named = plugin_data_dir()
    if named is not None:
        return named.resolve()
    import sys

    from clavain.bootstrap import READY_MARKER

    venv = Path(sys.prefix)
    if venv.name == "venv" and (venv / READY_MARKER).is_file():
        return venv.parent.resolve()
    return None


def edit_rule(path: Path) -> str:
    """The `permissions.deny` rule that makes the host's file tools refuse `path` (a folder:
    everything under it; a file or a name not there yet: itself)."""
    from pathlib import Path

    return f"Edit({deny_entry(path)}{'/**' if Path(path).is_dir() else ''})"


def sandbox_block(state_root: Path, project: Path | None = None) -> dict[str, Any]:
    """The sandbox part of what hard mode adds (`merge` folds it into what is there)."""
    return {**SCALARS, "excludedCommands": list(EXCLUDED_COMMANDS),
            "filesystem": {"denyWrite": [deny_entry(path)
                                         for path in protected_paths(state_root, project)]}}


def permission_rules(state_root: Path, project: Path | None = None) -> list[str]:
    """`permissions.deny` rules: the state folder's parts but `scratch/` (those there and
    `STATE_PARTS`), and every other protected path."""
    from pathlib import Path

    state = Path(state_root).resolve()
    there = {entry.name for entry in state.iterdir()} if state.is_dir() else set()
    parts = sorted((there | set(STATE_PARTS)) - {AGENT_PART})
    rules = [edit_rule(state / name) if (state / name).exists() or "." in name.lstrip(".")
             else f"Edit({deny_entry(state / name)}/**)" for name in parts]
    return rules + [edit_rule(path) for path in protected_paths(state_root, project)[1:]]


def _object(value: Any, label: str) -> dict[str, Any]:
    from clavain.errors import ClavainError

    if not isinstance(value, dict):
        raise ClavainError(f"{label} is {type(value).__name__}, not an object: fix it, then run "
                           "the `clavain init` command again")
    return value


def _list(holder: dict[str, Any], key: str, label: str) -> list[Any]:
    from clavain.errors import ClavainError

    current = holder.get(key, [])
    if not isinstance(current, list):
        raise ClavainError(f"{label} is {type(current).__name__}, not a list: fix it, then run "
                           "the `clavain init` command again")
    return current


# The lists hard mode adds to: (label, path of objects to the list).
LISTS = (("sandbox.excludedCommands", ("sandbox",), "excludedCommands"),
         ("sandbox.filesystem.denyWrite", ("sandbox", "filesystem"), "denyWrite"),
         ("permissions.deny", ("permissions",), "deny"))


def _holder(settings: dict[str, Any], path: tuple[str, ...], where: str) -> dict[str, Any]:
    """The object at `path`, copied into `settings` (created when missing)."""
    holder = settings
    for depth, key in enumerate(path):
        label = f"{where}: `{'.'.join(path[:depth + 1])}`"
        holder[key] = dict(_object(holder.get(key, {}), label))
        holder = holder[key]
    return holder


def merge(settings: dict[str, Any], state_root: Path, where: str = str(SETTINGS_FILE),
          project: Path | None = None, added: dict[str, Any] | None = None
          ) -> tuple[dict[str, Any], list[str]]:
    """`settings` with hard mode folded in, and what changed (empty: it was already on).
    Every other key is kept; lists gain entries, never lose them. What was added is written
    into `added` (for `unmerge`). A `sandbox`, `filesystem` or list of another type is bad
    input, named with `where`."""
    import json

    result = dict(settings)
    added = {} if added is None else added
    changes: list[str] = []
    sandbox = _holder(result, ("sandbox",), where)
    was_on = sandbox.get("enabled") is True
    for key, wanted in SCALARS.items():
        if sandbox.get(key) is not wanted:
            before = json.dumps(sandbox[key]) if key in sandbox else "unset"
            changes.append(f"sandbox.{key}: {before} -> {json.dumps(wanted)}")
            added.setdefault("scalars", {})[key] = (
                {"had": True, "value": sandbox[key]} if key in sandbox else {"had": False})
            sandbox[key] = wanted
    wanted_lists = {"sandbox.excludedCommands": list(EXCLUDED_COMMANDS),
                    "sandbox.filesystem.denyWrite": sandbox_block(
                        state_root, project)["filesystem"]["denyWrite"],
                    "permissions.deny": permission_rules(state_root, project)}
    for label, path, key in LISTS:
        holder = _holder(result, path, where)
        current = _list(holder, key, f"{where}: `{label}`")
        new = [entry for entry in wanted_lists[label] if entry not in current]
        if new:
            holder[key] = [*current, *new]
            changes.append(f"{label}: + {', '.join(new)}")
            added.setdefault(label, []).extend(new)
    had_network = "network" in sandbox
    network = _holder(result, ("sandbox", "network"), where)
    if not was_on and "allowedDomains" not in network:
        network["allowedDomains"] = list(OPEN_NETWORK)
        changes.append("sandbox.network.allowedDomains: + * (the network as without the "
                       "sandbox)")
        added["network"] = True
    if not network and not had_network:
        del result["sandbox"]["network"]
    return result, changes


def unmerge(settings: dict[str, Any], added: dict[str, Any], where: str = str(SETTINGS_FILE)
            ) -> tuple[dict[str, Any], list[str]]:
    """`settings` without what `merge` added (`added`), and what changed. A value the person
    changed since is theirs and kept; objects left empty go."""
    import json

    result = json.loads(json.dumps(settings))
    changes: list[str] = []
    sandbox = _holder(result, ("sandbox",), where)
    for key, before in (added.get("scalars") or {}).items():
        if key in SCALARS and sandbox.get(key) is SCALARS[key]:
            if before.get("had"):
                sandbox[key] = before.get("value")
            else:
                del sandbox[key]
            changes.append(f"sandbox.{key}: {json.dumps(SCALARS[key])} -> "
                           f"{json.dumps(before['value']) if before.get('had') else 'unset'}")
    for label, path, key in LISTS:
        holder = _holder(result, path, where)
        current = _list(holder, key, f"{where}: `{label}`")
        gone = [entry for entry in current if entry in (added.get(label) or [])]
        if gone:
            holder[key] = [entry for entry in current if entry not in gone]
            changes.append(f"{label}: - {', '.join(gone)}")
    network = _holder(result, ("sandbox", "network"), where)
    if added.get("network") and network.get("allowedDomains") == OPEN_NETWORK:
        del network["allowedDomains"]
        changes.append("sandbox.network.allowedDomains: - *")
    for path in (("sandbox", "network"), ("sandbox", "filesystem"), ("sandbox",),
                 ("permissions",)):
        parent = result
        for key in path[:-1]:
            parent = parent[key] if isinstance(parent.get(key), dict) else {}
        child = parent.get(path[-1])
        if isinstance(child, dict):
            for key in [k for k, v in child.items() if v == [] and k in ("excludedCommands",
                                                                        "denyWrite", "deny")]:
                del child[key]
            if not child:
                del parent[path[-1]]
    return result, changes


def clavains_own(state_root: Path, project: Path) -> dict[str, Any]:
    """What `merge` adds, for settings it wrote without a record (an older Clavain's)."""
    return {"scalars": {key: {"had": False} for key in SCALARS},
            "sandbox.excludedCommands": list(EXCLUDED_COMMANDS),
            "sandbox.filesystem.denyWrite": sandbox_block(state_root, project)[
                "filesystem"]["denyWrite"],
            "permissions.deny": permission_rules(state_root, project), "network": True}


def read_settings(path: Path) -> dict[str, Any]:
    """The settings object in `path` ({} when there is none). Anything else is refused with its
    name, so a file Claude Code would reject is never overwritten by a guess."""
    import json

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


def settings_block(project: str | os.PathLike[str], state_root: str | os.PathLike[str]
                   ) -> dict[str, Any] | None:
    """The project's `sandbox` block when it holds hard mode for `state_root` (sandbox on, the
    folder denied), else None: read on each call, so turning the sandbox off in the settings
    turns hard mode off too. A file that cannot be read holds no hard mode."""
    from clavain.fsutil import read_json_object

    settings = read_json_object(os.path.join(os.fspath(project), SETTINGS_FILE),
                                SETTINGS_MAX_BYTES)
    sandbox = settings.get("sandbox") if settings is not None else None
    if not isinstance(sandbox, dict) or sandbox.get("enabled") is not True:
        return None
    filesystem = sandbox.get("filesystem")
    denied = filesystem.get("denyWrite") if isinstance(filesystem, dict) else None
    if isinstance(denied, list) and deny_entry(state_root) in denied:
        return sandbox
    return None


def hard_mode(project: Path, state_root: Path) -> bool:
    return settings_block(project, state_root) is not None


def runner_settings(project: Path, state_root: Path, runner: str = "") -> str | None:
    """`claude --settings` JSON giving a runner's session the project's hard mode (its sandbox
    block and Clavain's deny rules), None when hard mode is off. A worktree's session reads the
    project's local settings too (observed), but a runner must not depend on where it runs.
    `runner` (run and node) makes each runner's text its own: 2.1.330 copies inline settings to
    a temp file named by their hash and removes it when its session ends, so two runners given
    the same text raced ("bwrap: Can't find source path …/claude-settings-<hash>.json")."""
    import json

    block = settings_block(project, state_root)
    if block is None:
        return None
    return json.dumps({"sandbox": block,
                       "permissions": {"deny": permission_rules(state_root, project)},
                       "env": {"CLAVAIN_RUNNER": runner}})


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
