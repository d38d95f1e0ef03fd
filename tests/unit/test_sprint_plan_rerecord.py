"""Recording a corrected plan (`sprint resume --from-step plan`, then `sprint done plan --plan`):
tasks that never started take the new definition, new tasks are added, dropped ones removed, and
a task that already ran refuses any change with a line naming it. Never a silent no-op."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from clavain.errors import ClavainError
from clavain.paths import StatePaths
from clavain.sprint import lifecycle
from clavain.workgraph import nodes
from tests.checks import PASSES
from tests.unit import sprint_work as work


def _plan(*tasks: dict) -> str:
    return "# Plan\n\n```json\n" + json.dumps({"nodes": list(tasks)}, indent=1) + "\n```\n"


A = {"id": "task-a", "type": "task", "title": "write a", "verify": [PASSES],
     "ownership": ["a.txt"]}
B = {"id": "task-b", "type": "task", "title": "write b", "verify": ["test -f b.txt"],
     "ownership": ["b.txt"]}


@pytest.fixture
def state(project: Path) -> StatePaths:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-q",
                    "--allow-empty", "-m", "first"], cwd=project, check=True)
    state = StatePaths.discover()
    lifecycle.start(state, "write two files", complexity="2")
    work.record_plan(state, _plan(A, B))
    lifecycle.resume(state, from_step="plan")
    return state


def _node(state: StatePaths, node_id: str) -> dict:
    g = work.graph(state)
    try:
        return nodes.get_node(g, node_id)
    finally:
        g.conn.close()


@pytest.mark.parametrize(("tasks", "expected"), [
    ((A, B), {"added": [], "updated": {}, "removed": [], "unchanged": ["task-a", "task-b"]}),
    (({**A, "verify": ["test -f a.txt"]}, B),
     {"added": [], "updated": {"task-a": ["verify"]}, "removed": [], "unchanged": ["task-b"]}),
    (({**A, "title": "write a, better"}, {**B, "dependsOn": ["task-a"]}),
     {"added": [], "updated": {"task-a": ["title"], "task-b": ["depends_on"]}, "removed": [],
      "unchanged": []}),
    (({**A, "ownership": ["a.txt", "docs/**"]}, B, {**B, "id": "task-c", "ownership": ["c"]}),
     {"added": ["task-c"], "updated": {"task-a": ["ownership"]}, "removed": [],
      "unchanged": ["task-b"]}),
    ((A,), {"added": [], "updated": {}, "removed": ["task-b"], "unchanged": ["task-a"]}),
])
def test_a_corrected_plan_updates_what_never_started(state, tasks, expected) -> None:
    report = work.record_plan(state, _plan(*tasks))
    assert report["plan"] == expected
    for task in tasks:
        node = _node(state, task["id"])
        assert node["title"] == task["title"] and node["verify"] == task["verify"]
        assert sorted(node["depends_on"]) == sorted(task.get("dependsOn", []))
        # The task's verify node runs the plan's commands as they are now.
        assert _node(state, f"verify-{task['id']}")["verify"] == task["verify"]
    if expected["removed"]:
        assert _node(state, "task-b") is None and _node(state, "verify-task-b") is None


def test_a_task_that_ran_refuses_a_change_naming_it(state) -> None:
    lifecycle.done(state, "plan")
    work.run_graph(state, stop_before=("integrate",))  # task-a and task-b ran
    lifecycle.resume(state, from_step="plan")
    before = state.sprint_checkpoint.read_bytes()
    with pytest.raises(ClavainError, match=r"task 'task-a' already started, and the plan "
                                           r"changes it \(verify\)"):
        work.record_plan(state, _plan({**A, "verify": ["false"]}, B))
    assert _node(state, "task-a")["verify"] == [PASSES]
    assert state.sprint_checkpoint.read_bytes() == before
    with pytest.raises(ClavainError, match=r"task 'task-b' already started, and the plan "
                                           r"changes it \(dropped from the plan\)"):
        work.record_plan(state, _plan(A))
    # Unchanged, or new work under a new id, is fine.
    report = work.record_plan(state, _plan(A, B, {**B, "id": "task-c", "ownership": ["c"]}))
    assert report["plan"]["added"] == ["task-c"]


def test_the_plan_cannot_reuse_a_scaffold_id(state) -> None:
    with pytest.raises(ClavainError, match="already has a node of type integrate with that id"):
        work.record_plan(state, _plan({**A, "id": "integrate"}))
