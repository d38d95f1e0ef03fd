"""The operating system's confinement, for what Clavain runs for an agent in hard mode (the
verify commands and a shell runner's commands an agent wrote into its plan).

`host_problem` says whether this machine can sandbox at all (Claude Code's sandbox needs the
same things): Linux with bubblewrap and socat and unprivileged user namespaces, or macOS with
Seatbelt (`/usr/bin/sandbox-exec`, built in). `confine` decides when (the project's settings
hold hard mode) and what is protected (what they deny); `wrap` does it per OS: the command may
write its working folder and the temp folders but none of the protected paths and nothing
else, as the agent's own sandboxed Bash.

Stdlib only, imported lazily: it runs for every verify command in hard mode.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from clavain import sandbox

PROBE_TIMEOUT = 30.0
SANDBOX_EXEC = "/usr/bin/sandbox-exec"
# Linux: the program each package gives, the package's name, and where it comes from.
LINUX_NEEDS = (("bwrap", "bubblewrap"), ("socat", "socat"))
PACKAGE_MANAGERS = (("apt-get", "sudo apt-get install"), ("dnf", "sudo dnf install"),
                    ("yum", "sudo yum install"), ("pacman", "sudo pacman -S"),
                    ("zypper", "sudo zypper install"), ("apk", "sudo apk add"))


def install_command(packages: list[str]) -> str:
    """How to install `packages` here: the first package manager found, else apt-get's line."""
    for program, command in PACKAGE_MANAGERS:
        if shutil.which(program):
            return f"`{command} {' '.join(packages)}`"
    return f"`sudo apt-get install {' '.join(packages)}` (or your distribution's packages)"


def missing_packages() -> list[str]:
    """The Linux packages Claude Code's sandbox needs that this machine lacks."""
    return [package for program, package in LINUX_NEEDS if shutil.which(program) is None]


def host_problem() -> str | None:
    """Why Claude Code's sandbox (and `wrap`) cannot run on this machine, or None."""
    if sys.platform == "darwin":
        if Path(SANDBOX_EXEC).is_file():
            return None
        return f"macOS's Seatbelt ({SANDBOX_EXEC}) is missing on this machine"
    if not sys.platform.startswith("linux"):
        return (f"Claude Code's sandbox runs on Linux and macOS only (this is {sys.platform})")
    missing = missing_packages()
    if missing:
        programs = [program for program, package in LINUX_NEEDS if package in missing]
        return (f"Claude Code's sandbox needs bubblewrap and socat on Linux and "
                f"{' and '.join(programs)} {'is' if len(programs) == 1 else 'are'} not on "
                f"PATH: install {'it' if len(missing) == 1 else 'them'} with "
                f"{install_command(missing)}")
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


def temp_folders() -> list[Path]:
    import tempfile

    found = []
    for candidate in ("/tmp", tempfile.gettempdir()):
        path = Path(candidate).resolve()
        if path.is_dir() and path not in found:
            found.append(path)
    return found


def wrap(argv: list[str], workdir: Path, protected: list[Path], *,
         platform: str | None = None) -> list[str]:
    """`argv` confined: writes allowed in `workdir` and the temp folders, refused in every
    `protected` path and everywhere else. Same process group and pids (no new pid namespace):
    stopping the group stops it. ClavainError where the tool is missing."""
    platform = platform or sys.platform
    writable = list(dict.fromkeys([*temp_folders(), Path(workdir).resolve()]))
    if platform == "darwin":
        return [SANDBOX_EXEC, "-p", seatbelt_profile(writable, protected), *argv]
    from clavain.errors import ClavainError

    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise ClavainError("hard mode is on and bubblewrap is not installed, so this command "
                           f"cannot run confined: install it with {install_command(['bubblewrap'])}"
                           ", or turn hard mode off (`clavain init --no-sandbox`)", exit_code=1)
    args = [bwrap, "--ro-bind", "/", "/", "--dev-bind", "/dev", "/dev"]
    for folder in writable:
        args += ["--bind", str(folder), str(folder)]
    for path in protected:
        if path.exists():  # bubblewrap binds only what exists (see `confine` below)
            real = str(path.resolve())
            args += ["--ro-bind", real, real]
    return [*args, "--", *argv]


def _sbpl(path: Path) -> str:
    return '"' + str(path).replace("\\", "\\\\").replace('"', '\\"') + '"'


def seatbelt_profile(writable: list[Path], protected: list[Path]) -> str:
    """A Seatbelt profile: everything allowed but file writes, which are allowed only under
    `writable` (and the terminal and null devices) and denied under every `protected` path.
    Seatbelt takes the last rule that matches, so the denials come last; a path is resolved
    (`/tmp` is `/private/tmp` there) and `subpath` covers the path itself, so renaming a
    protected folder is refused too. Protected paths that do not exist yet are denied by name
    (unlike bubblewrap, Seatbelt needs nothing to be there)."""
    lines = ["(version 1)", "(allow default)", "(deny file-write*)",
             "(allow file-write* (literal \"/dev/null\") (literal \"/dev/zero\")"
             " (literal \"/dev/dtracehelper\") (regex #\"^/dev/tty\") (regex #\"^/dev/fd/\"))"]
    lines += [f"(allow file-write* (subpath {_sbpl(Path(p).resolve())}))" for p in writable]
    lines += [f"(deny file-write* (subpath {_sbpl(Path(p).resolve())}))" for p in protected]
    return "\n".join(lines) + "\n"


def _governing_block(workdir: Path, state_root: Path) -> dict[str, Any] | None:
    """Hard mode's block for a command run in `workdir`: the folder's own settings, else the
    project's that holds the state folder, else (a runner's worktree, whose settings file git
    does not carry) the project's holding `.clavain-worktrees/`."""
    from clavain.paths import WORKTREES_DIR_NAME

    workdir = Path(workdir).resolve()
    candidates = [workdir, Path(state_root).resolve().parent]
    candidates += [folder.parent for folder in (workdir, *workdir.parents)
                   if folder.name == WORKTREES_DIR_NAME]
    for candidate in dict.fromkeys(candidates):
        block = sandbox.settings_block(candidate, state_root)
        if block is not None:
            return block
    return None


def confine(argv: list[str], project: Path, state_root: Path) -> list[str]:
    """`argv` as it must run for the agent in hard mode, in folder `project` (the project, or a
    runner's worktree): able to write that folder and the temp folders but not the state
    folder, the paths the settings deny, the host's settings, git's hooks and config, nor
    anything outside (as the agent's own sandboxed Bash). Unchanged when hard mode is off."""
    block = _governing_block(project, state_root)
    if block is None:
        return argv
    filesystem = block.get("filesystem") if isinstance(block.get("filesystem"), dict) else {}
    denied = [Path(entry[1:]) if entry.startswith("//") else Path(entry).expanduser()
              for entry in filesystem.get("denyWrite") or []
              if isinstance(entry, str) and entry.startswith(("//", "~/"))]
    inside = [Path(project) / part for part in sandbox.PROTECTED_IN_PROJECT]
    protected = [Path(state_root), *inside, *denied]
    return wrap(argv, Path(project), list(dict.fromkeys(protected)))
