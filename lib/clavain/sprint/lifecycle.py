"""A sprint from start to ship: classify and route the request, keep the checkpoint after every
step, resume after a crash, a compaction or a new day, record the plan in the sprint's own
workgraph, archive the sprint (checkpoint, verdicts, graph) when it ships or is abandoned.

One active sprint per project. Steps are recorded in route order, each only through its gate
(`gates`); a person may pass a gate on purpose with a recorded waiver. Each front door (the CLI,
the slash command, the SessionStart and PreCompact hooks) calls these functions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from clavain import hints
from clavain.authority import refusal
from clavain.clock import now_iso
from clavain.errors import ClavainError
from clavain.paths import StatePaths
from clavain.sprint import checkpoint as store
from clavain.sprint import routing_log
from clavain.sprint.complexity import LABELS, explain
from clavain.sprint.guides import guide_path, next_action
from clavain.sprint.route import STEPS, check_complexity, check_step, plan_route, routing_line


def new_sprint_id() -> str:
    from clavain.sprint.checkpoint import SPRINT_ID_PREFIX
    from clavain.workgraph.runner_env import new_run_id

    return new_run_id(SPRINT_ID_PREFIX)


# A caller that names nobody: `authority.library_caller()` decides (a person's program, unless
# Claude Code runs it). The front doors pass what `clavain.authority` says instead.
LIBRARY_CALLER: Any = object()


def _decider(decided_by: Any) -> dict[str, Any] | None:
    if decided_by is LIBRARY_CALLER:
        from clavain.authority import library_caller

        return library_caller()
    return decided_by


def start(state: StatePaths, description: str, *, complexity: Any = None,
          skip_to: str | None = None, file_count: int = 0,
          decided_by: dict[str, Any] | None = LIBRARY_CALLER) -> dict[str, Any]:
    """Classify, route and checkpoint a new sprint with its own workgraph. Refused while
    another one is active. Verdicts left in `.clavain/verdicts/` from before are archived, so
    the sprint starts with none that are not its own. Skipping steps and a complexity below the
    classifier's are a person's decisions (`decided_by`, recorded in the checkpoint)."""
    text = " ".join(description.split())
    if not text:
        raise ClavainError("a sprint needs a description of the work")
    decided_by = _decider(decided_by)
    if skip_to is not None:
        check_step(skip_to)
        if decided_by is None:
            raise refusal(
                "skipping steps (--skip-to)", in_claude_code="/clavain:sprint --skip-to STEP TASK",
                in_terminal="clavain sprint start --skip-to STEP TASK")
    override = check_complexity(complexity) if complexity is not None else None
    classified = explain(text, file_count)  # classify's result with the cues behind it
    classified_score = int(classified["score"])  # type: ignore[call-overload]
    if override is not None and override < classified_score and decided_by is None:
        raise refusal(
            f"a complexity below the classifier's {classified_score} (--complexity "
            f"{override})", in_claude_code=f"/clavain:sprint --complexity {override} TASK",
            in_terminal=f"clavain sprint start --complexity {override} TASK")
    score = override or classified_score
    if decided_by is None:
        _check_floor(state, score)
    person_decisions = [{"what": what, "decided_by": decided_by} for what in (
        *([f"skipped to step {skip_to}"] if skip_to else []),
        *([f"complexity {override}, below the classifier's {classified_score}"]
          if override is not None and override < classified_score else []))]
    route = plan_route(score, skip_to=skip_to)
    routing = routing_log.decision(classified, override, person=decided_by is not None)
    reasons = ([f"set by the user: {override}"] if override else []) + list(
        classified["reasons"])  # type: ignore[call-overload]
    at = now_iso()

    def begin(active: dict[str, Any] | None) -> dict[str, Any]:
        if active is not None:
            raise ClavainError(f"sprint {active['sprint_id']} ({active['description'][:60]}) is "
                               f"active at step {active['current_step']}; resume with "
                               f"{hints.resume_sprint()}, or start over with `clavain sprint "
                               "abandon`")
        sprint_id = new_sprint_id()
        _open_graph(state, sprint_id, text, at)
        earlier = store.move_verdicts(state, state.runs / f"before-{sprint_id}" / "verdicts")
        return {
            "version": 1, "sprint_id": sprint_id, "description": text,
            "complexity": score, "complexity_label": LABELS[score],
            "complexity_overridden": override is not None, "complexity_reasons": reasons,
            "route": route["route"], "skipped": route["skipped"],
            "reviewers": route["reviewers"], "goal_check": route["goal_check"],
            "orchestration_model": route["orchestration_model"], "completed_steps": [],
            "current_step": route["route"][0], "plan_path": None,
            "decisions": [f"archived {earlier} earlier verdict file(s)"] if earlier else [],
            "git_sha": store.git_head(state.project), "started_at": at, "updated_at": at,
            "graph_id": sprint_id, "branch": store.git_branch(state.project),
            "step_started_at": at, "waivers": [], "person_decisions": person_decisions,
            "routing_decision": routing,
        }

    created = store.change(state, begin)
    assert created is not None
    try:  # after the checkpoint: a start that was refused or failed is not in the log
        routing_log.append(state, created["sprint_id"], at, text, routing)
        unlogged = None
    except OSError as exc:  # the sprint has started; the caller names what was not recorded
        unlogged = f"the routing was not logged in {routing_log.log_path(state)}: {exc}"
    return {**created, "routing": routing_line(score, LABELS[score], route),
            "uncertain": None if override else classified.get("uncertain"),
            **({"routing_log_problem": unlogged} if unlogged else {})}


def _check_floor(state: StatePaths, score: int) -> None:
    """An agent that abandoned a sprint starts the next one at that sprint's complexity or
    above: starting over must not shed the route's reviews."""
    last = store.last_archived(state)
    if last is None:
        return
    ended = last[1]
    floor = ended.get("complexity")
    if ended.get("outcome") != "abandoned" or ended.get("abandoned_by") is not None or \
            type(floor) is not int or score >= floor:
        return
    raise refusal(
        f"starting below complexity {floor} right after the agent abandoned sprint "
            f"{ended.get('sprint_id')} at {floor} (start it with `--complexity {floor}`)",
        in_claude_code=f"/clavain:sprint --complexity {score} TASK",
        in_terminal=f"clavain sprint start --complexity {score} TASK")


def _open_graph(state: StatePaths, sprint_id: str, title: str, at: str) -> None:
    """The new sprint's graph. Called under the checkpoint lock with no sprint active, so any
    sprint graph still active is an orphan (a start that crashed before its checkpoint, a
    damaged checkpoint set aside): it is closed first, its open nodes cancelled."""
    from clavain.project import ensure_state
    from clavain.store.db import transaction
    from clavain.store.graph_db import open_graph_db
    from clavain.workgraph.graphs import ensure

    conn = open_graph_db(ensure_state(state))
    try:
        _close_orphans(conn, state, at)
        with transaction(conn):
            ensure(conn, sprint_id, at=at, kind="sprint", title=title[:200])
    finally:
        conn.close()


def _close_orphans(conn: Any, state: StatePaths, at: str) -> list[str]:
    """Close (as abandoned) every sprint graph still active while no sprint is; returns their
    ids. The caller holds the checkpoint lock."""
    from clavain.store import queries
    from clavain.store.db import transaction
    from clavain.workgraph.export import after_commit
    from clavain.workgraph.graphs import Graph, close

    orphans = [row[0] for row in queries.run(conn, "sprint_lifecycle.active_sprint_graphs")]
    for graph_id in orphans:
        g = Graph(conn, graph_id, state)
        with transaction(conn):
            close(g, "abandoned", at=at, note="its sprint's checkpoint was lost")
        after_commit(g)
    return orphans


def require_active(state: StatePaths) -> dict[str, Any]:
    active = store.read(state)
    if active is None:
        raise ClavainError(f"no active sprint; start one with {hints.start_sprint()}")
    return active


def next_step(route: list[str], completed: list[str]) -> str | None:
    return next((step for step in route if step not in completed), None)


def check_order(active: dict[str, Any], step: str) -> None:
    """Only the current step of the route may be recorded: one line naming it and how to go
    back otherwise."""
    current = active["current_step"]
    if step == current:
        return
    if current is None:
        raise ClavainError(f"every step of sprint {active['sprint_id']} is done")
    if step not in active["route"]:
        why = active["skipped"].get(step, "not on its route")
        raise ClavainError(f"step {step} was skipped for this sprint ({why}); the sprint is at "
                           f"step {current}")
    back = (f"; to redo {step}: `clavain sprint resume --from-step {step}`"
            if step in active["completed_steps"] else "")
    raise ClavainError(f"the sprint is at step {current}, not {step}: steps are recorded in "
                       f"route order ({' → '.join(active['route'])}){back}")


def done(state: StatePaths, step: str, *, plan_path: str | None = None,
         decision: str | None = None, waive: str | None = None,
         progress: Callable[[str], None] | None = None,
         wait_seconds: float | None = None, accept_lint: str | None = None,
         decided_by: dict[str, Any] | None = LIBRARY_CALLER) -> dict[str, Any]:
    """Record `step` as finished: only the current step, only through its gate (or with a
    person's waiver, `decided_by` recorded with it), with the plan it produced (through plan
    lint, or with its findings accepted by a person: `accept_lint`) and a decision; ship
    archives the sprint."""
    from clavain.sprint import gates
    from clavain.sprint.plan import check_accept_lint, with_lint_acceptance

    check_step(step)
    decided_by = _decider(decided_by) if waive is not None or accept_lint is not None else None
    if waive is not None and not waive.strip():
        raise ClavainError("a waiver needs a reason (--waive \"why this gate is passed\")")
    if waive is not None and decided_by is None:
        raise refusal(
            "passing a gate (--waive)", in_claude_code=f"/clavain:sprint --waive {step} REASON",
            in_terminal=f"clavain sprint done {step} --waive REASON")
    if accept_lint is not None:
        check_accept_lint(step, accept_lint, decided_by, plan_path)
    active = require_active(state)
    check_order(active, step)
    if step == "plan":
        plan_path = plan_path or active["plan_path"]
        if not plan_path:
            raise ClavainError("step plan records its plan: `clavain sprint done plan --plan "
                               f"PATH` (format: {guide_path('writing-plans')}); a plan is "
                               "never waived: the steps after it work on its tasks")
    sprint_id = active["sprint_id"]
    conn = _connect(state)
    try:
        g = gates.sprint_graph(conn, state, active)
        from clavain.verdicts.backfill import measure_pending

        measure_pending(state)  # once: the gates below only read
        gates.wait_for_reviews(g, active, step, seconds=wait_seconds, progress=progress)
        with store.locked(state):
            current = store.require_same(store.read(state), sprint_id)
            check_order(current, step)
            recorded, lint = None, {}
            if step == "plan":
                from clavain.sprint.plan import record_plan

                recorded = record_plan(g, plan_path, accepted_by=decided_by
                                       if accept_lint is not None else None)
                lint = {"lint": recorded.pop("lint", [])}  # shown beside the plan's changes
            refused = gates.problems(g, current, step)
            waiver = None
            if refused and waive is None:
                raise ClavainError(f"step {step} is not done: {'; '.join(refused)} (only a "
                                   "person may pass it on purpose: `/clavain:sprint --waive "
                                   f"{step} REASON` in Claude Code, `clavain sprint done "
                                   f"{step} --waive REASON` in a terminal)")
            if refused:
                waiver = {"step": step, "reason": " ".join(waive.split()), "problems": refused,
                          "at": now_iso(), "decided_by": decided_by}
            updated = _advance(state, current, step, plan_path, decision, waiver)
            if recorded is not None:
                updated = with_lint_acceptance(updated, lint["lint"], accept_lint, decided_by,
                                               now_iso())
            archived = budget = None
            if updated["current_step"] is None:
                # Shipped: the graph is closed and the archive written straight from `updated`,
                # never a live checkpoint with no step left (a crash in between would leave a
                # sprint no command could finish); until the archive is written, the live one
                # still says ship, and `done ship` runs again.
                budget = _budget(state, current)
                archived, _ = _close(state, g, updated, "shipped")
            else:
                store.write(state, updated)
    finally:
        conn.close()
    if archived:
        _write_reports(state, updated, archived, budget)
    return {**updated, "plan": recorded, **lint, "waived": waiver, "archived": archived}


def _advance(state: StatePaths, current: dict[str, Any], step: str, plan_path: str | None,
             decision: str | None, waiver: dict[str, Any] | None) -> dict[str, Any]:
    completed = [s for s in STEPS if s in current["completed_steps"] or s == step]
    return {**current, "completed_steps": completed,
            "current_step": next_step(current["route"], completed),
            "plan_path": plan_path if plan_path is not None else current["plan_path"],
            "decisions": store.remember(current["decisions"], decision),
            "git_sha": store.git_head(state.project), "branch": store.git_branch(state.project),
            "step_started_at": now_iso(),
            "waivers": [*current.get("waivers", []), *([waiver] if waiver else [])]}


def _connect(state: StatePaths) -> Any:
    from clavain.project import ensure_state
    from clavain.store.graph_db import open_graph_db

    return open_graph_db(ensure_state(state))


def _close(state: StatePaths, g: Any, active: dict[str, Any],
           outcome: str) -> tuple[str, list[str]]:
    """Close the sprint's graph (its unfinished nodes are cancelled), write its snapshot beside
    the archive, archive the checkpoint. The caller holds the lock. Returns the archive folder
    and the ids cancelled."""
    from clavain.fsutil import real_folder, write_atomic
    from clavain.store.db import transaction
    from clavain.workgraph.export import after_commit, snapshot_text
    from clavain.workgraph.graphs import DEFAULT_GRAPH, close

    cancelled: list[str] = []
    if g.id != DEFAULT_GRAPH:  # a sprint from before one graph per sprint shares the default
        with transaction(g.conn):
            cancelled = close(g, outcome, at=now_iso(), note=f"sprint {outcome}")
        after_commit(g)  # the live snapshot holds active graphs only
    folder = state.runs / active["sprint_id"]
    real_folder(state.root, folder)
    write_atomic(folder / "workgraph.json", snapshot_text(g.conn, g.id), inside=state.root)
    return store.archive_locked(state, active, outcome), cancelled


def _budget(state: StatePaths, active: dict[str, Any]) -> dict[str, Any] | None:
    """The sprint's budget report, taken while it is still active: its limits are those of its
    complexity, which stop applying once it is archived."""
    from clavain.sprint.summary import budget_report

    return budget_report(state, active["sprint_id"])


def _write_reports(state: StatePaths, archived: dict[str, Any], folder: str,
                   budget: dict[str, Any] | None) -> None:
    """The archive's summary.json and report.md (budgets, waivers): written after the lock is
    let go; the sprint is already archived, so a failure here loses no state."""
    from clavain.fsutil import write_atomic, write_json_atomic
    from clavain.sprint.summary import render_report, summarize

    outcome = "shipped" if archived["current_step"] is None else "abandoned"
    summary = summarize(state, {**archived, "outcome": outcome}, budget,
                        verdicts_folder=state.project / folder / "verdicts")
    write_json_atomic(state.project / folder / "summary.json", summary, inside=state.root)
    write_atomic(state.project / folder / "report.md", render_report(summary, budget),
                 inside=state.root)


def abandon(state: StatePaths, *,
            decided_by: dict[str, Any] | None = LIBRARY_CALLER) -> dict[str, Any]:
    """Stop the active sprint: its open nodes are cancelled and archived with it. A damaged
    checkpoint is set aside (`checkpoint.corrupt-<time>.json`), so a new sprint can start. The
    archive records a person's provenance (`decided_by`), or None for an agent: an agent's
    next sprint may not start lower (`_check_floor`)."""
    decided_by = _decider(decided_by)
    with store.locked(state):
        try:
            active = store.read(state)
        except store.DamagedCheckpoint as exc:
            set_aside = store.set_aside(state)
            orphans: list[str] = []
            from clavain.store.graph_db import graph_store_exists

            if graph_store_exists(state):  # the damaged sprint's graph: nothing of it runs any more
                conn = _connect(state)
                try:
                    orphans = _close_orphans(conn, state, now_iso())
                finally:
                    conn.close()
            return {"sprint_id": None, "set_aside": set_aside,
                    "problem": exc.problem,
                    "archived": None, "cancelled": [], "closed_graphs": orphans}
        if active is None:
            raise ClavainError("no active sprint to abandon")
        conn = _connect(state)
        try:
            from clavain.sprint.gates import sprint_graph

            g = sprint_graph(conn, state, active)
            budget = _budget(state, active)
            active = {**active, "abandoned_by": decided_by}
            archived, cancelled = _close(state, g, active, "abandoned")
        finally:
            conn.close()
    _write_reports(state, active, archived, budget)
    return {"sprint_id": active["sprint_id"], "archived": archived, "set_aside": None,
            "problem": None, "cancelled": cancelled, "closed_graphs": [g.id]}


def resume(state: StatePaths, *, from_step: str | None = None) -> dict[str, Any]:
    """Where to continue: the first step not done (or `from_step`, ignoring the checkpoint),
    with what changed in git since the checkpoint and the verdict counts. Without `from_step`
    it only reads (a read-only `.clavain/` works)."""
    from clavain.sprint.git_drift import git_warning
    from clavain.sprint.summary import sprint_verdicts
    from clavain.verdicts.summary import count_by_status

    if from_step is not None:
        check_step(from_step)

        def rewind(active: dict[str, Any] | None) -> dict[str, Any] | None:
            if active is None:
                return None
            if from_step not in active["route"]:
                raise ClavainError(f"step {from_step!r} is not on this sprint's route "
                                   f"({', '.join(active['route'])})")
            position = active["route"].index(from_step)
            current = active["current_step"]
            if current is not None and position > active["route"].index(current):
                raise ClavainError(f"step {from_step} is ahead of the sprint (at step {current}):"
                                   " --from-step only goes back; steps ahead are recorded in "
                                   "order, each through its gate")
            return {**active, "current_step": from_step, "step_started_at": now_iso(),
                    "completed_steps": [s for s in active["completed_steps"]
                                        if s in active["route"][:position]]}

        store.change(state, rewind)
    active = require_active(state)
    step = active["current_step"]
    number = active["route"].index(step) + 1 if step else len(active["route"])
    counts = count_by_status(sprint_verdicts(state, active))
    return {**active, "step_number": number, "git_warning": git_warning(state, active),
            "verdict_counts": counts, "next_action": next_action(active)}
