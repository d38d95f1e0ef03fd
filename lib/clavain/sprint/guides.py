"""What each sprint step does next, and the guide (`skills/<guide>/SKILL.md`) to read for it:
the `Next:` line of `clavain sprint`, the session's recovery and the lifecycle's errors."""

from __future__ import annotations

from typing import Any

# What each step does, and the guide (skills/<guide>/SKILL.md) to read for it. Only the next
# action: what a step needs when it goes wrong is in the refusal of `clavain sprint done`.
NEXT_ACTIONS = {
    "brainstorm": ("explore the request", "brainstorming"),
    "strategy": ("choose the approach", "brainstorming"),
    "plan": ("write the plan", "writing-plans"),
    "plan-review": ("review the plan: one clavain:reviewer, its prompt's first line `Lens: plan`",
                    "verification"),
    "execute": ("run the plan's tasks", "executing-plans"),
    "test": ("run the whole test suite until it passes", "verification"),
    "quality-gates": ("review the change, one clavain:reviewer per lens: {lenses}",
                      "verification"),
    "resolve": ("answer the verdicts that need attention, if any", None),
    "ship": ("land the change", "landing-a-change"),
}


def next_action(active: dict[str, Any]) -> str:
    step = active["current_step"]
    if step is None:
        return "the sprint is complete"
    what, guide = NEXT_ACTIONS[step]
    if step == "quality-gates":
        from clavain.sprint.gates import lenses_for

        what = what.format(lenses=", ".join(lenses_for(active, step)))
    record = f"clavain sprint done {step}" + (" --plan PATH" if step == "plan" else "")
    read = f" (guide: {guide_path(guide)})" if guide else ""
    return f"step {step}: {what}{read}; then `{record}`"


def guide_path(guide: str) -> str:
    """Where a step's guide is: read as a file (the guides list no description in every
    session's context; the sprint names the one it needs)."""
    from clavain.paths import plugin_root

    return str(plugin_root() / "skills" / guide / "SKILL.md")
