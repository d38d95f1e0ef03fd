"""Which steps a sprint runs and who reviews it, by complexity.

| complexity | steps | reviewers | orchestration |
| 1–2 | all but brainstorm, strategy, plan-review | quality, correctness | as is |
| 3 | every step | + architecture, safety | as is |
| 4–5 | every step | + performance, user-product | the strongest model |

Reviewers are lenses of the one `clavain:reviewer` agent (the prompt's first line names the
lens). Quality gates always add one goal check (the `goal` lens: the change against the request
and the plan's acceptance criteria): gates that only check tasks miss scope silently cut. The
plan-review step uses the `plan` lens.
"""

from __future__ import annotations

from clavain.errors import ClavainError

STEPS = ("brainstorm", "strategy", "plan", "plan-review", "execute", "test", "quality-gates",
         "resolve", "ship")
# Steps whose `sprint done` is refused until their gate is open (`sprint.gates` checks each);
# the rest are recorded on the agent's word.
GATED_STEPS = ("plan-review", "execute", "test", "quality-gates", "resolve", "ship")
SKIPPED_WHEN_SIMPLE = ("brainstorm", "strategy", "plan-review")
REVIEWER_AGENT = "clavain:reviewer"
REVIEWERS = {
    1: ("quality", "correctness"),
    3: ("quality", "correctness", "architecture", "safety"),
    4: ("quality", "correctness", "architecture", "safety", "performance", "user-product"),
}
GOAL_CHECK = "goal"
PLAN_REVIEW = "plan"
# Every lens the reviewer agent knows (agents/review/reviewer.md).
LENSES = (*REVIEWERS[4], PLAN_REVIEW, GOAL_CHECK)
STRONGEST_MODEL = "opus"


def check_step(step: str) -> str:
    if step not in STEPS:
        raise ClavainError(f"unknown step {step!r}; the steps are: {', '.join(STEPS)}")
    return step


def check_complexity(value: object) -> int:
    try:
        score = int(str(value))
    except ValueError:
        score = 0
    if score < 1 or score > 5 or str(value).strip() != str(score):
        raise ClavainError(f"complexity must be 1, 2, 3, 4 or 5, got {value!r}")
    return score


def plan_route(score: int, *, skip_to: str | None = None) -> dict[str, object]:
    """{"route": steps to run in order, "skipped": {step: why}, "reviewers", "goal_check",
    "orchestration_model"}."""
    skipped: dict[str, str] = {}
    route = []
    start = STEPS.index(check_step(skip_to)) if skip_to else 0
    for index, step in enumerate(STEPS):
        if index < start:
            skipped[step] = f"started at {skip_to}"
        elif score <= 2 and step in SKIPPED_WHEN_SIMPLE:
            skipped[step] = f"complexity {score}"
        else:
            route.append(step)
    tier = 1 if score <= 2 else 3 if score == 3 else 4
    return {"route": route, "skipped": skipped, "reviewers": list(REVIEWERS[tier]),
            "goal_check": GOAL_CHECK,
            "orchestration_model": STRONGEST_MODEL if score >= 4 else None}


def routing_line(score: int, label: str, route: dict[str, object]) -> str:
    """`Complexity 2/5 (simple) — skipping brainstorm, strategy, plan-review`."""
    skipped = list(route["skipped"])  # type: ignore[call-overload]
    what = f"skipping {', '.join(skipped)}" if skipped else "running every step"
    line = f"Complexity {score}/5 ({label}) — {what}"
    if route["orchestration_model"]:
        line += f"; orchestrate with the strongest model ({route['orchestration_model']})"
    return line
