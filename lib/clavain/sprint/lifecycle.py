"""A sprint from start to ship: classify and route the request, keep the checkpoint after every
step, resume after a crash, a compaction or a new day, import the plan into the workgraph,
archive the sprint (checkpoint and verdicts) when it ships or is abandoned.

One active sprint per project. Each front door (the CLI, the command markdown through the CLI,
the SessionStart and PreCompact hooks) calls these functions.
"""

from __future__ import annotations

import secrets
from datetime import datetime, timezone
from typing import Any

from clavain.clock import now_iso
from clavain.errors import ClavainError
from clavain.paths import StatePaths
from clavain.sprint import checkpoint as store
from clavain.sprint.complexity import LABELS, classify
from clavain.sprint.route import STEPS, check_complexity, check_step, plan_route, routing_line

RESUME_HINT = "resume with /clavain:sprint --resume, or start over with `clavain sprint abandon`"


def new_sprint_id() -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"sprint-{stamp}-{secrets.token_hex(3)}"


def start(state: StatePaths, description: str, *, complexity: Any = None,
          skip_to: str | None = None, file_count: int = 0) -> dict[str, Any]:
    """Classify, route and checkpoint a new sprint. Refused while another one is active.
    Verdicts left in `.clavain/verdicts/` from before are archived, so the sprint starts with
    none that are not its own."""
    text = " ".join(description.split())
    if not text:
        raise ClavainError("a sprint needs a description of the work")
    if skip_to is not None:
        check_step(skip_to)
    override = check_complexity(complexity) if complexity is not None else None
    classified = classify(text, file_count)
    score = override or int(classified["score"])  # type: ignore[call-overload]
    route = plan_route(score, skip_to=skip_to)
    reasons = ([f"set by the user: {override}"] if override else []) + list(
        classified["reasons"])  # type: ignore[call-overload]
    at = now_iso()

    def begin(active: dict[str, Any] | None) -> dict[str, Any]:
        if active is not None:
            raise ClavainError(f"sprint {active['sprint_id']} ({active['description'][:60]}) is "
                               f"active at step {active['current_step']}; {RESUME_HINT}")
        sprint_id = new_sprint_id()
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
        }

    created = store.change(state, begin)
    assert created is not None
    return {**created, "routing": routing_line(score, LABELS[score], route)}


def require_active(state: StatePaths) -> dict[str, Any]:
    active = store.read(state)
    if active is None:
        raise ClavainError("no active sprint; start one with /clavain:sprint DESCRIPTION")
    return active


def next_step(route: list[str], completed: list[str]) -> str | None:
    return next((step for step in route if step not in completed), None)


def done(state: StatePaths, step: str, *, plan_path: str | None = None,
         decision: str | None = None) -> dict[str, Any]:
    """Record `step` as finished (idempotent), with the plan it produced and a decision; the
    plan step imports the plan's tasks into the workgraph; ship archives the sprint."""
    check_step(step)
    active = require_active(state)
    if step not in active["route"]:
        raise ClavainError(f"step {step!r} is not on this sprint's route "
                           f"({', '.join(active['route'])})")
    imported: list[str] = []
    if plan_path is not None:
        from clavain.sprint.plan import import_plan

        imported = import_plan(state, plan_path)

    def record(active: dict[str, Any] | None) -> dict[str, Any]:
        if active is None or step not in active["route"]:  # abandoned or replaced meanwhile
            raise ClavainError("the sprint changed while this step was recorded; "
                               "`clavain sprint status` shows it")
        completed = [s for s in STEPS if s in active["completed_steps"] or s == step]
        return {**active, "completed_steps": completed,
                "current_step": next_step(active["route"], completed),
                "plan_path": plan_path if plan_path is not None else active["plan_path"],
                "decisions": store.remember(active["decisions"], decision),
                "git_sha": store.git_head(state.project)}

    updated = store.change(state, record)
    assert updated is not None
    report = {**updated, "imported": imported, "archived": None}
    if updated["current_step"] is None and step == "ship":
        report["archived"] = finish(state, updated, outcome="shipped")
    return report


def finish(state: StatePaths, active: dict[str, Any], *, outcome: str) -> str:
    """Archive the sprint with its summary; returns the archive folder."""
    from clavain.fsutil import write_atomic, write_json_atomic
    from clavain.sprint.summary import budget_report, summarize

    report = budget_report(state, active["sprint_id"])  # while the sprint's limits still apply
    summary = summarize(state, active, report)
    folder = store.archive(state, active, outcome)
    write_json_atomic(state.project / folder / "summary.json", summary, inside=state.root)
    if report is not None:
        from clavain.guards.report import render

        write_atomic(state.project / folder / "report.md", render(report), inside=state.root)
    return folder


def abandon(state: StatePaths) -> dict[str, Any]:
    active = require_active(state)
    return {"sprint_id": active["sprint_id"],
            "archived": finish(state, active, outcome="abandoned")}


def resume(state: StatePaths, *, from_step: str | None = None) -> dict[str, Any]:
    """Where to continue: the first step not done (or `from_step`, ignoring the checkpoint),
    with the git warning when HEAD moved and the verdict counts."""
    from clavain.sprint.summary import sprint_verdicts
    from clavain.verdicts.summary import count_by_status

    if from_step is not None:
        check_step(from_step)

    def rewind(active: dict[str, Any] | None) -> dict[str, Any] | None:
        if active is None or from_step is None:
            return None
        if from_step not in active["route"]:
            raise ClavainError(f"step {from_step!r} is not on this sprint's route "
                               f"({', '.join(active['route'])})")
        position = active["route"].index(from_step)
        return {**active, "current_step": from_step,
                "completed_steps": [s for s in active["completed_steps"]
                                    if s in active["route"][:position]]}

    rewound = store.change(state, rewind)
    active = rewound or require_active(state)
    head = store.git_head(state.project)
    warning = None
    if active["git_sha"] and head and head != active["git_sha"]:
        warning = (f"the code changed since the checkpoint (HEAD was {active['git_sha'][:12]}, "
                   f"now {head[:12]}); re-check what the next step builds on")
    step = active["current_step"]
    number = active["route"].index(step) + 1 if step else len(active["route"])
    counts = count_by_status(sprint_verdicts(state, active))
    return {**active, "step_number": number, "git_warning": warning,
            "verdict_counts": counts, "next_action": next_action(active)}


# What each step does, and the guide (skills/<guide>/SKILL.md) to read for it.
NEXT_ACTIONS = {
    "brainstorm": ("explore the request", "brainstorming"),
    "strategy": ("choose the approach", "brainstorming"),
    "plan": ("write the plan", "writing-plans"),
    "plan-review": ("dispatch clavain:reviewer with `Lens: plan` on the plan", "verification"),
    "execute": ("run the plan's tasks", "executing-plans"),
    "test": ("run the whole test suite", "verification"),
    "quality-gates": ("dispatch the review lenses in parallel, then read `clavain verdicts "
                      "summary`", "verification"),
    "resolve": ("fix what the verdicts that need attention found", None),
    "ship": ("land the change", "landing-a-change"),
}


def next_action(active: dict[str, Any]) -> str:
    step = active["current_step"]
    if step is None:
        return "the sprint is complete"
    what, guide = NEXT_ACTIONS[step]
    record = f"clavain sprint done {step}" + (" --plan PATH" if step == "plan" else "")
    read = f" (guide: {guide_path(guide)})" if guide else ""
    return f"step {step}: {what}{read}; then `{record}`"


def guide_path(guide: str) -> str:
    """Where a step's guide is: read as a file (the guides list no description in every
    session's context; the sprint names the one it needs)."""
    from clavain.paths import plugin_root

    return str(plugin_root() / "skills" / guide / "SKILL.md")
