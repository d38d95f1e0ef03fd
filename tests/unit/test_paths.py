from pathlib import Path

import pytest

from clavain.paths import StatePaths, project_root


def test_explicit_project_dir_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAVAIN_PROJECT_DIR", str(tmp_path / "elsewhere"))
    assert project_root(tmp_path) == tmp_path / "elsewhere"


def test_nearest_state_folder_above_cwd(tmp_path: Path) -> None:
    (tmp_path / "proj" / ".clavain").mkdir(parents=True)
    deep = tmp_path / "proj" / "src" / "pkg"
    deep.mkdir(parents=True)
    assert project_root(deep) == tmp_path / "proj"


def test_claude_project_dir_before_git_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(tmp_path / "claude"))
    assert project_root(tmp_path / "repo") == tmp_path / "claude"


def test_git_root_then_cwd(tmp_path: Path) -> None:
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    (tmp_path / "repo" / "a").mkdir()
    assert project_root(tmp_path / "repo" / "a") == tmp_path / "repo"
    (tmp_path / "plain").mkdir()
    assert project_root(tmp_path / "plain") == tmp_path / "plain"


def test_state_paths_and_overrides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAVAIN_PROJECT_DIR", str(tmp_path))
    state = StatePaths.discover()
    assert state.project == tmp_path
    assert state.root == tmp_path / ".clavain"
    assert state.db == tmp_path / ".clavain" / "state.sqlite"
    assert state.hooks_log == tmp_path / ".clavain" / "logs" / "hooks.log"
    monkeypatch.setenv("CLAVAIN_DB", str(tmp_path / "other.sqlite"))
    assert state.db == tmp_path / ".clavain" / "state.sqlite"  # resolved once, not per access
    assert StatePaths.discover().db == tmp_path / "other.sqlite"
    monkeypatch.setenv("CLAVAIN_STATE_DIR", str(tmp_path / "elsewhere" / "st"))
    moved = StatePaths.discover()
    assert moved.root == tmp_path / "elsewhere" / "st"
    # The project stays where CLAVAIN_PROJECT_DIR says, not the state folder's parent.
    assert moved.project == tmp_path


def test_state_paths_are_immutable(tmp_path: Path) -> None:
    state = StatePaths(tmp_path / ".clavain")
    with pytest.raises(AttributeError):
        state.root = tmp_path  # type: ignore[misc]
    assert state.project == tmp_path
    assert state == StatePaths(tmp_path / ".clavain", project=tmp_path)
    assert state != StatePaths(tmp_path / ".clavain", project=tmp_path / "other")


def test_discover_reads_only_the_env_it_is_given(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAVAIN_STATE_DIR", str(tmp_path / "ignored"))
    state = StatePaths.discover(tmp_path, env={"CLAVAIN_PROJECT_DIR": str(tmp_path / "p")})
    assert state.root == tmp_path / "p" / ".clavain"
