"""What the model reads on a sprint's route: the Next line names the step's guide and, at the
review steps, every lens the gate will ask for; every guide and reference it leads to exists;
the complexity-2 route stays small (benchmarks/sprint_tokens.py counts it in the real host)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from clavain.paths import StatePaths
from clavain.sprint import lifecycle
from clavain.sprint.gates import lenses_for
from clavain.sprint.guides import NEXT_ACTIONS, guide_path, next_action

REPO = Path(__file__).resolve().parents[2]
REFERENCE = re.compile(r"`references/([\w-]+\.md)`")
# The command body and the four guides a complexity-2 sprint reads: 9,429 characters before
# issue 26, 3,221 after (1,932 ctok tokens for the whole route with idle, in the real host).
ROUTE_FILES = ("commands/sprint.md", "skills/writing-plans/SKILL.md",
               "skills/executing-plans/SKILL.md", "skills/verification/SKILL.md",
               "skills/landing-a-change/SKILL.md")
ROUTE_CHARACTERS = 4000


@pytest.mark.parametrize("complexity", [2, 3, 4])
def test_the_review_steps_name_every_lens_their_gate_wants(project: Path,
                                                           complexity: int) -> None:
    state = StatePaths.discover()
    active = lifecycle.start(state, "add a --verbose flag to the export command",
                             complexity=complexity)
    line = next_action({**active, "current_step": "quality-gates"})
    wanted = lenses_for(active, "quality-gates")
    assert len(wanted) == {2: 3, 3: 5, 4: 7}[complexity]
    assert line.startswith("step quality-gates: review the change, one clavain:reviewer per "
                           f"lens: {', '.join(wanted)} (guide: ")
    assert "`Lens: plan`" in next_action({**active, "current_step": "plan-review"})


def test_every_step_names_a_guide_that_exists_or_none() -> None:
    for step, (_, guide) in NEXT_ACTIONS.items():
        line = next_action({"current_step": step, "reviewers": ["quality"], "goal_check": "goal"})
        assert line.startswith(f"step {step}: ") and f"`clavain sprint done {step}" in line
        if guide is None:
            assert "guide:" not in line
        else:
            assert f"(guide: {guide_path(guide)})" in line and Path(guide_path(guide)).is_file()


def test_after_the_first_line_a_guide_is_named_by_its_folder_beside_the_first(
        run_cli, project: Path) -> None:
    """`sprint start` names the plan guide's whole path; `sprint done` names the next guide's
    folder only, which is a sibling of the first's (an installed plugin's path costs ~26
    tokens more per line); `--resume` (a new session) names it whole again."""
    started = run_cli("sprint", "start", "--complexity", "2",
                      "add a --verbose flag to the export command")
    first = re.search(r"\(guide: (/\S+/SKILL\.md)\)", started.stdout)
    assert first and Path(first[1]).is_file()
    (project / "plan.md").write_text(PLAN)
    done = run_cli("sprint", "done", "plan", "--plan", "plan.md")
    named = re.search(r"\(guide: ([\w-]+)/SKILL\.md in the skills folder above\)", done.stdout)
    assert named, done.stdout
    assert (Path(first[1]).parents[1] / named[1] / "SKILL.md").is_file()
    resumed = run_cli("sprint", "start", "--resume").stdout
    assert f"(guide: {guide_path(named[1])})" in resumed


PLAN = """# Plan

```json
{"nodes": [{"id": "task-a", "type": "task", "title": "write a.txt", "verify": ["test -f a.txt"],
            "ownership": ["a.txt"]}]}
```
"""


def test_every_reference_a_skill_names_exists_and_none_is_orphaned() -> None:
    for skill in sorted((REPO / "skills").iterdir()):
        texts = [p.read_text() for p in (skill / "SKILL.md", *skill.glob("references/*.md"))]
        named = {name for text in texts for name in REFERENCE.findall(text)}
        on_disk = {p.name for p in skill.glob("references/*.md")}
        assert named <= on_disk, f"{skill.name} names missing references: {named - on_disk}"
        assert on_disk <= named, f"{skill.name} has references no file names: {on_disk - named}"


def test_the_complexity_2_route_reads_little() -> None:
    size = sum(len((REPO / name).read_text()) for name in ROUTE_FILES)
    assert size <= ROUTE_CHARACTERS, f"{size} characters; run benchmarks/sprint_tokens.py"


def test_big_work_is_one_reference_away_from_each_guide_that_needs_it() -> None:
    """Complexity 3 and more plan more tasks, run them in parallel and escalate: that detail is
    in references/ the guides name, not in what every sprint reads."""
    for guide, reference in (("writing-plans", "task-sizing.md"),
                             ("executing-plans", "big-work.md")):
        text = (REPO / "skills" / guide / "SKILL.md").read_text()
        assert f"Complexity 3 or more: read `references/{reference}` first" in text
    big = (REPO / "skills" / "executing-plans" / "references" / "big-work.md").read_text()
    for topic in ("Parallel tasks", "Escalations", "Running unattended", "Budgets"):
        assert f"**{topic}**" in big
