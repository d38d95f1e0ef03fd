"""A markdown PRD or plan. The rule, in document order:

- The `#` heading is the document's title, not a task. Fenced code is never read as structure.
- Every checkbox item (`- [ ]`, `- [x]`) is a task; `[x]` is origin status `done`, `[ ]` `open`.
- Every `##`…`######` heading is a task, except a heading that only names a part of the
  document (Overview, Background, Goals, Non-goals, Notes, …) and holds no task, no verify and
  no dependency, and except a `Verify`/`Test` heading, which announces its section's verify.
- A task waits for everything inside it: a heading depends on the checkbox items and the
  headings directly under it; a checkbox item on the items indented under it. A heading whose
  items are all done is `done` too; otherwise a heading has no status of its own.
- `depends on: <heading, item or id>[, …]` (a line in the section, or indented under an item)
  adds dependencies; a name matches a task's id, the slug of its title, or its title. A name
  nothing matches is listed in `origin.unresolved`.
- Verify: the commands of a fenced block tagged `verify`, or of a shell (or untagged) block after
  a `Verify`/`Test` heading or label line (until the next heading). A block indented under a
  checkbox item is that item's; any other belongs to the heading it is under.
- Acceptance: a heading's plain list items (not checkboxes), and those indented under an item.
- Ids are the slug of the title (`Add the login form` → `add-the-login-form`), made unique with
  `-2`, `-3` in document order; `origin.source_id` is the id.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from clavain.plans.imports import common

FORMAT = "markdown"
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_CHECKBOX = re.compile(r"^(\s*)[-*+]\s+\[([ xX])\]\s+(.*)$")
_BULLET = re.compile(r"^(\s*)(?:[-*+]|\d+[.)])\s+(.*)$")
_DEPENDS = re.compile(r"(?i)^\s*(?:[-*+]\s+)?(?:\*\*|__)?depends[ _-]on\s*:?\s*(?:\*\*|__)?\s*:?"
                      r"\s*(.+)$")
_DOC_PARTS = frozenset({
    "overview", "background", "context", "summary", "introduction", "motivation", "problem",
    "problem statement", "goals", "non goals", "out of scope", "scope", "references", "notes",
    "open questions", "questions", "risks", "glossary", "appendix", "links", "resources",
    "table of contents", "contents", "changelog", "success metrics", "metrics", "assumptions",
    "constraints", "description", "tldr"})


@dataclass
class _Task:
    title: str
    heading: bool
    level: int = 0  # a heading's level; an item's indent
    status: str | None = None
    verify: list[str] = field(default_factory=list)
    acceptance: list[str] = field(default_factory=list)
    refs: list[str] = field(default_factory=list)
    children: list[_Task] = field(default_factory=list)
    kept: bool = True
    id: str = ""


def parse(text: str, where: str) -> list[dict[str, Any]]:
    tasks = _read(text.splitlines())
    for task in reversed(tasks):  # children before their parent
        task.children = [child for child in task.children if child.kept]
        if task.heading:
            task.kept = bool(task.children or task.verify or task.refs) or \
                " ".join(re.findall(r"[a-z0-9]+", task.title.lower())) not in _DOC_PARTS
            if task.children and all(child.status == "done" for child in task.children):
                task.status = "done"
    kept = [task for task in tasks if task.kept]
    used: set[str] = set()
    for task in kept:
        task.id = common.unique(common.slug(task.title), used)
    by_name: dict[str, str] = {}
    for task in kept:  # ids first, then slugs, then titles: the first task of a name wins
        by_name.setdefault(task.id, task.id)
    for task in kept:
        by_name.setdefault(common.slug(task.title), task.id)
        by_name.setdefault(task.title.strip().lower(), task.id)
    return [_spec(task, by_name) for task in kept]


def _spec(task: _Task, by_name: dict[str, str]) -> dict[str, Any]:
    deps = [child.id for child in task.children]
    more, unresolved = common.resolve(task.refs, _lookup(by_name), task.id)
    deps += [dep for dep in more if dep not in deps]
    return common.spec(task.id, common.title_of(task.title, task.id), fmt=FORMAT,
                       source_id=task.id, depends_on=deps, verify=task.verify,
                       acceptance=task.acceptance, status=task.status, unresolved=unresolved)


def _lookup(by_name: dict[str, str]) -> Callable[[str], str | None]:
    """A reference as written → the task it names (by id, slug or title)."""

    def find(ref: str) -> str | None:
        name = ref.strip().strip("`'\"").strip()
        for key in (name, common.slug(name), name.lower()):
            if key in by_name:
                return by_name[key]
        return None

    return find


def _read(lines: list[str]) -> list[_Task]:
    """Every candidate task in document order, with its children, refs, verify, acceptance."""
    tasks: list[_Task] = []
    headings: list[_Task] = []  # open sections, outermost first
    items: list[_Task] = []  # open checkbox items, outermost first
    under_label = False
    fence: str | None = None
    fence_tag, fence_owner, block = "", None, []
    for line in lines:
        opened = common.FENCE.match(line)
        if fence is not None:
            if opened and opened.group(2).startswith(fence) and not opened.group(3):
                if fence_owner is not None and (fence_tag == "verify" or (
                        under_label and fence_tag in common.SHELL_TAGS)):
                    fence_owner.verify.extend(
                        c for c in common.block_commands(block) if c not in fence_owner.verify)
                fence = None
            else:
                block.append(line)
            continue
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        while items and indent <= items[-1].level and not _CHECKBOX.match(line):
            items.pop()  # a line back at an item's indent ends it
        owner = items[-1] if items else (headings[-1] if headings else None)
        if opened:
            fence, fence_tag, fence_owner, block = (opened.group(2), opened.group(3).lower(),
                                                    owner, [])
            continue
        heading = _HEADING.match(line) if indent < 4 else None
        if heading:
            items.clear()
            if common.VERIFY_LABEL.match(line):
                under_label = True
                continue
            under_label = False
            level = len(heading.group(1))
            while headings and headings[-1].level >= level:
                headings.pop()
            if level == 1:
                headings.clear()
                continue
            task = _Task(heading.group(2), heading=True, level=level)
            if headings:
                headings[-1].children.append(task)
            headings.append(task)
            tasks.append(task)
            continue
        if common.VERIFY_LABEL.match(line):
            under_label = True
            continue
        checkbox = _CHECKBOX.match(line)
        if checkbox:
            while items and items[-1].level >= indent:
                items.pop()
            task = _Task(checkbox.group(3).strip(), heading=False, level=indent,
                         status="done" if checkbox.group(2) in "xX" else "open")
            parent = items[-1] if items else (headings[-1] if headings else None)
            if parent is not None:
                parent.children.append(task)
            items.append(task)
            tasks.append(task)
            continue
        if owner is None:
            continue
        depends = _DEPENDS.match(line)
        if depends:
            owner.refs.extend(ref.strip() for ref in re.split(r"[,;]|\band\b", depends.group(1))
                              if ref.strip())
            continue
        bullet = _BULLET.match(line)
        if bullet and (items or indent == 0):
            owner.acceptance.append(bullet.group(2).strip())
    return tasks
