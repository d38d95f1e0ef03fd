"""`bin/clavain doctor` of the plugin's files exported for Claude Code (what
scripts/install-plugin.sh copies: git's files, no .git, no venv), run from a terminal with a
Python that lacks the dependencies: every row that is not ok says the one thing to do, the
export is called an export, and no row names a bare interpreter prefix."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _export(dest: Path) -> Path:
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=REPO, capture_output=True,
                            check=True).stdout.split(b"\0")
    for raw in filter(None, listed):
        source = REPO / os.fsdecode(raw)
        if not source.is_file():
            continue
        target = dest / os.fsdecode(raw)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    return dest


def _doctor(export: Path, tmp_path: Path, python: str) -> dict[str, dict]:
    env = {"HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin", "CLAVAIN_PYTHON": python,
           "LANG": "C.UTF-8"}
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    result = subprocess.run([str(export / "bin" / "clavain"), "doctor", "--json"], cwd=project,
                            env=env, capture_output=True, text=True, timeout=120)
    return {row["check"]: row for row in json.loads(result.stdout)["checks"]}


def test_doctor_of_an_export_without_a_venv_says_what_to_do(tmp_path: Path) -> None:
    export = _export(tmp_path / "export")
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    rows = _doctor(export, tmp_path, str(bare / "bin" / "python"))
    assert rows["plugin_root"]["install"] == "export"
    assert "exported for Claude Code" in rows["plugin_root"]["detail"]
    assert "clone" not in rows["plugin_root"]["detail"]
    deps = rows["dependencies"]
    assert deps["status"] == "fail"
    assert "lacks pydantic, jsonschema, filelock" in deps["detail"]
    assert "start one Claude Code session with the plugin enabled" in deps["detail"]
    assert rows["venv"]["status"] == "warn"
    assert "start one Claude Code session" in rows["venv"]["detail"]
    for row in rows.values():
        assert "this Python's" not in row["detail"]


def test_once_a_session_built_the_venv_doctor_names_it(tmp_path: Path) -> None:
    """A ready plugin venv in Claude Code's data folder (what SessionStart's bootstrap leaves)
    is the one thing a terminal runs the export with."""
    from clavain import bootstrap

    export = _export(tmp_path / "export")
    data = tmp_path / "home" / ".claude" / "plugins" / "data" / "clavain-clavain"
    venv = bootstrap.venv_dir(data)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (venv / bootstrap.READY_MARKER).write_text(bootstrap.wanted_key(), encoding="utf-8")
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    rows = _doctor(export, tmp_path, str(bare / "bin" / "python"))
    assert rows["venv"]["status"] == "ok"
    assert f"CLAVAIN_PYTHON={venv / 'bin' / 'python'}" in rows["venv"]["detail"]
    assert f"CLAVAIN_PYTHON={venv / 'bin' / 'python'}" in rows["dependencies"]["detail"]
    # Run with that venv itself, which lacks the packages: rebuilding it is the one thing.
    rows = _doctor(export, tmp_path, str(venv / "bin" / "python"))
    assert f"the plugin's venv {venv} is incomplete: remove that folder" in \
        rows["dependencies"]["detail"]
