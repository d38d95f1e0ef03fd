"""Hard mode keeps `git add -A` working: the names Claude Code's sandbox masks with /dev/null
while they do not exist are put in git's local exclude list (and taken out again by
`--no-sandbox`), so a masked name never reaches git as a device."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from clavain import hard_mode


def _repo(path: Path) -> Path:
    path.mkdir()
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


def _exclude(project: Path) -> str:
    return (project / ".git" / "info" / "exclude").read_text(encoding="utf-8")


def test_only_missing_names_are_excluded_once_and_taken_out_again(tmp_path: Path) -> None:
    project = _repo(tmp_path / "p")
    (project / ".vscode").mkdir()  # the person's own: never hidden from git
    added = hard_mode.exclude_masked_names(project)
    assert ".vscode" not in added and ".bashrc" in added and ".mcp.json" in added
    text = _exclude(project)
    assert "/.bashrc\n" in text and "/.vscode\n" not in text
    assert hard_mode.exclude_masked_names(project) == []  # once
    assert _exclude(project) == text
    assert sorted(hard_mode.forget_masked_names(project)) == sorted(added)
    assert hard_mode.MASKED_MARK not in _exclude(project)
    assert "# git ls-files" in _exclude(project)  # git's own lines are kept


def test_a_masked_name_no_longer_stops_git_add_all(tmp_path: Path) -> None:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        pytest.skip("bubblewrap is not installed (.ci/run installs it)")
    project = _repo(tmp_path / "p")
    hard_mode.exclude_masked_names(project)
    (project / ".bashrc").touch()  # a mount point for /dev/null, as the host's sandbox masks it
    (project / "work.py").write_text("x = 1\n")
    done = subprocess.run([bwrap, "--dev-bind", "/", "/", "--bind", "/dev/null",
                           str(project / ".bashrc"), "git", "-C", str(project), "add", "-A"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    staged = subprocess.run(["git", "-C", str(project), "diff", "--cached", "--name-only"],
                            capture_output=True, text=True, check=True).stdout.split()
    assert staged == ["work.py"]


def test_a_project_below_its_repositorys_top_is_left_alone(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "r")
    (repo / "sub").mkdir()
    assert hard_mode.exclude_masked_names(repo / "sub") == []
    assert hard_mode.MASKED_MARK not in _exclude(repo)
