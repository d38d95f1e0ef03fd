"""The README's shell quickstart runs as written in a fresh git repository."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.conftest import BIN, REPO, subprocess_env


def _quickstart() -> str:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    start = readme.index("## Quickstart")
    section = readme[start:readme.index("\n## ", start + 1)]
    [block] = re.findall(r"```sh\n(.*?)```", section, re.DOTALL)
    return block


def test_the_readme_quickstart_runs_as_written(tmp_path: Path) -> None:
    repo = tmp_path / "fresh"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    env = subprocess_env(PATH=f"{BIN}:{subprocess_env()['PATH']}")
    env.pop("CLAVAIN_PROJECT_DIR", None)
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", _quickstart()], cwd=repo, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "all 4 node(s) are finished" in result.stdout
    assert "Traceback" not in result.stderr
