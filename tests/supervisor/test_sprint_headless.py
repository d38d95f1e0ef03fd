"""A sprint planned by a person (or in Claude Code) and executed headless: `clavain run` takes the
active sprint's graph, and the sprint's gates accept what the run did, because verify nodes were
passed by the shell verifier, not by anyone's word."""

from __future__ import annotations

from pathlib import Path

import pytest

from clavain.errors import ClavainError
from clavain.paths import StatePaths
from clavain.sprint import checkpoint, lifecycle
from clavain.supervisor.supervise import RunOptions, supervise
from tests.supervisor import kit

# Both workgraph backends (tests/conftest.py `backend`).
pytestmark = pytest.mark.usefixtures("backend")

PLAN = """# Plan: two files

```json
{"nodes": [
  {"id": "task-hello", "type": "task", "title": "write hello.txt", "ownership": ["hello.txt"],
   "commands": ["echo hello > hello.txt"], "verify": ["grep -qx hello hello.txt"]},
  {"id": "task-bye", "type": "task", "title": "write bye.txt", "ownership": ["bye.txt"],
   "commands": ["echo bye > bye.txt"], "verify": ["grep -qx bye bye.txt"]}
]}
```
"""


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> StatePaths:
    made = kit.make_project(tmp_path / "p")
    monkeypatch.setenv("CLAVAIN_PROJECT_DIR", str(made.project))
    monkeypatch.chdir(made.project)
    return StatePaths.discover()


def test_the_execute_step_runs_headless_and_its_gate_sees_the_result(state) -> None:
    lifecycle.start(state, "write two files", complexity="2")
    (state.project / "plan.md").write_text(PLAN)
    lifecycle.done(state, "plan", plan_path="plan.md")
    kit.git(state.project, "add", "-A")  # parallel runs merge into a committed tree
    kit.git(state.project, "commit", "-qm", "plan")
    sprint_graph = checkpoint.graph_of(checkpoint.read(state))
    with pytest.raises(ClavainError, match="not done"):
        lifecycle.done(state, "execute", wait_seconds=0)
    report = supervise(state, RunOptions(runner="shell", workers=2))
    assert report["graph_id"] == sprint_graph != "default"
    assert report["status"] == "complete", report["message"]
    assert report["metrics"]["peak_concurrency"] == 2
    assert (state.project / "hello.txt").read_text() == "hello\n"
    assert lifecycle.done(state, "execute")["current_step"] == "test"
