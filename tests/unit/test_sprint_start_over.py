"""Starting over gives nothing back: after the agent abandons a sprint, its next sprint starts at
that complexity or above (the reviews of the route stay); a person's abandon sets no floor, and
the archive says who abandoned it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from clavain.paths import StatePaths
from clavain.sprint import lifecycle
from tests.person import run_below_host

REPO = Path(__file__).resolve().parents[2]


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    return project


def _agent(project: Path, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CLAVAIN_PYTHON": sys.executable, "CLAUDE_CODE_SESSION_ID": "s1",
           "CLAVAIN_PROJECT_DIR": str(project)}
    return run_below_host([str(REPO / "bin" / "clavain"), "sprint", *args], cwd=project,
                          env=env, tmp=tmp)


def _archived(project: Path, sprint_id: str) -> dict:
    return json.loads((project / ".clavain" / "runs" / sprint_id / "checkpoint.json")
                      .read_text())


def test_after_the_agent_abandons_its_next_sprint_starts_no_lower(tmp_path: Path) -> None:
    project = _project(tmp_path)
    first = lifecycle.start(StatePaths.discover(project), "fix a typo in the readme",
                            complexity=4)
    abandoned = _agent(project, tmp_path, "abandon")
    assert abandoned.returncode == 0, abandoned.stderr
    assert _archived(project, first["sprint_id"])["abandoned_by"] is None
    lower = _agent(project, tmp_path, "start", "fix a typo in the readme")
    assert lower.returncode != 0
    assert "below complexity 4" in lower.stderr and "--complexity 4" in lower.stderr
    assert not (project / ".clavain" / "checkpoint.json").exists()
    again = _agent(project, tmp_path, "start", "--complexity", "4", "fix a typo in the readme")
    assert again.returncode == 0, again.stderr


def test_a_persons_abandon_sets_no_floor(tmp_path: Path) -> None:
    project = _project(tmp_path)
    state = StatePaths.discover(project)
    first = lifecycle.start(state, "fix a typo in the readme", complexity=4)
    lifecycle.abandon(state)  # the test is a person's program (authority.library_caller)
    assert _archived(project, first["sprint_id"])["abandoned_by"] == {"by": "person",
                                                                      "via": "library"}
    started = _agent(project, tmp_path, "start", "fix a typo in the readme")
    assert started.returncode == 0, started.stderr



def test_an_archive_planted_as_a_link_sets_no_floor(tmp_path: Path) -> None:
    """Archives are read as regular files only: a link to a file saying "abandoned by the
    agent at complexity 5" does not raise the next start (nor would a FIFO hang it)."""
    project = _project(tmp_path)
    folder = project / ".clavain" / "runs" / "sprint-20990101T000000Z-aaaaaa"
    folder.mkdir(parents=True)
    outside = tmp_path / "planted.json"
    outside.write_text(json.dumps({"sprint_id": "sprint-x", "outcome": "abandoned",
                                   "abandoned_by": None, "complexity": 5,
                                   "archived_at": "2099-01-01T00:00:00Z"}))
    (folder / "checkpoint.json").symlink_to(outside)
    started = _agent(project, tmp_path, "start", "fix a typo in the readme")
    assert started.returncode == 0, started.stderr
