"""Every shell file passes shellcheck; the Python tree passes ruff."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _tool(name: str) -> str:
    found = Path(sys.executable).parent / name
    return str(found) if found.exists() else (shutil.which(name) or name)


def shell_files() -> list[Path]:
    """Tracked or new files that are shell: *.sh, or a bash/sh shebang."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout.split()
    found = []
    for name in listed:
        path = REPO / name
        if not path.is_file():
            continue
        if path.suffix == ".sh" or name.startswith(".ci/"):
            found.append(path)
            continue
        with open(path, "rb") as handle:
            first = handle.readline(200)
        if first.startswith(b"#!") and (b"bash" in first or first.rstrip().endswith(b"/sh")):
            found.append(path)
    return found


def test_shell_files_found() -> None:
    names = {p.relative_to(REPO).as_posix() for p in shell_files()}
    assert {"bin/clavain", "bin/clavain-hook", "lib/clavain/launcher.sh", ".ci/run"} <= names


def test_shellcheck_clean() -> None:
    files = [str(p) for p in shell_files()]
    result = subprocess.run([_tool("shellcheck"), "-x", "--severity=style", *files], cwd=REPO,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_clean() -> None:
    result = subprocess.run([_tool("ruff"), "check", "lib", "tests", "benchmarks", "scripts"],
                            cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
