"""The hook hot path imports the standard library only (pydantic alone costs ~200 ms)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clavain.hooks import EVENTS

from .conftest import REPO, payload_for

FORBIDDEN = ("pydantic", "pydantic_core", "jsonschema", "filelock", "click", "clavain.models")


def imported_modules(event: str, cwd: Path) -> set[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO / "lib"), CLAUDE_PROJECT_DIR=str(cwd),
               CLAVAIN_BOOTSTRAP="0")
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "clavain.hooks", event],
        input=json.dumps(payload_for(event, cwd)), capture_output=True, text=True, env=env,
        cwd=cwd, timeout=60,
    )
    assert result.returncode == 0
    names = set()
    for line in result.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip())
    assert "clavain.hooks" in names, result.stderr[-2000:]
    return names


@pytest.mark.parametrize("event", EVENTS)
def test_hook_path_is_stdlib_only(event: str, tmp_path: Path) -> None:
    names = imported_modules(event, tmp_path)
    offenders = sorted(n for n in names if n.split(".")[0] in FORBIDDEN or
                       any(n == f or n.startswith(f + ".") for f in FORBIDDEN))
    assert not offenders, f"{event} imports {offenders}"


def test_detector_sees_a_forbidden_import(tmp_path: Path) -> None:
    """The check above can fail: importing pydantic shows up in the same parse."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "lib"))
    result = subprocess.run([sys.executable, "-X", "importtime", "-c", "import pydantic"],
                            capture_output=True, text=True, env=env, timeout=60)
    assert any(line.rsplit("|", 1)[1].strip() == "pydantic"
               for line in result.stderr.splitlines() if line.startswith("import time:"))
