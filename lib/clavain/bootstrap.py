"""First-run install of the plugin's Python dependencies into `$CLAUDE_PLUGIN_DATA/venv`.

Only the dependencies go into the venv: the launchers put the plugin's own `lib/` first on
PYTHONPATH, so Clavain's code always comes from the installed plugin version, a plugin update
needs no reinstall unless the dependency list changes, and the plugin folder stays read-only.

Stdlib only, because it runs before any dependency exists. The install runs in a detached
process so the SessionStart hook can stop waiting at any time; an `fcntl` lock (not the
`filelock` package, which is one of the things being installed) serialises concurrent
sessions, and a stamp file written last marks the venv ready. The stamp holds the plugin
version and a hash of the dependency list, so an update that changes either reinstalls.
"""

from __future__ import annotations

import fcntl
import os
import sys
import time
from pathlib import Path

from clavain import __version__

# Mirrors [project].dependencies in pyproject.toml (a test keeps them equal).
DEPENDENCIES = ("pydantic>=2.6,<3", "jsonschema>=4.20,<5", "filelock>=3.12,<4")

READY_MARKER = ".clavain-ready"
FAILED_MARKER = "bootstrap.failed"
LOG_NAME = "bootstrap.log"
LOCK_NAME = "bootstrap.lock"


def wanted_key() -> str:
    """Plugin version, interpreter minor version and a hash of the dependency list."""
    digest = _sha256("\n".join(DEPENDENCIES).encode())[:16]
    return f"{__version__}+py{sys.version_info[0]}.{sys.version_info[1]}+{digest}"


def _sha256(data: bytes) -> str:
    """The hex SHA-256 of `data`, from the interpreter's own small module where it has one:
    `hashlib` loads OpenSSL, ~2 ms of every SessionStart."""
    try:
        from _sha2 import sha256  # Python 3.12 and later
    except ImportError:
        try:
            from _sha256 import sha256  # Python 3.10 and 3.11
        except ImportError:
            from hashlib import sha256
    return sha256(data).hexdigest()


def venv_dir(data_dir: Path) -> Path:
    return data_dir / "venv"


def venv_python(data_dir: Path) -> Path:
    return venv_dir(data_dir) / "bin" / "python"


def stamp(data_dir: Path) -> str | None:
    try:
        return (venv_dir(data_dir) / READY_MARKER).read_text(encoding="utf-8").strip()
    except OSError:
        return None


def is_ready(data_dir: Path) -> bool:
    found = stamp(data_dir)
    return found is not None and found == wanted_key() and venv_python(data_dir).exists()


def failure(data_dir: Path) -> str | None:
    """The last install failure for the current key, if any."""
    try:
        key, _, message = (data_dir / FAILED_MARKER).read_text(encoding="utf-8").partition("\n")
    except OSError:
        return None
    if key != wanted_key():
        return None
    return message.strip() or "unknown error"


def install(data_dir: Path) -> None:
    """Create the venv and install the dependencies; only the lock holder writes."""
    data_dir.mkdir(parents=True, exist_ok=True)
    with open(data_dir / LOCK_NAME, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if is_ready(data_dir):
            return
        (data_dir / FAILED_MARKER).unlink(missing_ok=True)
        venv = venv_dir(data_dir)
        from clavain.clock import utc_stamp

        print(f"{utc_stamp()} installing {wanted_key()} into {venv}", flush=True)
        import shutil

        try:
            shutil.rmtree(venv, ignore_errors=True)
            # The base interpreter: when this runs from an outdated venv, that venv is gone now.
            base_python = getattr(sys, "_base_executable", None) or sys.executable
            _run([base_python, "-m", "venv", str(venv)])
            _run([str(venv_python(data_dir)), "-m", "pip", "install", "--disable-pip-version-check",
                  "--no-input", "--quiet", *DEPENDENCIES])
        except Exception as exc:  # any failure is reported, never raised into a hook
            (data_dir / FAILED_MARKER).write_text(f"{wanted_key()}\n{exc}", encoding="utf-8")
            return
        tmp = venv / f"{READY_MARKER}.tmp"
        tmp.write_text(wanted_key(), encoding="utf-8")
        os.replace(tmp, venv / READY_MARKER)


def _run(argv: list[str]) -> None:
    import subprocess

    result = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if result.returncode != 0:
        tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"{Path(argv[0]).name} {' '.join(argv[1:3])} failed: {' | '.join(tail)}")


def start_install(data_dir: Path, plugin_root: Path) -> None:
    """Run `install` in a detached process that outlives the hook, isolated from the project:
    `python -I` ignores PYTHONPATH, the user site and the current folder, and it runs in the
    data folder, so a project's own `pathlib.py` or `subprocess.py` cannot break the installer
    (and leave every SessionStart waiting for a venv that never comes)."""
    import subprocess

    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / FAILED_MARKER).unlink(missing_ok=True)
    code = ("import sys; sys.path.insert(0, sys.argv[1]); "
            "from pathlib import Path; from clavain.bootstrap import install; "
            "install(Path(sys.argv[2]))")
    with open(data_dir / LOG_NAME, "ab") as log:
        subprocess.Popen(
            [sys.executable, "-I", "-c", code, str(plugin_root / "lib"), str(data_dir)],
            cwd=data_dir, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            start_new_session=True, close_fds=True,
        )


def ensure(data_dir: Path, plugin_root: Path, wait_seconds: float) -> str:
    """'ready', 'installing' (still running when the wait ran out) or 'failed: <why>'."""
    if is_ready(data_dir):
        return "ready"
    start_install(data_dir, plugin_root)
    deadline = time.monotonic() + max(0.0, wait_seconds)
    while True:
        if is_ready(data_dir):
            return "ready"
        problem = failure(data_dir)
        if problem:
            return f"failed: {problem}"
        if time.monotonic() >= deadline:
            return "installing"
        time.sleep(0.2)


def start_a_session(claude_dir: Path) -> str:
    """The one thing to do when the plugin's files have no venv yet."""
    return ("start one Claude Code session with the plugin enabled (its first SessionStart "
            f"builds the venv in {claude_dir / 'plugins' / 'data'}/), then run `clavain "
            "doctor` inside it")


def plugin_venvs(claude_dir: Path) -> list[Path]:
    """The plugin's venvs Claude Code's sessions built (`<claude_dir>/plugins/data/clavain*`),
    marked ready by the bootstrap (for whichever Python and version built it): what a terminal
    outside a session can run the plugin's files with."""
    try:
        folders = sorted((claude_dir / "plugins" / "data").glob("clavain*"))
    except OSError:
        return []
    return [venv_dir(folder) for folder in folders
            if stamp(folder) is not None and venv_python(folder).exists()]


def install_fix(kind: str, claude_dir: Path) -> str:
    """How to get the missing dependencies, for this kind of install (`paths.install_kind`)."""
    if kind == "clone":
        return ("from the clone: python3 -m venv .venv && .venv/bin/pip install -e '.[test]', "
                "then run .venv/bin/clavain")
    if kind == "package":
        return f"{sys.executable} -m pip install --force-reinstall clavain"
    ready = plugin_venvs(claude_dir)
    running = Path(sys.prefix).resolve()
    if any(running == venv.resolve() for venv in ready):  # the plugin's own venv is broken
        return (f"the plugin's venv {sys.prefix} is incomplete: remove that folder, then "
                "start a Claude Code session to build it again")
    if ready:
        return f"run it with the plugin's venv: CLAVAIN_PYTHON={ready[0] / 'bin' / 'python'}"
    return start_a_session(claude_dir)
