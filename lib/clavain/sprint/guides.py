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


# A guide named again in the sprint: the skills folder is in the line that named the first one
# (`sprint start`, `--resume` and the note after a compaction print it whole). An
# installed plugin's folder is ~26 tokens longer than a checkout's, on every step.
SHORT_GUIDE = "{guide}/SKILL.md in the skills folder above"


def next_action(active: dict[str, Any], *, folder_named: bool = False) -> str:
    """The `Next:` line's text; `folder_named`: the conversation already holds a guide's whole
    path (`sprint done` follows the start's line), so this one names its guide's folder only."""
    step = active["current_step"]
    if step is None:
        return "the sprint is complete"
    what, guide = NEXT_ACTIONS[step]
    if step == "quality-gates":
        from clavain.sprint.gates import lenses_for

        what = what.format(lenses=", ".join(lenses_for(active, step)))
    record = f"clavain sprint done {step}" + (" --plan PATH" if step == "plan" else "")
    where = SHORT_GUIDE.format(guide=guide) if folder_named else guide_path(guide or "")
    read = f" (guide: {where})" if guide else ""
    return f"step {step}: {what}{read}; then `{record}`"


def guide_path(guide: str) -> str:
    """Where a step's guide is: read as a file (the guides list no description in every
    session's context; the sprint names the one it needs)."""
    from clavain.paths import plugin_root

    return str(plugin_root() / "skills" / guide / "SKILL.md")
