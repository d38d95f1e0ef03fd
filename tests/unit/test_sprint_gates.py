"""Every gate of a sprint: the shortcut is refused with one line and the checkpoint untouched,
then the step passes the honest way; a person's waiver is recorded as WAIVED with its reason."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from clavain.errors import ClavainError
from clavain.paths import StatePaths
from clavain.sprint import checkpoint, gates, lifecycle
from tests.unit import sprint_work as work


@pytest.fixture
def state(project: Path) -> StatePaths:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@x", "PATH": "/usr/bin:/bin"}
    (project / "README").write_text("r\n")
    subprocess.run(["git", "add", "-A"], cwd=project, check=True, env=env)
    subprocess.run(["git", "commit", "-qm", "first"], cwd=project, check=True, env=env)
    return StatePaths.discover()


def _refused(state: StatePaths, step: str, match: str, **kwargs) -> None:
    before = state.sprint_checkpoint.read_bytes()
    with pytest.raises(ClavainError, match=match):
        lifecycle.done(state, step, wait_seconds=0, **kwargs)
    assert state.sprint_checkpoint.read_bytes() == before, "a refused step changed the checkpoint"


# ------------------------------------------------------------------ steps in order

@pytest.mark.parametrize("step", ["ship", "execute", "quality-gates", "strategy", "resolve"])
def test_only_the_current_step_is_recorded(state, step) -> None:
    lifecycle.start(state, "add a greeting module", complexity="3")
    _refused(state, step, r"the sprint is at step brainstorm, not " + step)


def test_a_step_done_before_names_how_to_go_back(state) -> None:
    lifecycle.start(state, "add a greeting module", complexity="3")
    lifecycle.done(state, "brainstorm")
    _refused(state, "brainstorm", r"to redo brainstorm: `clavain sprint resume --from-step "
                                  r"brainstorm`")


def test_a_skipped_step_says_it_was_skipped(state) -> None:
    lifecycle.start(state, "rename foo to bar", complexity="2")
    _refused(state, "brainstorm", r"step brainstorm was skipped for this sprint \(complexity 2\)")


# ------------------------------------------------------------------ each gate

def test_plan_needs_a_plan_and_records_it(state) -> None:
    lifecycle.start(state, "rename foo to bar", complexity="2")
    _refused(state, "plan", r"step plan records its plan: `clavain sprint done plan --plan PATH`")
    report = work.record_plan(state)
    assert report["plan"]["added"] == ["task-hello"] and report["current_step"] == "execute"


def test_plan_review_needs_a_plan_verdict_filed_since_the_step_began(state) -> None:
    lifecycle.start(state, "add a greeting module", complexity="3")
    work.walk_to(state, "plan-review")
    _refused(state, "plan-review", r"no verdict yet from lens plan since step plan-review began")
    work.file_verdict(state, "plan", "ERROR", summary="crashed")
    _refused(state, "plan-review", r"lens plan's verdict is ERROR \(crashed\)")
    work.file_verdict(state, "plan")
    assert lifecycle.done(state, "plan-review")["current_step"] == "execute"


def test_a_verdict_from_before_the_step_does_not_count(state) -> None:
    lifecycle.start(state, "add a greeting module", complexity="3")
    work.walk_to(state, "plan-review")
    work.file_verdict(state, "plan")
    lifecycle.done(state, "plan-review")
    lifecycle.resume(state, from_step="plan-review")
    _refused(state, "plan-review", r"no verdict yet from lens plan")


def test_a_verdict_filed_under_another_sprint_does_not_count(state) -> None:
    lifecycle.start(state, "add a greeting module", complexity="3")
    work.walk_to(state, "plan-review")
    work.file_verdict(state, "plan", sprint_id="sprint-someone-else")
    _refused(state, "plan-review", r"no verdict yet from lens plan")


def test_execute_needs_every_task_done_and_verified(state) -> None:
    lifecycle.start(state, "rename foo to bar", complexity="2")
    _refused(state, "plan", "records its plan")
    work.record_plan(state)
    _refused(state, "execute", r"1 task\(s\) not done: task-hello \(open\)")
    g = work.graph(state)
    from clavain.workgraph import results, schedule

    claimed = schedule.next_node(g, claim=True)
    results.apply_result(g, "task-hello", {"status": "success", "summary": "claimed done"},
                         run_id=claimed["run_id"])
    g.conn.close()
    # Done by its runner's word, but its verify node has not run (and would fail: no file).
    _refused(state, "execute", r"1 verify node\(s\) not passed: verify-task-hello \(open\)")
    (state.project / "hello.txt").write_text("hello\n")
    work.run_graph(state, stop_before=("integrate",))
    assert lifecycle.done(state, "execute")["current_step"] == "test"


def test_execute_refuses_an_empty_graph(state) -> None:
    lifecycle.start(state, "rename foo to bar", complexity="2", skip_to="execute")
    _refused(state, "execute", r"the sprint's graph has no tasks yet")


def test_quality_gates_needs_every_lens_and_no_error(state) -> None:
    lifecycle.start(state, "rename foo to bar", complexity="2")
    work.walk_to(state, "quality-gates")
    wanted = gates.lenses_for(work.active(state), "quality-gates")
    assert wanted == ["quality", "correctness", "goal"]
    _refused(state, "quality-gates", r"no verdict yet from lens quality, correctness, goal")
    work.file_verdict(state, "quality")
    work.file_verdict(state, "correctness", "ERROR", summary="transcript lost")
    _refused(state, "quality-gates", r"no verdict yet from lens goal .*lens correctness's "
                                     r"verdict is ERROR")
    work.file_verdict(state, "correctness", "NEEDS_ATTENTION")
    work.file_verdict(state, "goal")
    # NEEDS_ATTENTION passes quality-gates: answering it is the resolve step's job.
    assert lifecycle.done(state, "quality-gates")["current_step"] == "resolve"


def test_resolve_needs_every_attention_verdict_answered(state) -> None:
    lifecycle.start(state, "rename foo to bar", complexity="2")
    work.walk_to(state, "quality-gates")
    for lens in ("quality", "goal"):
        work.file_verdict(state, lens)
    flagged = work.file_verdict(state, "correctness", "NEEDS_ATTENTION", summary="off by one")
    blocked = work.file_verdict(state, "quality", "BLOCKED", summary="cannot build")
    lifecycle.done(state, "quality-gates")
    # Filed in the same millisecond, the two come in either order: the line names one of them.
    _refused(state, "resolve", r"2 verdict\(s\) need an answer: (NEEDS_ATTENTION "
                               r"clavain:reviewer/correctness \(off by one\)|BLOCKED "
                               r"clavain:reviewer/quality \(cannot build\)) and 1 more; .*"
                               rf"`clavain verdicts resolve ({flagged['dispatch']}|"
                               rf"{blocked['dispatch']}) --note TEXT`")
    work.file_verdict(state, "correctness")  # a later CLEAN of the same lens answers it
    from clavain.verdicts.resolutions import resolve

    with pytest.raises(ClavainError, match="needs a note"):
        resolve(state.verdicts, blocked["dispatch"], "  ", inside=state.root)
    _refused(state, "resolve", r"1 verdict\(s\) need an answer: BLOCKED")
    resolve(state.verdicts, blocked["dispatch"], "builds on CI; local toolchain only",
            inside=state.root)
    assert lifecycle.done(state, "resolve")["current_step"] == "ship"


def test_a_clean_verdict_of_another_lens_answers_nothing(state) -> None:
    lifecycle.start(state, "rename foo to bar", complexity="2")
    work.walk_to(state, "quality-gates")
    work.file_verdict(state, "correctness", "NEEDS_ATTENTION")
    for lens in ("quality", "correctness", "goal"):
        work.file_verdict(state, lens if lens != "correctness" else "quality")
    work.file_verdict(state, "goal")
    work.file_verdict(state, "correctness", "NEEDS_ATTENTION")
    lifecycle.done(state, "quality-gates")
    _refused(state, "resolve", r"NEEDS_ATTENTION clavain:reviewer/correctness")


def test_ship_needs_the_whole_graph_done_and_final_verify_on_this_tree(state) -> None:
    lifecycle.start(state, "rename foo to bar", complexity="2")
    work.walk_to(state, "ship")
    _refused(state, "ship", r"2 node\(s\) of the sprint's graph not done: integrate \(open\), "
                            r"final-verify \(open\)")
    work.run_graph(state)
    (state.project / "hello.txt").write_text("changed after the final gate\n")
    _refused(state, "ship", r"final-verify ran on tree git:[0-9a-f]{12}, the files are now "
                            r"git:[0-9a-f]{12} \(changed since\): run it again")
    g = work.graph(state)
    from clavain.workgraph import edits, verifier

    edits.reset(g, "final-verify")
    verifier.run_verify(g, "final-verify")
    g.conn.close()
    report = lifecycle.done(state, "ship")
    assert report["archived"] and report["current_step"] is None


def test_ship_refuses_an_unanswered_verdict_even_after_resolve(state) -> None:
    lifecycle.start(state, "rename foo to bar", complexity="2")
    work.walk_to(state, "ship")
    work.run_graph(state)
    work.file_verdict(state, "safety", "NEEDS_ATTENTION", summary="late finding")
    _refused(state, "ship", r"1 verdict\(s\) need an answer: NEEDS_ATTENTION "
                            r"clavain:reviewer/safety \(late finding\)")


def test_a_whole_complexity_3_sprint_ships_only_through_its_gates(state) -> None:
    started = lifecycle.start(state, "add a greeting module", complexity="3")
    report = work.walk_to_ship(state)
    folder = state.project / report["archived"]
    archived = json.loads((folder / "checkpoint.json").read_text())
    assert archived["completed_steps"] == started["route"] and archived["waivers"] == []
    snapshot = json.loads((folder / "workgraph.json").read_text())
    assert {n["status"] for n in snapshot["nodes"]} == {"done"}
    assert [g["status"] for g in snapshot["graphs"]] == ["shipped"]


# ------------------------------------------------------------------ waivers

def test_a_waiver_passes_a_gate_and_is_recorded_everywhere(state) -> None:
    lifecycle.start(state, "rename foo to bar", complexity="2")
    work.record_plan(state)
    with pytest.raises(ClavainError, match="a waiver needs a reason"):
        lifecycle.done(state, "execute", waive="   ")
    report = lifecycle.done(state, "execute", waive="tasks run by hand on the staging box")
    assert report["waived"]["reason"] == "tasks run by hand on the staging box"
    assert report["waived"]["problems"][0].startswith("1 task(s) not done")
    [waiver] = checkpoint.read(state)["waivers"]
    assert waiver["step"] == "execute"
    for step in ("test", "quality-gates", "resolve", "ship"):
        lifecycle.done(state, step, waive="demo", wait_seconds=0)
    folder = state.runs / report["sprint_id"]
    summary = json.loads((folder / "summary.json").read_text())
    assert [w["step"] for w in summary["waived"]] == ["execute", "test", "quality-gates",
                                                       "ship"]
    text = (folder / "report.md").read_text()
    assert "WAIVED execute: tasks run by hand on the staging box" in text
    assert "## Waived gates" in text


def test_a_gate_that_holds_needs_no_waiver_and_records_none(state) -> None:
    lifecycle.start(state, "rename foo to bar", complexity="2")
    report = work.record_plan(state)
    assert report["waived"] is None and checkpoint.read(state)["waivers"] == []


# ------------------------------------------------------------------ running reviewers

def test_quality_gates_waits_for_a_running_reviewer_then_passes(state, tmp_path) -> None:
    import threading
    import time

    from clavain.verdicts import dispatches

    lifecycle.start(state, "rename foo to bar", complexity="2")
    work.walk_to(state, "quality-gates")
    work.file_verdict(state, "quality")
    work.file_verdict(state, "goal")
    transcript = tmp_path / "sess.jsonl"
    transcript.write_text("")
    sub = tmp_path / "s1" / "subagents"
    sub.mkdir(parents=True)
    (sub / "agent-a1.jsonl").write_text(json.dumps(
        {"type": "user", "message": {"role": "user", "content": "Lens: correctness\nreview"}})
        + "\n")
    payload = {"agent_id": "a1", "session_id": "s1", "transcript_path": str(transcript)}
    dispatches.started(state, payload, work.active(state)["sprint_id"], "clavain:reviewer")
    [running] = dispatches.running(state)
    assert running["lens"] == "correctness"

    def report_later() -> None:
        time.sleep(1.5)
        work.file_verdict(state, "correctness")
        dispatches.finished(state, "a1")

    lines: list[str] = []
    reporter = threading.Thread(target=report_later)
    reporter.start()
    done = lifecycle.done(state, "quality-gates", wait_seconds=30, progress=lines.append)
    reporter.join()
    assert done["current_step"] == "resolve"
    assert lines and "waiting for 1 reviewer dispatch(es) still running (lens correctness)" \
        in lines[0]


def test_a_reviewer_still_running_at_the_deadline_is_named(state, tmp_path) -> None:
    from clavain.verdicts import dispatches

    lifecycle.start(state, "rename foo to bar", complexity="2")
    work.walk_to(state, "quality-gates")
    payload = {"agent_id": "a2", "session_id": "s1",
               "transcript_path": str(tmp_path / "sess.jsonl")}
    dispatches.started(state, payload, work.active(state)["sprint_id"], "clavain:reviewer")
    _refused(state, "quality-gates", r"no verdict yet from lens quality, correctness, goal .*"
                                     r"\(1 reviewer dispatch\(es\) still running")


def test_a_dead_dispatch_is_not_waited_for(state, tmp_path) -> None:
    from clavain.verdicts import dispatches

    lifecycle.start(state, "rename foo to bar", complexity="2")
    payload = {"agent_id": "a3", "session_id": "s1",
               "transcript_path": str(tmp_path / "sess.jsonl")}
    dispatches.started(state, payload, None, "clavain:reviewer")
    assert dispatches.running(state, now=10**10) == []
    assert len(dispatches.running(state)) == 1
    dispatches.finished(state, "a3")
    assert dispatches.running(state) == []


def test_resume_from_step_only_goes_back(state) -> None:
    lifecycle.start(state, "add a greeting module", complexity="3")
    before = state.sprint_checkpoint.read_bytes()
    with pytest.raises(ClavainError, match=r"step ship is ahead of the sprint \(at step "
                                           r"brainstorm\): --from-step only goes back"):
        lifecycle.resume(state, from_step="ship")
    assert state.sprint_checkpoint.read_bytes() == before


def test_waivers_skips_and_lower_complexity_are_a_persons_decision(state) -> None:
    with pytest.raises(ClavainError, match=r"skipping steps \(--skip-to\) is a person's "
                                           "decision"):
        lifecycle.start(state, "rename foo to bar", skip_to="ship", decided_by=None)
    with pytest.raises(ClavainError, match=r"below the classifier's 4 \(--complexity 1\)"):
        lifecycle.start(state, "add OAuth login", complexity="1", decided_by=None)
    assert not state.sprint_checkpoint.exists()
    person = {"by": "person", "via": "terminal", "terminal": "/dev/pts/1", "user": "ann",
              "at": "2026-11-27T10:00:00.000Z"}
    started = lifecycle.start(state, "add OAuth login", complexity="2", decided_by=person)
    assert started["person_decisions"] == [
        {"what": "complexity 2, below the classifier's 4", "decided_by": person}]
    work.record_plan(state)
    _refused(state, "execute", r"passing a gate \(--waive\) is a person's decision",
             waive="the agent thinks so", decided_by=None)


def test_a_check_passes_only_through_the_shell_verifier(state) -> None:
    from clavain.workgraph import edits, kv, results, schedule

    lifecycle.start(state, "rename foo to bar", complexity="2")
    work.record_plan(state)
    g = work.graph(state)
    try:
        claimed = schedule.next_node(g, claim=True)  # task-hello; its file is never written
        results.apply_result(g, "task-hello", {"status": "success", "summary": "s"},
                             run_id=claimed["run_id"])
        from clavain.workgraph import verifier

        assert verifier.run_verify(g, "verify-task-hello")["apply"]["to"] != "done"
        edits.reset(g, "verify-task-hello")
        claimed = schedule.next_node(g, claim=True)
        assert claimed["node"]["id"] == "verify-task-hello"
        with pytest.raises(ClavainError, match="only the shell verifier records its result"):
            results.apply_result(g, "verify-task-hello", {"status": "success", "summary": "ok"},
                                 run_id=claimed["run_id"])
        with pytest.raises(ClavainError, match="written by the shell verifier only"):
            kv.put(g, "final-verify", "out.tree", "git:forged")
        # Even a `done` written straight into the database does not pass the gate.
        g.conn.execute("UPDATE nodes SET status = 'done', lock_run_id = NULL WHERE graph_id = ? "
                       "AND id = 'verify-task-hello'", (g.id,))
    finally:
        g.conn.close()
    _refused(state, "execute", r"verify-task-hello \(done, but not by the shell verifier")


def test_a_crash_while_shipping_leaves_a_sprint_that_ships_again(state, monkeypatch) -> None:
    lifecycle.start(state, "rename foo to bar", complexity="2")
    work.walk_to(state, "ship")
    work.run_graph(state)
    real = checkpoint.archive_locked

    def crash(*args, **kwargs):
        raise OSError("disk full while archiving")

    monkeypatch.setattr(checkpoint, "archive_locked", crash)
    with pytest.raises(OSError, match="disk full"):
        lifecycle.done(state, "ship")
    assert checkpoint.read(state)["current_step"] == "ship"  # still there, still at ship
    monkeypatch.setattr(checkpoint, "archive_locked", real)
    report = lifecycle.done(state, "ship")
    assert report["archived"] and not state.sprint_checkpoint.exists()


def test_ship_refuses_a_sprint_that_built_nothing(state) -> None:
    lifecycle.start(state, "rename foo to bar", complexity="2", skip_to="ship")
    _refused(state, "ship", r"the sprint's graph has no tasks, so nothing was built or checked")


def test_the_summary_names_the_steps_skipped_and_why(state) -> None:
    from clavain.sprint.summary import render, summarize

    started = lifecycle.start(state, "add a greeting module", complexity="3", skip_to="execute")
    text = render(summarize(state, started))
    assert "- Skipped: brainstorm, strategy, plan, plan-review (started at execute)" in text
