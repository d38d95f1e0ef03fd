"""Stop asks for a handoff note once per session, and only when a sprint is active and the tree
has uncommitted work; never twice, never on a Stop that follows a Stop hook's block."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from .conftest import payload_for, start_sprint


def _worked(project: Path, sprint_id: str, *sessions: str) -> None:
    from clavain.paths import StatePaths
    from clavain.session.handoff import mark_worked

    for session in sessions:
        mark_worked(StatePaths.discover(project), sprint_id, session)


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    return project


def _stop(run_hook, project: Path, session: str = "sess-1", **extra: object):
    payload = {**payload_for("Stop", project), "session_id": session,
               "hook_event_name": "Stop", "stop_hook_active": False, **extra}
    result = run_hook("Stop", payload, cwd=project)
    assert result.returncode == 0 and result.stderr == ""
    return json.loads(result.stdout) if result.stdout else None


def test_blocks_once_per_session_and_never_twice(run_hook, tmp_path: Path) -> None:
    project = _project(tmp_path)
    active = start_sprint(project)
    _worked(project, active["sprint_id"], "sess-1", "sess-2")
    (project / "app.py").write_text("x = 1\n")
    first = _stop(run_hook, project)
    assert first["decision"] == "block"
    assert f"sprint {active['sprint_id']} is at step plan" in first["reason"]
    assert ".clavain/scratch/handoff.md" in first["reason"]
    assert _stop(run_hook, project) is None  # the same session: asked already
    assert _stop(run_hook, project, stop_hook_active=True, session="sess-2") is None
    assert _stop(run_hook, project, session="sess-2")["decision"] == "block"  # a new session


def test_no_sprint_or_a_clean_tree_lets_the_session_stop(run_hook, tmp_path: Path) -> None:
    project = _project(tmp_path)
    (project / "app.py").write_text("x = 1\n")
    assert _stop(run_hook, project) is None  # no sprint
    assert not (project / ".clavain").exists()
    _worked(project, start_sprint(project)["sprint_id"], "sess-1")
    (project / "app.py").unlink()
    assert _stop(run_hook, project) is None  # only .clavain/ changed: nothing to hand off
    (project / "app.py").write_text("x = 1\n")
    assert _stop(run_hook, project)["decision"] == "block"  # not marked asked while clean


def test_a_broken_checkpoint_or_a_bad_session_id_never_blocks(run_hook, tmp_path: Path) -> None:
    project = _project(tmp_path)
    _worked(project, start_sprint(project)["sprint_id"], "sess-1")
    (project / "app.py").write_text("x = 1\n")
    assert _stop(run_hook, project, session="a\nb") is None
    assert _stop(run_hook, project, session=7) is None
    (project / ".clavain" / "checkpoint.json").write_bytes(b"\xff")
    assert _stop(run_hook, project) is None


def test_a_sprint_started_by_the_cli_is_not_uncommitted_work(run_hook, tmp_path: Path) -> None:
    """`clavain sprint start` keeps Clavain's state out of git (the clone's exclude list);
    that alone is not work to hand off, so the one ask is kept for when there is some."""
    import os
    import sys

    project = _project(tmp_path)
    cli = subprocess.run([str(Path(__file__).parents[2] / "bin" / "clavain"), "sprint", "start",
                          "--complexity", "4", "add OAuth login"], cwd=project,
                         capture_output=True, text=True,
                         env={**os.environ, "CLAVAIN_PYTHON": sys.executable,
                              "CLAVAIN_PROJECT_DIR": str(project),
                              "CLAUDE_CODE_SESSION_ID": "sess-1"})
    assert cli.returncode == 0, cli.stderr
    assert "/.clavain/verdicts/" in (project / ".git" / "info" / "exclude").read_text()
    assert _stop(run_hook, project) is None
    (project / "app.py").write_text("x = 1\n")
    assert _stop(run_hook, project)["decision"] == "block"


def test_only_a_session_that_worked_on_the_sprint_is_asked(run_hook, tmp_path: Path) -> None:
    import os
    import sys

    project = _project(tmp_path)
    active = start_sprint(project)
    (project / "app.py").write_text("x = 1\n")
    assert _stop(run_hook, project, session="bystander") is None  # only opened the project
    resumed = subprocess.run([str(Path(__file__).parents[2] / "bin" / "clavain"), "sprint",
                              "resume"], cwd=project, capture_output=True, text=True,
                             env={**os.environ, "CLAVAIN_PYTHON": sys.executable,
                                  "CLAVAIN_PROJECT_DIR": str(project),
                                  "CLAUDE_CODE_SESSION_ID": "worker"})
    assert resumed.returncode == 0, resumed.stderr
    assert f"sprint {active['sprint_id']}" in _stop(run_hook, project, session="worker")["reason"]
    assert _stop(run_hook, project, session="bystander") is None
