"""beads' `.beads/issues.jsonl`: one issue object per line (`id`, `title`, `description`,
`status` open/in_progress/blocked/deferred/closed/tombstone, `priority` 0-4, `issue_type`,
`acceptance_criteria`, `dependencies`: [{`issue_id`, `depends_on_id`, `type`}]). Blank lines
are skipped; lines are counted from 1 in errors.

- Issue `bd-a1b2` is node `bd-a1b2` (a character a node id cannot hold becomes `-`);
  `origin.source_id` keeps the id as written. A tombstone (deleted issue) is skipped.
- Dependencies: a `blocks` edge makes `issue_id` depend on `depends_on_id`; a `parent-child`
  edge (`issue_id` the child) makes the parent wait for the child, as an epic waits for its
  issues; `related` and `discovered-from` are not order. An edge to an issue not in the file
  (or deleted) is listed in `origin.unresolved`.
- Acceptance: the lines of `acceptance_criteria`. Verify: none (beads has no such field).
"""

from __future__ import annotations

from typing import Any

from clavain.plans.imports import common
from clavain.textio import BadText, load_json

FORMAT = "beads"
BLOCKING = frozenset({"blocks"})
CONTAINS = frozenset({"parent-child"})
SKIPPED = frozenset({"tombstone"})


def parse(text: str, where: str) -> list[dict[str, Any]]:
    issues: list[dict[str, Any]] = []
    lines: dict[str, int] = {}
    deleted: set[str] = set()
    edges: list[tuple[str, str]] = []  # (waits, for), in file order
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        place = f"line {number}"
        try:
            issue = load_json(line, place)
        except BadText as exc:
            raise common.fail(where, "", str(exc)) from None
        if not isinstance(issue, dict):
            raise common.fail(where, place, "expected an issue object")
        source_id = issue.get("id")
        if source_id is None:
            raise common.fail(where, place, '"id" is missing')
        if not isinstance(source_id, str) or not source_id.strip():
            raise common.fail(where, place, f'"id" must be text, not {source_id!r}')
        for key in ("title", "status", "acceptance_criteria"):
            if issue.get(key) is not None and not isinstance(issue[key], str):
                raise common.fail(where, place, f'"{key}" must be text')
        if common.lower_word(issue.get("status")) in SKIPPED or issue.get("deleted_at"):
            deleted.add(source_id)
            continue
        if source_id in lines:
            raise common.fail(where, place, f"issue {source_id} is already on line "
                                            f"{lines[source_id]}")
        lines[source_id] = number
        edges.extend(_edges(issue, source_id, where, place))
        issues.append(issue)
    nodes = _node_ids(issues, lines, where)
    waits: dict[str, list[str]] = {}
    for waiting, target in edges:
        waits.setdefault(waiting, []).append(target)
    out = []
    for issue in issues:
        source_id = issue["id"]
        deps, unresolved = common.resolve(waits.get(source_id, []), nodes.get, nodes[source_id])
        acceptance = [line.strip().lstrip("-*+ ").strip()
                      for line in (issue.get("acceptance_criteria") or "").splitlines()]
        priority = issue.get("priority")
        out.append(common.spec(
            nodes[source_id], common.title_of(issue.get("title") or "", source_id),
            fmt=FORMAT, source_id=source_id, depends_on=deps, verify=[],
            acceptance=[line for line in acceptance if line],
            status=common.lower_word(issue.get("status")),
            priority=priority if isinstance(priority, (int, str))
            and not isinstance(priority, bool) else None,
            unresolved=unresolved))
    return out


def _edges(issue: dict[str, Any], source_id: str, where: str,
           place: str) -> list[tuple[str, str]]:
    """(the issue that waits, the issue it waits for) for each ordering edge of a line."""
    deps = issue.get("dependencies") or []
    if not isinstance(deps, list):
        raise common.fail(where, place, '"dependencies" must be a list')
    out = []
    for index, dep in enumerate(deps):
        if not isinstance(dep, dict):
            raise common.fail(where, f"{place}: dependencies[{index}]", "expected an object")
        child = dep.get("issue_id", source_id)
        target = dep.get("depends_on_id")
        if not isinstance(target, str) or not isinstance(child, str):
            raise common.fail(where, f"{place}: dependencies[{index}]",
                              '"depends_on_id" is missing')
        kind = dep.get("type", "blocks")
        if kind in BLOCKING:
            out.append((child, target))
        elif kind in CONTAINS:
            out.append((target, child))
    return out


def _node_ids(issues: list[dict[str, Any]], lines: dict[str, int], where: str) -> dict[str, str]:
    """Source id → node id; two ids that become the same node id are an error."""
    nodes: dict[str, str] = {}
    taken: dict[str, str] = {}
    for issue in issues:
        node = common.safe_id(issue["id"])
        if node in taken:
            raise common.fail(where, f"line {lines[issue['id']]}",
                              f"id {issue['id']!r} and {taken[node]!r} are both node {node!r}")
        taken[node] = issue["id"]
        nodes[issue["id"]] = node
    return nodes
