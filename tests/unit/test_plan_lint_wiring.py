"""Plan lint where plans join a graph: `sprint done plan` refuses a plan with an error (nothing
recorded), records one with warnings and shows them, and records one a person accepted (in the
checkpoint and the summary); a planner's result whose tasks lint refuses is refused whole."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import jsonschema
import pytest

from clavain.errors import ClavainError
from clavain.models.checkpoint import REPO_SCHEMA, Checkpoint
from clavain.paths import StatePaths
from clavain.plans.findings import PlanRefused
from clavain.sprint import checkpoint, lifecycle, summary
from clavain.sprint.invocation import parse
from clavain.workgraph import claims, edits, nodes, results
from tests.checks import PASSES
from tests.unit import sprint_work as work

PERSON = {"by": "person", "via": "terminal", "terminal": "/dev/pts/7", "user": "ana",
          "at": "2026-01-01T00:00:00Z"}


def _plan(*tasks: dict) -> str:
    return "# Plan\n\n```json\n" + json.dumps({"nodes": list(tasks)}) + "\n```\n"


def _task(node_id: str, verify: list[str], ownership: list[str] | None = None) -> dict:
    (Path.cwd() / f"{node_id}.txt").write_text("x")
    return {"id": node_id, "type": "task", "title": node_id, "verify": verify,
            "ownership": ownership or [f"{node_id}.txt"]}


@pytest.fixture
def state(project: Path) -> StatePaths:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-q",
                    "--allow-empty", "-m", "first"], cwd=project, check=True)
    state = StatePaths.discover()
    lifecycle.start(state, "write two files", complexity="2")
    return state


def _graph_ids(state: StatePaths) -> list[str]:
    g = work.graph(state)
    try:
        return sorted(node["id"] for node in nodes.list_nodes(g))
    finally:
        g.conn.close()


def test_a_plan_whose_verify_always_passes_is_refused_and_nothing_is_recorded(state) -> None:
    before, ids = checkpoint.read(state), _graph_ids(state)
    (state.project / "plan.md").write_text(_plan(_task("task-a", ["true"]),
                                                 _task("task-b", ["test -f task-b.txt"])))
    with pytest.raises(PlanRefused) as refused:
        lifecycle.done(state, "plan", plan_path="plan.md")
    lines = str(refused.value).splitlines()
    assert lines[0].startswith("plan.md: the plan has 1 error(s) and was not recorded")
    assert "clavain sprint done plan --plan plan.md --accept-lint REASON" in lines[0]
    assert lines[1:] == ["error: task-a: verify 'true' always passes: it checks nothing; use a "
                         "command that fails until the task is done"]
    assert _graph_ids(state) == ids
    after = checkpoint.read(state)
    assert after["current_step"] == before["current_step"] == "plan"
    assert after["completed_steps"] == before["completed_steps"] and "plan_lint" not in after


def test_a_plan_with_only_warnings_is_recorded_and_the_warnings_returned(state) -> None:
    (state.project / "plan.md").write_text(_plan(_task("task-a", [PASSES],
                                                       ["task-a.txt", "docs/**"])))
    report = lifecycle.done(state, "plan", plan_path="plan.md")
    assert report["plan"]["added"] == ["task-a"]
    assert [(f["severity"], f["code"], f["task"]) for f in report["lint"]] == [
        ("warning", "ownership_matches_nothing", "task-a")]
    assert checkpoint.read(state)["current_step"] != "plan"
    assert "plan_lint" not in checkpoint.read(state)


def test_a_clean_plan_has_no_findings(state) -> None:
    (state.project / "plan.md").write_text(_plan(_task("task-a", [PASSES])))
    assert lifecycle.done(state, "plan", plan_path="plan.md")["lint"] == []


def test_a_person_accepts_the_findings_recorded_in_the_checkpoint_and_summary(state) -> None:
    (state.project / "plan.md").write_text(_plan(_task("task-a", ["echo ok"])))
    report = lifecycle.done(state, "plan", plan_path="plan.md", decided_by=PERSON,
                            accept_lint="  the check   is written in task-a itself ")
    assert report["plan"]["added"] == ["task-a"]
    assert [f["code"] for f in report["lint"]] == ["verify_always_passes"]
    document = json.loads(state.sprint_checkpoint.read_text())
    jsonschema.validate(document, json.loads(REPO_SCHEMA.read_text()))
    Checkpoint.model_validate(document)
    accepted = document["plan_lint"]
    assert accepted["accepted"] == report["lint"]
    assert accepted["reason"] == "the check is written in task-a itself"
    assert accepted["decided_by"] == PERSON and accepted["at"]
    lines = [line for line in summary.render(summary.for_sprint(state)).splitlines()
             if "Plan lint" in line]
    assert len(lines) == 1
    assert lines[0].startswith("- Plan lint ACCEPTED: 1 error(s) (task-a: verify 'echo ok' "
                               "always passes")
    assert "the check is written in task-a itself" in lines[0]
    # A corrected plan that needs no acceptance replaces what was accepted for the one before.
    lifecycle.resume(state, from_step="plan")
    (state.project / "plan.md").write_text(_plan(_task("task-a", [PASSES])))
    lifecycle.done(state, "plan", plan_path="plan.md")
    assert "plan_lint" not in checkpoint.read(state)


def test_an_agent_may_not_accept_lint_findings(state) -> None:
    (state.project / "plan.md").write_text(_plan(_task("task-a", ["true"])))
    with pytest.raises(ClavainError) as refused:
        lifecycle.done(state, "plan", plan_path="plan.md", decided_by=None,
                       accept_lint="trust me")
    message = str(refused.value)
    assert "--accept-lint) is a person's decision" in message
    assert "`/clavain:sprint --accept-lint plan.md REASON`" in message
    assert "`clavain sprint done plan --plan plan.md --accept-lint REASON`" in message
    assert checkpoint.read(state)["current_step"] == "plan" and _graph_ids(state) == []


@pytest.mark.parametrize(("step", "reason", "message"), [
    ("plan", "  ", "--accept-lint needs a reason"),
    ("execute", "ok", "--accept-lint goes with step plan"),
])
def test_accept_lint_needs_a_reason_and_the_plan_step(state, step, reason, message) -> None:
    with pytest.raises(ClavainError, match=message):
        lifecycle.done(state, step, decided_by=PERSON, accept_lint=reason)


def test_the_slash_command_reads_accept_lint_and_the_reason() -> None:
    typed = parse("--accept-lint docs/plan.md the verify is a manual check")
    assert typed["accept_lint"] == "docs/plan.md"
    assert typed["text"] == "the verify is a manual check"


# ---------------------------------------------------------------- a planner's result

def _planner(g) -> list:
    edits.add_nodes(g, [{"id": "plan", "type": "plan"}])
    claims.claim_next(g, run_id="r1")
    return sorted(node["id"] for node in nodes.list_nodes(g))


@pytest.mark.parametrize("verify", ["true", "echo ok", "pytest -q || true", "exit 0",
                                    "pytets -q"])
def test_a_planner_result_lint_refuses_is_refused_whole(g, verify) -> None:
    before = _planner(g)
    with pytest.raises(ClavainError) as refused:
        results.apply_result(g, "plan", {"status": "success", "summary": "planned", "next": {
            "addNodes": [{"id": "t1", "type": "task", "verify": ["test -d ."]},
                         {"id": "t2", "type": "task", "verify": [verify]}]}}, run_id="r1")
    lines = str(refused.value).splitlines()
    assert lines[0] == "planner node 'plan' adds work plan lint refuses; nothing was added:"
    assert len(lines) == 2 and lines[1].startswith(f"error: t2: verify {verify!r} ")
    assert sorted(node["id"] for node in nodes.list_nodes(g)) == before
    assert nodes.get_node(g, "plan")["status"] == "in_progress"


def test_a_planner_result_with_real_checks_is_applied(g) -> None:
    _planner(g)
    out = results.apply_result(g, "plan", {"status": "success", "summary": "planned", "next": {
        "addNodes": [{"id": "t1", "type": "task", "verify": ["test -f t1.txt"]}]}},
        run_id="r1")
    assert out["added"] == ["t1"]
