"""A property test against a naive model of the route: random sequences of start, done (with or
without the work its gate needs), verdicts, resolutions, file edits, resume and abandon never
let a sprint record a step out of order or ship with open nodes, missing lenses, an unanswered
verdict or a final gate run on other files — unless a person waived that gate, and then it is
recorded."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from clavain.errors import ClavainError
from clavain.paths import StatePaths
from clavain.sprint import checkpoint, gates, lifecycle
from clavain.verdicts import files as verdict_files
from clavain.verdicts.resolutions import resolved, unanswered
from tests.unit import sprint_work as work

OPS = st.one_of(
    st.tuples(st.just("done"), st.booleans()),  # (record the current step, do its work first)
    st.tuples(st.just("start"), st.sampled_from(["2", "3"])),
    st.tuples(st.just("verdict"), st.sampled_from(["plan", "quality", "correctness", "goal",
                                                   "architecture", "safety"]),
              st.sampled_from(["CLEAN", "CLEAN", "NEEDS_ATTENTION", "ERROR"])),
    st.tuples(st.just("resolve"), st.integers(0, 3)),
    st.tuples(st.just("edit"), st.integers(0, 2)),
    st.tuples(st.just("resume"), st.integers(0, 8)),
    st.tuples(st.just("abandon"), st.just(None)),
    st.tuples(st.just("waive"), st.just(None)),
)


SHIPPED: list[str] = []  # how many sequences got to ship (the test below reports it)


def _git(project: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@x", *args], cwd=project,
                   check=True, capture_output=True)


def _do_work(state: StatePaths, step: str) -> None:
    """What an honest agent does before recording `step`."""
    if step in ("execute", "test"):
        work.run_graph(state, stop_before=("integrate",))
    elif step == "ship":
        g = work.graph(state)
        try:  # the final gate runs again on the files as they are now
            from clavain.workgraph import edits, nodes

            if (nodes.get_node(g, "final-verify") or {}).get("status") == "done":
                edits.reset(g, "final-verify")
        finally:
            g.conn.close()
        work.run_graph(state)
    elif step in ("plan-review", "quality-gates"):
        work.review(state, step)
    if step in ("resolve", "ship"):
        from clavain.verdicts.resolutions import resolve

        for verdict in unanswered(verdict_files.parse_all(state.verdicts),
                                  resolved(state.verdicts)):
            resolve(state.verdicts, verdict["dispatch"], "fixed", inside=state.root)


def _check_shipped(state: StatePaths, sprint_id: str) -> None:
    """What shipping promises, read from the archive."""
    folder = state.runs / sprint_id
    archived = json.loads((folder / "checkpoint.json").read_text())
    waived = {w["step"] for w in archived["waivers"]}
    assert archived["completed_steps"] == archived["route"]
    if "ship" in waived:
        return  # a person passed the last gate on purpose: recorded, and nothing else promised
    nodes = json.loads((folder / "workgraph.json").read_text())["nodes"]
    assert nodes and all(n["status"] == "done" for n in nodes), nodes
    verdicts = verdict_files.parse_all(folder / "verdicts")
    mine = [v for v in verdicts if v.get("sprint_id") == sprint_id]
    assert not unanswered(mine, resolved(folder / "verdicts"))
    if "quality-gates" not in waived:
        lenses = {v["agent"].removeprefix("clavain:reviewer/") for v in mine}
        assert {*archived["reviewers"], archived["goal_check"]} <= lenses


# Most sequences should get somewhere: a start first, and `done` with its work more likely than
# everything else together.
SEQUENCES = st.tuples(st.sampled_from(["2", "3"]), st.lists(
    st.integers(0, 9).flatmap(
        lambda n: st.just(("done", True)) if n < 7 else OPS), min_size=14,
    max_size=36)).map(
    lambda drawn: [("start", drawn[0]), *drawn[1]])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=SEQUENCES)
@example(ops=[("start", "2"), ("verdict", "correctness", "NEEDS_ATTENTION"),
              *[("done", True)] * 6])
def test_no_sequence_ships_past_a_gate(ops) -> None:
    with tempfile.TemporaryDirectory(prefix="clavain-prop-", ignore_cleanup_errors=True) as folder:
        project = Path(folder)
        _git(project, "init", "-q")
        # The snapshot written in-process: no detached writer outlives the folder.
        (project / ".clavain").mkdir()
        (project / ".clavain" / "config.json").write_text(
            '{"defaults": {"snapshotMaxLagSeconds": 0}}')
        (project / "README").write_text("r\n")
        _git(project, "add", "-A")
        _git(project, "commit", "-qm", "first")
        state = StatePaths(project / ".clavain", project=project)
        old = os.environ.get("CLAVAIN_PROJECT_DIR")
        os.environ["CLAVAIN_PROJECT_DIR"] = str(project)
        try:
            _run(state, ops)
        finally:
            if old is None:
                os.environ.pop("CLAVAIN_PROJECT_DIR", None)
            else:
                os.environ["CLAVAIN_PROJECT_DIR"] = old


def _run(state: StatePaths, ops: list) -> None:
    model: dict | None = None  # the naive model: route and position of the active sprint
    waive_next = False
    for op, *args in ops:
        active = checkpoint.read(state) if state.sprint_checkpoint.exists() else None
        assert (active is None) == (model is None)
        if active is not None:
            assert active["current_step"] == model["route"][model["position"]]
            assert active["completed_steps"] == model["route"][:model["position"]]
        if op == "start":
            if model is None:
                started = lifecycle.start(state, "add a greeting module", complexity=args[0])
                model = {"route": started["route"], "position": 0, "id": started["sprint_id"]}
            else:
                with pytest.raises(ClavainError, match="is active at step"):
                    lifecycle.start(state, "another thing", complexity=args[0])
        elif op == "done" and model is not None:
            step = model["route"][model["position"]]
            if step == "plan":
                work.record_plan(state)
                model["position"] += 1
                continue
            if args[0]:
                _do_work(state, step)
            before = state.sprint_checkpoint.read_bytes()
            g = work.graph(state)
            try:
                refused = gates.problems(g, active, step)
            finally:
                g.conn.close()
            try:
                lifecycle.done(state, step, wait_seconds=0,
                               waive="a person decided" if waive_next else None)
            except ClavainError:
                assert refused and not waive_next
                assert state.sprint_checkpoint.read_bytes() == before
                continue
            assert not refused or waive_next  # passed only through its gate, or waived
            waive_next = False
            model["position"] += 1
            if model["position"] == len(model["route"]):
                _check_shipped(state, model["id"])
                SHIPPED.append(model["id"])
                model = None
        elif op == "verdict" and model is not None:
            work.file_verdict(state, args[0], args[1])
        elif op == "resolve" and model is not None:
            from clavain.verdicts.resolutions import resolve

            left = unanswered(verdict_files.parse_all(state.verdicts), resolved(state.verdicts))
            if left:
                resolve(state.verdicts, left[min(args[0], len(left) - 1)]["dispatch"],
                        "answered by a person", inside=state.root)
        elif op == "edit":
            (state.project / f"file-{args[0]}.txt").write_text(f"edit {args[0]}\n")
        elif op == "resume" and model is not None:
            target = model["route"][min(args[0], len(model["route"]) - 1)]
            if model["route"].index(target) > model["position"]:
                with pytest.raises(ClavainError, match="only goes back"):
                    lifecycle.resume(state, from_step=target)
                continue
            lifecycle.resume(state, from_step=target)
            model["position"] = model["route"].index(target)
        elif op == "abandon" and model is not None:
            lifecycle.abandon(state)
            folder = state.runs / model["id"]
            snapshot = json.loads((folder / "workgraph.json").read_text())
            assert all(n["status"] in ("done", "failed", "cancelled")
                       for n in snapshot["nodes"])
            model = None
        elif op == "waive":
            waive_next = True


def test_the_property_reaches_ship() -> None:
    """The property above would pass vacuously if no sequence ever shipped: the explicit
    example does, and so do some of the generated ones (counted, not asserted: random)."""
    SHIPPED.clear()
    test_no_sequence_ships_past_a_gate()
    assert SHIPPED, "not even the explicit example reached ship"
