"""A sprint's lifecycle on a real git repository: checkpoint, routing, resume, plan import,
archive — and its unhappy paths (two writers, a moved HEAD, bad plans, a damaged file)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from clavain.errors import ClavainError
from clavain.models.checkpoint import Checkpoint
from clavain.paths import StatePaths
from clavain.sprint import checkpoint, lifecycle
from clavain.verdicts import files as verdict_files
from tests.unit import sprint_work as work

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "schemas" /
                     "checkpoint.schema.json").read_text())
LIB = Path(__file__).resolve().parents[2] / "lib"


@pytest.fixture
def state(project: Path) -> StatePaths:
    _commit(project, "first")
    return StatePaths.discover()


def _commit(project: Path, message: str) -> str:
    (project / f"{message}.txt").write_text(message)
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@x", "PATH": "/usr/bin:/bin"}
    subprocess.run(["git", "add", "-A"], cwd=project, check=True, env=env)
    subprocess.run(["git", "commit", "-qm", message], cwd=project, check=True, env=env)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=project, text=True, check=True,
                          capture_output=True).stdout.strip()


def _on_disk(state: StatePaths) -> dict:
    document = json.loads(state.sprint_checkpoint.read_text())
    jsonschema.validate(document, SCHEMA)
    Checkpoint.model_validate(document)
    return document


def _verdict(state: StatePaths, agent: str, status: str, sprint_id: str | None) -> None:
    verdict = verdict_files.build({"type": "verdict", "status": status, "summary": "s"},
                                  agent=agent)
    verdict["sprint_id"] = sprint_id
    verdict_files.write(state.verdicts, verdict)


def test_start_classifies_routes_and_writes_a_valid_checkpoint(state: StatePaths,
                                                               project: Path) -> None:
    started = lifecycle.start(state, "rename foo to bar", complexity="2")
    assert started["routing"] == ("Complexity 2/5 (simple) — skipping brainstorm, strategy, "
                                  "plan-review")
    document = _on_disk(state)
    assert document["route"] == ["plan", "execute", "test", "quality-gates", "resolve", "ship"]
    assert document["skipped"] == {"brainstorm": "complexity 2", "strategy": "complexity 2",
                                   "plan-review": "complexity 2"}
    assert (document["complexity"], document["complexity_overridden"]) == (2, True)
    assert document["reviewers"] == ["quality", "correctness"]
    assert document["current_step"] == "plan" and document["completed_steps"] == []
    assert document["git_sha"] == subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=project, text=True, capture_output=True).stdout.strip()


@pytest.mark.parametrize(("score", "steps", "reviewers", "model"), [
    (1, 6, 2, None), (3, 9, 4, None), (4, 9, 6, "opus"), (5, 9, 6, "opus")])
def test_routing_scales_with_complexity(state, score, steps, reviewers, model) -> None:
    started = lifecycle.start(state, "some work to route", complexity=str(score))
    assert len(started["route"]) == steps and len(started["reviewers"]) == reviewers
    assert started["orchestration_model"] == model and started["goal_check"] == "goal"


def test_skip_to_starts_later_and_bad_values_name_the_allowed_ones(state) -> None:
    with pytest.raises(ClavainError, match="unknown step 'later'; the steps are: brainstorm"):
        lifecycle.start(state, "x y z", skip_to="later")
    with pytest.raises(ClavainError, match="complexity must be 1, 2, 3, 4 or 5, got '9'"):
        lifecycle.start(state, "x y z", complexity="9")
    assert not state.sprint_checkpoint.exists()
    started = lifecycle.start(state, "add caching to the product service", complexity="3",
                              skip_to="execute")
    assert started["route"][0] == "execute" and started["current_step"] == "execute"
    assert started["skipped"]["plan"] == "started at execute"


def test_one_active_sprint_per_project(state) -> None:
    first = lifecycle.start(state, "add caching to the product service")
    with pytest.raises(ClavainError, match=rf"sprint {first['sprint_id']} .* is active at step "
                                           r".*resume with `clavain sprint resume`"):
        lifecycle.start(state, "something else entirely now")
    assert _on_disk(state)["sprint_id"] == first["sprint_id"]


def test_done_keeps_steps_ordered_without_duplicates(state) -> None:
    lifecycle.start(state, "add caching to the product service", complexity="2")
    with pytest.raises(ClavainError, match="the sprint is at step plan, not execute"):
        lifecycle.done(state, "execute")
    work.record_plan(state)
    with pytest.raises(ClavainError, match="to redo plan: `clavain sprint resume --from-step "
                                           "plan`"):
        lifecycle.done(state, "plan")
    for n in range(7):  # redo the plan step seven times, each with its decision
        lifecycle.resume(state, from_step="plan")
        again = lifecycle.done(state, "plan", decision=f"decision {n}")
        assert again["completed_steps"] == ["plan"] and again["current_step"] == "execute"
    assert _on_disk(state)["decisions"] == [f"decision {n}" for n in range(2, 7)]
    with pytest.raises(ClavainError, match="step brainstorm was skipped for this sprint"):
        lifecycle.done(state, "brainstorm")


# Each writer records whatever step is current, with a waiver, until the sprint ships; it prints
# the steps it recorded. Every step must be recorded exactly once, in route order.
_WRITER = """
import sys
sys.path.insert(0, sys.argv[1])
from clavain.errors import ClavainError
from clavain.paths import StatePaths
from clavain.sprint import checkpoint, lifecycle
state = StatePaths(sys.argv[2], project=sys.argv[3])
mine = []
while True:
    try:
        active = checkpoint.read(state)
    except ClavainError:
        continue
    if active is None:
        break
    step = active["current_step"]
    try:
        lifecycle.done(state, step, waive="race", wait_seconds=0,
                       plan_path="plan.md" if step == "plan" else None)
        mine.append(step)
    except ClavainError as exc:
        if "changed while" not in str(exc) and "the sprint is at step" not in str(exc) \
                and "no active sprint" not in str(exc):
            raise
print(" ".join(mine))
"""


def test_two_writers_never_lose_or_repeat_a_step(state) -> None:
    started = lifecycle.start(state, "add caching to the product service", complexity="3")
    (state.project / "plan.md").write_text(work.PLAN)
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(LIB), str(state.root),
                               str(state.project)], stdout=subprocess.PIPE, text=True)
             for _ in range(3)]
    outputs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0]
    recorded = [step for out in outputs for step in out.split()]
    assert sorted(recorded) == sorted(started["route"])  # each step once, none lost
    archived = json.loads((state.runs / started["sprint_id"] / "checkpoint.json").read_text())
    assert archived["completed_steps"] == started["route"]
    # Only gates that refused were waived (no gate before plan; no verdict to answer at resolve).
    assert [w["step"] for w in archived["waivers"]] == [
        "plan-review", "execute", "test", "quality-gates", "ship"]


def test_a_stale_copy_never_touches_a_newer_sprint(state, monkeypatch) -> None:
    """`done` read sprint A; while it waited for reviewers, A was abandoned and B started: it
    records nothing, and B's checkpoint is intact."""
    from clavain.sprint import gates

    first = lifecycle.start(state, "rename foo to bar", complexity="2")
    work.walk_to(state, "quality-gates")
    second: dict = {}

    def meanwhile(*args, **kwargs) -> None:
        lifecycle.abandon(state)
        second.update(lifecycle.start(state, "something else to do now", complexity="2"))

    monkeypatch.setattr(gates, "wait_for_reviews", meanwhile)
    with pytest.raises(ClavainError, match=f"sprint {first['sprint_id']} changed while this "
                                           "command ran"):
        lifecycle.done(state, "quality-gates", waive="x")
    current = _on_disk(state)
    assert current["sprint_id"] == second["sprint_id"] and current["completed_steps"] == []


def test_resume_warns_when_head_moved_and_never_blocks(state, project) -> None:
    lifecycle.start(state, "add caching to the product service", complexity="2")
    work.record_plan(state)
    steady = lifecycle.resume(state)
    assert steady["git_warning"] is None
    assert (steady["step_number"], steady["current_step"]) == (2, "execute")
    assert steady["next_action"].startswith("step execute:")
    moved = _commit(project, "second")
    warned = lifecycle.resume(state)
    assert "1 commit(s) since the checkpoint on " in warned["git_warning"]
    assert moved[:12] in warned["git_warning"]
    work.run_graph(state, stop_before=("integrate",))
    lifecycle.done(state, "execute")  # not blocked
    assert lifecycle.resume(state)["git_warning"] is None  # the checkpoint caught up


def test_resume_tells_a_branch_switch_from_progress(state, project) -> None:
    lifecycle.start(state, "add caching to the product service", complexity="2")
    branch = checkpoint.read(state)["branch"]
    assert branch
    subprocess.run(["git", "switch", "-qc", "elsewhere"], cwd=project, check=True)
    warned = lifecycle.resume(state)["git_warning"]
    assert warned.startswith(f"checkpoint made on branch {branch}, now on elsewhere")
    subprocess.run(["git", "switch", "-q", branch], cwd=project, check=True)
    _commit(project, "rewritten")
    assert "1 commit(s) since the checkpoint" in lifecycle.resume(state)["git_warning"]


def test_resume_from_step_ignores_the_checkpoint(state) -> None:
    lifecycle.start(state, "add caching to the product service", complexity="3")
    work.walk_to(state, "test")
    back = lifecycle.resume(state, from_step="plan")
    assert back["current_step"] == "plan"
    assert back["completed_steps"] == ["brainstorm", "strategy"]


def test_ship_archives_checkpoint_summary_and_the_sprints_verdicts(state) -> None:
    started = lifecycle.start(state, "rename foo to bar", complexity="1")
    report = work.walk_to_ship(state)
    folder = state.project / report["archived"]
    assert folder == state.runs / started["sprint_id"]
    assert not state.sprint_checkpoint.exists()
    archived = json.loads((folder / "checkpoint.json").read_text())
    assert archived["outcome"] == "shipped" and archived["current_step"] is None
    summary = json.loads((folder / "summary.json").read_text())
    assert (summary["steps_done"], summary["steps_total"]) == (6, 6)
    assert summary["verdict_counts"] == {"CLEAN": 3}  # quality, correctness, goal
    assert {p.suffix for p in (folder / "verdicts").iterdir()} == {".json"}
    assert not any(state.verdicts.glob("*.json"))


def test_a_new_sprint_starts_with_no_stale_verdicts(state) -> None:
    _verdict(state, "clavain:fd-safety", "NEEDS_ATTENTION", None)  # before any sprint
    started = lifecycle.start(state, "add caching to the product service")
    from clavain.sprint.summary import summarize

    assert summarize(state, started)["verdict_counts"] == {}
    earlier = state.runs / f"before-{started['sprint_id']}" / "verdicts"
    [kept] = list(earlier.glob("*.json"))
    assert json.loads(kept.read_text())["status"] == "NEEDS_ATTENTION"  # still readable
    _verdict(state, "clavain:fd-quality", "CLEAN", started["sprint_id"])
    assert summarize(state, started)["verdict_counts"] == {"CLEAN": 1}
    lifecycle.abandon(state)
    second = lifecycle.start(state, "now something else to do")
    assert summarize(state, second)["agents_dispatched"] == 0


PLAN = """# Plan: rename foo to bar

Acceptance: no `foo` left in src/.

```json
{"nodes": [
  {"id": "task-rename", "type": "task", "title": "rename foo to bar",
   "verify": ["! grep -rq foo src"], "ownership": ["src/**"]}
]}
```
"""


def test_done_plan_imports_the_tasks_with_their_gates(state) -> None:
    from clavain.workgraph import nodes

    lifecycle.start(state, "rename foo to bar", complexity="2")
    (state.project / "plan.md").write_text(PLAN)
    report = lifecycle.done(state, "plan", plan_path="plan.md")
    assert report["plan"]["added"] == ["task-rename"] and report["plan_path"] == "plan.md"
    g = work.graph(state)
    assert sorted(n["id"] for n in nodes.list_nodes(g)) == [
        "final-verify", "integrate", "task-rename", "verify-task-rename"]
    # Recording the same plan again changes nothing, and says so.
    lifecycle.resume(state, from_step="plan")
    again = lifecycle.done(state, "plan")
    assert again["plan"]["unchanged"] == ["task-rename"]
    assert again["plan"]["added"] == [] and again["plan"]["updated"] == {}
    g.conn.close()


@pytest.mark.parametrize(("plan", "message"), [
    ("no block at all", "exactly one ```json block"),
    ("```json\n{\"nodes\": []}\n```", "1 to 6 tasks"),
    ("```json\n{\"nodes\": [" + ",".join(
        f'{{"id": "t{i}", "verify": ["test -e .git"], "ownership": ["a"]}}' for i in range(7))
     + "]}\n```", "1 to 6 tasks"),
    ('```json\n{"nodes": [{"id": "v", "type": "verify", "verify": ["test -e .git"], '
     '"ownership": ["a"]}]}\n```', "tasks only"),
    ('```json\n{"nodes": [{"id": "t", "ownership": ["a"]}]}\n```', "needs at least one verify"),
    ('```json\n{"nodes": [{"id": "t", "verify": ["test -e .git"]}]}\n```',
     "needs at least one ownership"),
    ('```json\n{"nodes": [{"id": "t", "verify": ["x"], "ownership": ["a"], '
     '"dependsOn": ["ghost"]}]}\n```', "depends on unknown node 'ghost'"),
    ('```json\n{"nodes": [{"id": "t" "verify"}]}\n```', "not valid JSON"),
])
def test_a_bad_plan_is_refused_and_nothing_is_recorded(state, plan, message) -> None:
    lifecycle.start(state, "rename foo to bar", complexity="2")
    (state.project / "plan.md").write_text(plan)
    with pytest.raises(ClavainError, match=message):
        lifecycle.done(state, "plan", plan_path="plan.md")
    assert _on_disk(state)["completed_steps"] == []
    if state.db.exists():
        with sqlite3.connect(state.db) as conn:
            assert conn.execute("SELECT count(*) FROM nodes").fetchone()[0] == 0


def test_a_damaged_checkpoint_is_one_line_and_abandon_sets_it_aside(state) -> None:
    state.root.mkdir(exist_ok=True)
    state.sprint_checkpoint.write_text('{"sprint_id": 5}')
    with pytest.raises(ClavainError, match=r"checkpoint\.json: .*abandon` sets it aside"):
        lifecycle.resume(state)
    state.sprint_checkpoint.write_text("{not json")
    with pytest.raises(ClavainError, match="not valid JSON"):
        checkpoint.read(state)


def test_without_an_active_sprint_every_step_command_says_how_to_start(state) -> None:
    for call in (lambda: lifecycle.done(state, "plan"), lambda: lifecycle.resume(state)):
        with pytest.raises(ClavainError, match="no active sprint; start one with `clavain "
                                               "sprint start DESCRIPTION`"):
            call()
    with pytest.raises(ClavainError, match="no active sprint to abandon"):
        lifecycle.abandon(state)
    with pytest.raises(ClavainError, match="a sprint needs a description"):
        lifecycle.start(state, "   ")


def test_the_checkpoint_schemas_match_the_model() -> None:
    from clavain.models import checkpoint as model

    text = model.render_schema()
    assert model.REPO_SCHEMA.read_text() == text, (
        "schemas/checkpoint.schema.json is stale: python -m clavain.models.checkpoint")
    assert model.PACKAGED_SCHEMA.read_text() == text


VALID = {"version": 1, "sprint_id": "s", "description": "d", "complexity": 2,
         "complexity_label": "simple", "complexity_overridden": False,
         "complexity_reasons": ["r"], "route": ["plan"], "skipped": {}, "reviewers": [],
         "goal_check": "goal", "orchestration_model": None, "completed_steps": [],
         "current_step": "plan", "plan_path": None, "decisions": [], "git_sha": None,
         "started_at": "t", "updated_at": "t"}


def _mutations():
    from hypothesis import strategies as st

    values = (st.none() | st.booleans() | st.integers(-1, 7) | st.text(max_size=3)
              | st.sampled_from(["plan", "ship", "nope", 1.0, True])
              | st.lists(st.sampled_from(["plan", "ship", "x", 3]), max_size=7)
              | st.dictionaries(st.text(max_size=2), st.text(max_size=2) | st.integers(),
                                max_size=2))
    return st.dictionaries(st.sampled_from([*VALID, "extra"]), values, max_size=3).map(
        lambda changes: {**VALID, **changes})


def test_the_stdlib_checker_agrees_with_jsonschema_on_checkpoints() -> None:
    from hypothesis import given, settings

    from clavain import schema_check

    @settings(max_examples=400, deadline=None)
    @given(document=_mutations())
    def agree(document: dict) -> None:
        assert schema_check.valid(document, SCHEMA, SCHEMA) == \
            jsonschema.Draft202012Validator(SCHEMA).is_valid(document)

    agree()
    assert schema_check.valid(VALID, SCHEMA, SCHEMA)


def test_hints_name_slash_commands_inside_claude_code_only(state, monkeypatch) -> None:
    with pytest.raises(ClavainError, match="start one with `clavain sprint start DESCRIPTION`"):
        lifecycle.resume(state)
    monkeypatch.setenv("CLAUDECODE", "1")
    with pytest.raises(ClavainError, match="start one with /clavain:sprint DESCRIPTION"):
        lifecycle.resume(state)
    lifecycle.start(state, "add caching to the product service")
    with pytest.raises(ClavainError, match="resume with /clavain:sprint --resume"):
        lifecycle.start(state, "something else")


def test_a_fifo_in_place_of_the_checkpoint_never_hangs_and_is_set_aside(state) -> None:
    import os

    state.root.mkdir(exist_ok=True)
    os.mkfifo(state.sprint_checkpoint)
    with pytest.raises(ClavainError, match="is not a regular file"):
        checkpoint.read(state)
    assert lifecycle.abandon(state)["set_aside"].startswith(".clavain/checkpoint.corrupt-")
    assert checkpoint.read(state) is None


def test_a_lost_sprints_graph_is_closed_not_left_running(state) -> None:
    from clavain.store import db
    from clavain.workgraph import graphs

    lost = lifecycle.start(state, "rename foo to bar", complexity="2")
    work.record_plan(state)
    state.sprint_checkpoint.write_text("{damaged")
    report = lifecycle.abandon(state)
    assert report["closed_graphs"] == [lost["sprint_id"]]
    conn = db.connect(state.db)
    try:
        assert graphs.get(conn, lost["sprint_id"])["status"] == "abandoned"
        assert {row[0] for row in conn.execute(
            "SELECT status FROM nodes WHERE graph_id = ?", (lost["sprint_id"],))} == {
            "cancelled"}
    finally:
        conn.close()
    # A start that crashed before its checkpoint leaves an orphan: the next start closes it.
    conn = db.connect(state.db)
    with db.transaction(conn):
        graphs.ensure(conn, "sprint-orphan", at="2026-01-01T00:00:00.000Z", kind="sprint")
    conn.close()
    lifecycle.start(state, "next piece of work")
    conn = db.connect(state.db)
    try:
        assert graphs.get(conn, "sprint-orphan")["status"] == "abandoned"
    finally:
        conn.close()


_ABANDONER = """
import sys, time
sys.path.insert(0, sys.argv[1])
from clavain.errors import ClavainError
from clavain.paths import StatePaths
from clavain.sprint import lifecycle
state = StatePaths(sys.argv[2], project=sys.argv[3])
time.sleep(float(sys.argv[4]))
try:
    print(lifecycle.abandon(state)["sprint_id"])
except ClavainError as exc:
    print("refused:", exc)
"""


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.2])
def test_finishing_and_abandoning_at_once_never_lose_the_checkpoint(state, delay) -> None:
    started = lifecycle.start(state, "add caching to the product service", complexity="3")
    (state.project / "plan.md").write_text(work.PLAN)
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(LIB), str(state.root),
                               str(state.project)], stdout=subprocess.PIPE, text=True)
    abandoner = subprocess.Popen([sys.executable, "-c", _ABANDONER, str(LIB), str(state.root),
                                  str(state.project), str(delay)], stdout=subprocess.PIPE,
                                 text=True)
    recorded = writer.communicate(timeout=300)[0].split()
    abandoned = abandoner.communicate(timeout=300)[0].strip()
    assert (writer.returncode, abandoner.returncode) == (0, 0)
    assert not state.sprint_checkpoint.exists()  # shipped or abandoned: either way, archived
    archived = json.loads((state.runs / started["sprint_id"] / "checkpoint.json").read_text())
    # The archive holds every step the writer recorded, and only those, in route order.
    assert archived["completed_steps"] == [s for s in started["route"] if s in recorded]
    if abandoned == started["sprint_id"]:
        assert archived["outcome"] == "abandoned"
    else:
        assert abandoned.startswith("refused: no active sprint")
        assert archived["outcome"] == "shipped" and recorded == started["route"]
