"""GitHub issues as `gh issue list --json number,title,body,labels[,state,url]` writes them: a
JSON array of issue objects. Items are counted from 1 in errors (`item 3` is the third).

- Issue N is node `gh-N`; its title is the title.
- Dependencies, from the body: a line saying `depends on #N`, `blocked by #N`, `requires #N` or
  `Depends-on: #N, #M`, and a task-list item that is an issue reference (`- [ ] #N`: a tracking
  issue waits for its tasks). A reference to an issue not in the file is dropped from
  `dependsOn` and listed in `origin.unresolved` (`#N`); another repository's `owner/repo#N` is
  not a reference here.
- Acceptance: the body's other task-list items, checked or not, as written.
- Verify: the commands of a fenced block tagged `verify`, or of a shell (or untagged) block
  under a `Verify`/`Test` heading or label, up to the next heading.
- Origin: status is the issue's `state` lower-cased (open/closed) when the file has it;
  priority a label such as `P1` or `priority: high`; url the issue's `url`.
"""

from __future__ import annotations

import re
from typing import Any

from clavain.plans.imports import common
from clavain.textio import load_json

FORMAT = "github"
_REF = r"(?<![\w/])#(\d+)\b"
_DEP_LINE = re.compile(r"(?i)\b(?:depends[ _-]on|blocked[ _-]by|requires)\b\s*:?\s*((?:#\d+[\s,;&]*"
                       r"(?:and\s+)?)+)")
_TASK = re.compile(r"^\s*[-*+]\s+\[([ xX])\]\s+(.*)$")
_TASK_REF = re.compile(r"^#(\d+)\b")
_PRIORITY_LABEL = re.compile(r"(?i)^(?:p([0-4])|priority\s*[:/=-]?\s*(\w+))$")


def parse(text: str, where: str) -> list[dict[str, Any]]:
    items = load_json(text, where)
    if not isinstance(items, list):
        raise common.fail(where, "", "expected a JSON array of issues (as `gh issue list "
                                     "--json number,title,body,labels` writes it)")
    issues: list[tuple[int, dict[str, Any]]] = []
    seen: dict[int, int] = {}
    for index, item in enumerate(items, start=1):
        place = f"item {index}"
        if not isinstance(item, dict):
            raise common.fail(where, place, "expected an issue object")
        number = item.get("number")
        if number is None:
            raise common.fail(where, place, '"number" is missing')
        if isinstance(number, bool) or not isinstance(number, int) or number < 1:
            raise common.fail(where, place, f'"number" must be a positive integer, not {number!r}')
        if number in seen:
            raise common.fail(where, place, f"issue #{number} is already item {seen[number]}")
        seen[number] = index
        for key in ("title", "body", "state", "url"):
            if item.get(key) is not None and not isinstance(item[key], str):
                raise common.fail(where, place, f'"{key}" must be text')
        if not isinstance(item.get("labels", []), list):
            raise common.fail(where, place, '"labels" must be a list')
        issues.append((number, item))
    known = {f"#{number}": f"gh-{number}" for number, _ in issues}
    return [_spec(number, item, known) for number, item in issues]


def _spec(number: int, item: dict[str, Any], known: dict[str, str]) -> dict[str, Any]:
    body = (item.get("body") or "").splitlines()
    refs, acceptance = _references(body)
    deps, unresolved = common.resolve(refs, known.get, f"gh-{number}")
    return common.spec(
        f"gh-{number}", common.title_of(item.get("title") or "", f"#{number}"), fmt=FORMAT,
        source_id=str(number), depends_on=deps, verify=verify_commands(body),
        acceptance=acceptance, status=common.lower_word(item.get("state")),
        priority=_priority(item.get("labels") or []), url=item.get("url") or None,
        unresolved=unresolved)


def _references(lines: list[str]) -> tuple[list[str], list[str]]:
    """(`#N` references that are dependencies, task-list lines that are acceptance), outside
    fenced code."""
    refs: list[str] = []
    acceptance: list[str] = []
    fence = None
    for line in lines:
        opened = common.FENCE.match(line)
        if opened:
            fence = None if fence and opened.group(2).startswith(fence) else (
                fence or opened.group(2))
            continue
        if fence:
            continue
        task = _TASK.match(line)
        if task:
            ref = _TASK_REF.match(task.group(2).strip())
            if ref:
                refs.append(f"#{ref.group(1)}")
            elif task.group(2).strip():
                acceptance.append(task.group(2).strip())
            continue
        for found in _DEP_LINE.finditer(line):
            refs.extend(f"#{n}" for n in re.findall(_REF, found.group(1)))
    return refs, acceptance


def verify_commands(lines: list[str]) -> list[str]:
    """The commands of a body's verify blocks (module docstring)."""
    out: list[str] = []
    under_label = False
    fence: str | None = None
    tag = ""
    block: list[str] = []
    for line in lines:
        opened = common.FENCE.match(line)
        if fence is not None:
            if opened and opened.group(2).startswith(fence) and not opened.group(3):
                if tag == "verify" or (under_label and tag in common.SHELL_TAGS):
                    out.extend(c for c in common.block_commands(block) if c not in out)
                fence, block = None, []
            else:
                block.append(line)
            continue
        if opened:
            fence, tag, block = opened.group(2), opened.group(3).lower(), []
        elif common.VERIFY_LABEL.match(line):
            under_label = True
        elif line.lstrip().startswith("#"):
            under_label = False
    return out


def _priority(labels: list[Any]) -> str | None:
    for label in labels:
        name = label.get("name") if isinstance(label, dict) else label
        found = _PRIORITY_LABEL.match(name.strip()) if isinstance(name, str) else None
        if found:
            return f"P{found.group(1)}" if found.group(1) else found.group(2).lower()
    return None
