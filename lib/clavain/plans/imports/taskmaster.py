"""Task Master's `.taskmaster/tasks/tasks.json`: `{"tasks": [...]}`, or tagged
`{"master": {"tasks": [...]}, "<tag>": {...}}` (the `master` tag is read; a file with one other
tag, that tag). A task: `id`, `title`, `description`, `details`, `testStrategy`, `status`
(pending/in-progress/review/done/deferred/cancelled), `priority`, `dependencies` (task ids, or
`"3.1"` for a subtask), `subtasks` (`id`, `title`, `status`, `dependencies`: sibling subtask
ids, or `"3.1"`, `testStrategy`). Tasks are counted from 1 in errors (`tasks[2]` is the second).

- Task 3 is node `tm-3`; its subtask 1 is `tm-3.1`, and `tm-3` depends on its subtasks.
- A cancelled task or subtask is skipped; a dependency on it is listed in `origin.unresolved`.
- `testStrategy` becomes verify only when it is a command (in backticks, or a line starting
  with a known program such as `pytest`, `npm`, `make test`); prose becomes acceptance.
"""

from __future__ import annotations

from typing import Any

from clavain.plans.imports import common
from clavain.textio import load_json

FORMAT = "taskmaster"
SKIPPED = frozenset({"cancelled", "canceled"})


def parse(text: str, where: str) -> list[dict[str, Any]]:
    tasks, place = _tasks(load_json(text, where), where)
    entries: list[tuple[str, dict[str, Any], list[str]]] = []  # (source id, task, its refs)
    skipped: set[str] = set()
    seen: dict[str, str] = {}
    for index, task in enumerate(tasks, start=1):
        here = f"{place}[{index}]"
        tid = _id(task, where, here)
        _check(task, where, here)
        if tid in seen:
            raise common.fail(where, here, f"task {tid} is already {seen[tid]}")
        seen[tid] = here
        subtasks = task.get("subtasks") or []
        if not isinstance(subtasks, list):
            raise common.fail(where, here, '"subtasks" must be a list')
        if _skipped(task):
            skipped.add(tid)
            skipped.update(f"{tid}.{_id(sub, where, f'{here}.subtasks')}" for sub in subtasks
                           if isinstance(sub, dict) and sub.get("id") is not None)
            continue
        kept_subs = []
        for sub_index, sub in enumerate(subtasks, start=1):
            sub_here = f"{here}.subtasks[{sub_index}]"
            sid = f"{tid}.{_id(sub, where, sub_here)}"
            _check(sub, where, sub_here)
            if sid in seen:
                raise common.fail(where, sub_here, f"subtask {sid} is already {seen[sid]}")
            seen[sid] = sub_here
            if _skipped(sub):
                skipped.add(sid)
                continue
            refs = [_ref(dep, tid, where, sub_here) for dep in _deps(sub, where, sub_here)]
            entries.append((sid, sub, refs))
            kept_subs.append(sid)
        refs = [_ref(dep, None, where, here) for dep in _deps(task, where, here)]
        entries.append((tid, task, kept_subs + refs))
    known = {sid: f"tm-{sid}" for sid, _, _ in entries}
    order = {sid: n for n, (sid, _, _) in enumerate(entries)}
    entries.sort(key=lambda e: _document_order(e[0], order))
    return [_spec(sid, task, refs, known) for sid, task, refs in entries]


def _document_order(sid: str, order: dict[str, int]) -> tuple[int, int]:
    """A task before its subtasks, subtasks in file order."""
    parent = sid.split(".")[0]
    return (order[parent], -1 if sid == parent else order[sid])


def _spec(sid: str, task: dict[str, Any], refs: list[str],
          known: dict[str, str]) -> dict[str, Any]:
    deps, unresolved = common.resolve(refs, known.get, known[sid])
    verify, acceptance = _strategy(task.get("testStrategy"))
    priority = task.get("priority")
    return common.spec(
        known[sid], common.title_of(task.get("title") or "", f"task {sid}"), fmt=FORMAT,
        source_id=sid, depends_on=deps, verify=verify, acceptance=acceptance,
        status=common.lower_word(task.get("status")),
        priority=priority if isinstance(priority, (str, int))
        and not isinstance(priority, bool) else None, unresolved=unresolved)


def _strategy(text: Any) -> tuple[list[str], list[str]]:
    """(verify, acceptance) from a testStrategy: every line a command → verify; else prose."""
    if not isinstance(text, str) or not text.strip():
        return [], []
    lines = [line.strip().lstrip("-*+ ").strip() for line in text.strip().splitlines()]
    commands = [common.is_command(line) for line in lines if line]
    if all(commands):
        return [c for c in commands if c], []
    return [], [text.strip()]


def _tasks(data: Any, where: str) -> tuple[list[Any], str]:
    """The task list and how errors name it."""
    if isinstance(data, dict) and "tasks" in data:
        tasks, place = data["tasks"], "tasks"
    elif isinstance(data, dict) and data:
        tags = [tag for tag, value in data.items() if isinstance(value, dict) and "tasks" in value]
        if "master" in tags:
            tag = "master"
        elif len(tags) == 1:
            tag = tags[0]
        elif tags:
            raise common.fail(where, "", f"tags {', '.join(tags)} and no master tag: which "
                                         "one to import is not clear")
        else:
            raise common.fail(where, "", 'no "tasks" list (expected {"tasks": [...]} or '
                                         '{"master": {"tasks": [...]}})')
        tasks, place = data[tag]["tasks"], f"{tag}.tasks"
    else:
        raise common.fail(where, "", 'expected an object with a "tasks" list (Task Master\'s '
                                     'tasks.json)')
    if not isinstance(tasks, list):
        raise common.fail(where, place, "must be a list of tasks")
    return tasks, place


def _id(task: Any, where: str, place: str) -> str:
    if not isinstance(task, dict):
        raise common.fail(where, place, "expected a task object")
    value = task.get("id")
    if value is None:
        raise common.fail(where, place, '"id" is missing')
    if isinstance(value, bool) or not ((isinstance(value, int) and value >= 0) or
                                       (isinstance(value, str) and value.strip().isdigit())):
        raise common.fail(where, place, f'"id" must be a whole number, not {value!r}')
    return str(int(value))


def _check(task: dict[str, Any], where: str, place: str) -> None:
    for key in ("title", "status", "testStrategy"):
        if task.get(key) is not None and not isinstance(task[key], str):
            raise common.fail(where, place, f'"{key}" must be text')


def _deps(task: dict[str, Any], where: str, place: str) -> list[Any]:
    deps = task.get("dependencies") or []
    if not isinstance(deps, list):
        raise common.fail(where, place, '"dependencies" must be a list')
    return deps


def _ref(dep: Any, parent: str | None, where: str, place: str) -> str:
    """A dependency as a source id: `5`, `"5"` (a task; for a subtask, a sibling) or `"3.1"`."""
    text = str(dep).strip() if isinstance(dep, (int, str)) and not isinstance(dep, bool) else ""
    parts = text.split(".")
    if not text or len(parts) > 2 or not all(part.isdigit() for part in parts):
        raise common.fail(where, place, f"dependency {dep!r} is not a task id")
    if len(parts) == 2:
        return f"{int(parts[0])}.{int(parts[1])}"
    return f"{parent}.{int(text)}" if parent is not None else str(int(text))


def _skipped(task: dict[str, Any]) -> bool:
    return common.lower_word(task.get("status")) in SKIPPED
