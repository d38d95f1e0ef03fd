"""Clavain works installed as a package, not only from a checkout: templates, migrations and
the config schema ship inside it, and the runner env points CLAVAIN_BIN at a real executable."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.checks import PASSES
from tests.conftest import BIN, REPO, subprocess_env

RUNNER_BIN = ("from clavain.paths import StatePaths; from clavain.workgraph.runner_env import "
              "runner_env; print(runner_env(StatePaths.discover(), {'id': 'n'}, 'r', 'default')"
              "['CLAVAIN_BIN'])")
PLAN = {"nodes": [{"id": "task-a", "type": "task", "verify": [PASSES]}]}


def _exercise(clavain: list[str], python: str, project: Path, env: dict[str, str]) -> None:
    """What a user (and a runner) does, with `clavain` and `python` of one install mode."""
    def run(*args: str, stdin: str | None = None) -> str:
        result = subprocess.run([*clavain, *args], cwd=project, env=env, input=stdin,
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        return result.stdout

    run("graph", "import", "-", stdin=json.dumps(PLAN))  # migrations
    run("graph", "scaffold")
    packet = run("graph", "packet", "task-a")  # templates
    assert "# Clavain executor — node task-a" in packet
    (project / ".clavain" / "config.json").write_text('{"defaults": {"maxAttempts": 0}}')
    refused = subprocess.run([*clavain, "graph", "next"], cwd=project, env=env,
                             capture_output=True, text=True)  # the config schema
    assert refused.returncode == 2 and "defaults.maxAttempts" in refused.stderr
    (project / ".clavain" / "config.json").unlink()
    bin_path = subprocess.run([python, "-c", RUNNER_BIN], cwd=project, env=env,
                              capture_output=True, text=True, check=True).stdout.strip()
    assert Path(bin_path).is_file()
    version = subprocess.run([bin_path, "--version"], env=env, capture_output=True, text=True)
    assert version.returncode == 0 and version.stdout.startswith("clavain ")
    assert subprocess.run([*clavain, "doctor"], cwd=project, env=env,
                          capture_output=True, text=True).returncode in (0, 1)


def test_from_the_checkout(project: Path) -> None:
    env = subprocess_env()
    _exercise([str(BIN / "clavain")], sys.executable, project, env)


@pytest.mark.slow
def test_from_a_plain_non_editable_pip_install(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    install = subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet",
                              "--disable-pip-version-check", str(REPO)],
                             capture_output=True, text=True, timeout=600)
    assert install.returncode == 0, install.stderr
    project = tmp_path / "project"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path),
           "CLAVAIN_PROJECT_DIR": str(project)}
    python = str(venv / "bin" / "python")
    located = subprocess.run([python, "-c", "import clavain; print(clavain.__file__)"],
                             cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
    assert str(REPO) not in located.stdout  # really the installed copy
    _exercise([str(venv / "bin" / "clavain")], python, project, env)
