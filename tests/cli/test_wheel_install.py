"""A plain (non-editable) `pip install` prints only paths that exist: the wheel carries the
skills, commands, agents and schemas the CLI names, `plugin_root()` finds them inside the
package, and doctor says it is a package install. Built from what git holds, offline: the
dependencies come from this interpreter's site-packages through a `.pth` file."""

from __future__ import annotations

import json
import os
import re
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

# Without PYTHONPATH: a checkout put on it must not stand in for the installed wheel.
CLEAN = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
ABSOLUTE_PATH = re.compile(r"(?<![\w.])(/[\w.@+-]+(?:/[\w.@+-]+)+)")


def _export(dest: Path) -> None:
    """What a clone holds: tracked files and untracked ones git does not ignore."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=REPO, capture_output=True, check=True)
    for name in listed.stdout.decode().split("\0"):
        source = REPO / name
        if name and source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding the built wheel (and nothing of this checkout)."""
    root = tmp_path_factory.mktemp("wheel")
    source, dist, venv = root / "src", root / "dist", root / "venv"
    _export(source)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet",
                            "--disable-pip-version-check", "-w", str(dist), str(source)],
                           capture_output=True, text=True, timeout=600, env=CLEAN)
    assert built.returncode == 0, built.stderr
    [wheel] = dist.glob("clavain-*.whl")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300, env=CLEAN)
    install = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
                              "--disable-pip-version-check", "--no-deps", "--no-index",
                              str(wheel)], capture_output=True, text=True, timeout=300,
                             env=CLEAN)
    assert install.returncode == 0, install.stderr
    packages = subprocess.run([str(venv / "bin" / "python"), "-c",
                               "import sysconfig; print(sysconfig.get_path('purelib'))"],
                              capture_output=True, text=True, check=True).stdout.strip()
    # Appended after the venv's own folder: the installed clavain comes first.
    (Path(packages) / "zz_clavain_test_deps.pth").write_text(
        "\n".join(site.getsitepackages()) + "\n")
    return venv


def _run(venv: Path, project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(project.parent),
           "XDG_CACHE_HOME": str(project.parent / "cache"), "CLAVAIN_PROJECT_DIR": str(project)}
    return subprocess.run([str(venv / "bin" / "clavain"), *args], cwd=project, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_every_path_the_installed_cli_prints_exists(installed: Path, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    located = subprocess.run([str(installed / "bin" / "python"), "-c",
                              "import clavain; print(clavain.__file__)"], cwd=tmp_path,
                             capture_output=True, text=True, check=True, env=CLEAN).stdout
    assert str(REPO) not in located and str(installed) in located  # the wheel's copy
    printed = ""
    for args in (("sprint", "start", "add a flag"), ("sprint", "resume"), ("doctor",)):
        result = _run(installed, project, *args)
        assert result.returncode == 0, result.stderr
        printed += result.stdout + result.stderr
    assert "skills/brainstorming/SKILL.md" in printed
    paths = set(ABSOLUTE_PATH.findall(printed))
    assert paths
    missing = sorted(path for path in paths if not Path(path).exists())
    assert not missing, printed
    doctor = json.loads(_run(installed, project, "doctor", "--json").stdout)
    row = next(row for row in doctor["checks"] if row["check"] == "plugin_root")
    assert row["status"] == "ok" and row["install"] == "package", row
    assert {"skills", "commands", "agents", "schemas"} <= {
        path.name for path in Path(row["path"]).iterdir()}
