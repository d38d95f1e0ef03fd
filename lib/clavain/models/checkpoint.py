"""`.clavain/checkpoint.json`, the active sprint: the source of `schemas/checkpoint.schema.json`
and of the copy the package ships (`clavain/schemas/`), which `clavain.sprint.checkpoint` checks
files against without pydantic (hooks read the checkpoint). Regenerate both with
`python -m clavain.models.checkpoint`; a test fails when they drift.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from clavain.models.schema_text import schema_text

REPO_SCHEMA = Path(__file__).resolve().parents[3] / "schemas" / "checkpoint.schema.json"
PACKAGED_SCHEMA = Path(__file__).resolve().parents[1] / "schemas" / "checkpoint.schema.json"

Step = Literal["brainstorm", "strategy", "plan", "plan-review", "execute", "test",
               "quality-gates", "resolve", "ship"]


class DecidedBy(BaseModel):
    """Who made a person-only decision (`clavain.authority`): where, and when."""

    model_config = ConfigDict(extra="forbid", title="DecidedBy")

    by: Literal["person"] = Field(description="only a person makes these decisions")
    via: str = Field(min_length=1, max_length=40,
                     description="terminal, slash_command (typed in Claude Code), or library")
    terminal: str | None = Field(default=None, max_length=200, description="the terminal")
    user: str | None = Field(default=None, max_length=200, description="the user at it")
    session_id: str | None = Field(default=None, max_length=200,
                                   description="the Claude Code session it was typed in")
    prompt: str | None = Field(default=None, max_length=300, description="what was typed")
    at: str | None = Field(default=None, description="when (UTC)")


class Waiver(BaseModel):
    """A gate a person passed on purpose (`clavain sprint done STEP --waive REASON`)."""

    model_config = ConfigDict(extra="forbid", title="Waiver")

    step: Step
    reason: str = Field(min_length=1, max_length=2000, description="why, in the person's words")
    problems: list[str] = Field(description="what the gate refused when it was waived")
    at: str = Field(min_length=1, description="when (UTC)")
    decided_by: DecidedBy | None = Field(default=None, description="who waived it")


class PersonDecision(BaseModel):
    """A route decision only a person may make: steps skipped, a complexity below the
    classifier's."""

    model_config = ConfigDict(extra="forbid", title="PersonDecision")

    what: str = Field(min_length=1, max_length=300, description="the decision, in words")
    decided_by: DecidedBy


class RoutingDecision(BaseModel):
    """How the sprint's complexity was decided: the classifier's verdict and the cues behind
    it, the score used and whose it was (`clavain report --routing` reads these across sprints
    from `.clavain/logs/routing.jsonl`)."""

    model_config = ConfigDict(extra="forbid", title="RoutingDecision")

    classifier_score: int = Field(ge=1, le=5, description="the classifier's score")
    classifier_label: str = Field(min_length=1, max_length=20)
    classifier_reasons: list[str] = Field(description="the classifier's reasons")
    cues: dict[str, list[str]] = Field(
        description="cue family (research, trivial, complex, danger, moderate, simplicity …) "
                    "-> the words and phrases of the request that matched")
    score: int = Field(ge=1, le=5, description="the score the sprint was routed by")
    decided_by: Literal["classifier", "person", "agent"] = Field(
        description="whose score it is: the classifier's, or a --complexity given by a person "
                    "or by an agent (an agent may only raise it)")
    direction: Literal["raised", "lowered", "same"] | None = Field(
        description="the --complexity against the classifier's; null when none was given")
    steps: int = Field(ge=-4, le=4, description="score minus the classifier's score")


class LintFinding(BaseModel):
    """One finding of plan lint (`clavain.plans.findings.Finding`)."""

    model_config = ConfigDict(extra="forbid", title="LintFinding")

    severity: Literal["error", "warning"]
    code: str = Field(min_length=1, max_length=100, description="the rule, e.g. "
                                                                 "verify_always_passes")
    task: str | None = Field(description="the task it names; null for the plan as a whole")
    message: str = Field(min_length=1, max_length=20_000, description="the line it printed")


class PlanLint(BaseModel):
    """A plan recorded with lint errors because a person accepted them (`clavain sprint done
    plan --accept-lint REASON`)."""

    model_config = ConfigDict(extra="forbid", title="PlanLint")

    accepted: list[LintFinding] = Field(min_length=1,
                                        description="every finding of the plan when accepted")
    reason: str = Field(min_length=1, max_length=2000, description="why, in the person's words")
    decided_by: DecidedBy
    at: str = Field(min_length=1, description="when (UTC)")


class Checkpoint(BaseModel):
    """Where the active sprint stands; rewritten atomically after every step."""

    model_config = ConfigDict(extra="forbid", title="Checkpoint")

    version: Literal[1] = Field(1, description="format version")
    sprint_id: str = Field(min_length=1, max_length=100, description="sprint-<UTC>-<hex>")
    description: str = Field(min_length=1, max_length=20_000,
                             description="the request, as the user typed it")
    complexity: int = Field(ge=1, le=5, description="1 trivial … 5 research")
    complexity_label: str = Field(min_length=1, max_length=20)
    complexity_overridden: bool = Field(description="set by the user, not classified")
    complexity_reasons: list[str] = Field(description="the signals that set it")
    route: list[Step] = Field(min_length=1, description="the steps this sprint runs, in order")
    skipped: dict[str, str] = Field(description="steps not run, and why")
    reviewers: list[str] = Field(description="the clavain:reviewer lenses the quality gates "
                                             "dispatch")
    goal_check: str = Field(min_length=1, description="the lens that checks the change against "
                                                     "the request")
    orchestration_model: str | None = Field(description="model recommended to run the sprint")
    completed_steps: list[Step] = Field(description="done, in order, no duplicates")
    current_step: Step | None = Field(description="the next step to run; null when shipped")
    plan_path: str | None = Field(description="the plan file, once written")
    decisions: list[str] = Field(max_length=5, description="the last five key decisions")
    git_sha: str | None = Field(description="HEAD when the checkpoint was last written")
    started_at: str = Field(min_length=1)
    updated_at: str = Field(min_length=1)
    graph_id: str | None = Field(
        default=None, min_length=1, max_length=100,
        description="the sprint's workgraph (its own id); absent in checkpoints older than "
                    "one graph per sprint, whose work is in the default graph")
    branch: str | None = Field(default=None, max_length=300,
                               description="the git branch when the checkpoint was last "
                                           "written; null when detached or outside git")
    step_started_at: str | None = Field(
        default=None, description="when the current step began (verdicts that count for a "
                                  "review gate are filed after it)")
    waivers: list[Waiver] = Field(default_factory=list,
                                  description="gates a person passed on purpose")
    person_decisions: list[PersonDecision] = Field(
        default_factory=list, description="steps skipped, complexity lowered: by whom, when")
    plan_lint: PlanLint | None = Field(
        default=None, description="the plan's lint findings a person accepted to record it; "
                                  "absent when the plan passed lint")
    routing_decision: RoutingDecision | None = Field(
        default=None, description="the classifier's score, its cues and the score used: whose "
                                  "(absent in checkpoints from before it was recorded)")


def render_schema() -> str:
    return schema_text(Checkpoint, "checkpoint.schema.json")


def write_schemas() -> list[Path]:
    from clavain.fsutil import write_atomic

    text = render_schema()
    for path in (REPO_SCHEMA, PACKAGED_SCHEMA):
        write_atomic(path, text)
    return [REPO_SCHEMA, PACKAGED_SCHEMA]


if __name__ == "__main__":
    for written in write_schemas():
        print(written)
