"""Plan lint: what a plan shows on paper that would fail at execute or at merge, found before it
is recorded. One checker for every front door (`clavain plan lint`, `sprint done plan`,
`graph import`, a planner's result applied).

INTERFACE (fixed; the checker fills it in):
- `Finding`: one problem, naming the task.
- `lint_specs(specs, project=..., config=..., known_ids=...)` -> list[Finding]
- `judge(findings, accepted_by=...)` refuses a plan with errors (`PlanRefused`) unless a person
  accepted them; returns the findings to print (warnings, or every finding when accepted).

The rules: errors here (a verify that always passes or whose program is not found, see
`verify_check`; an unknown dependency, a cycle, a missing verify when `plans.requireVerify`),
warnings in `ownership_check` (ownership owning nothing, unordered overlap, an outsized task)
and here (more tasks than `plans.maxTasks`). The project's files are walked once per call.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from clavain.errors import ClavainError
from clavain.plans.findings import ERROR, WARNING, Finding
from clavain.workgraph.cycles import cycle_members

CYCLE_NAMES = 10  # a cycle's message names this many of its nodes


def lint_specs(specs: list[dict[str, Any]], *, project: Path, config: dict[str, Any],
               known_ids: Iterable[str] = ()) -> list[Finding]:
    """Every finding for `specs` (node specs as in schemas/node.schema.json: id, type, title,
    dependsOn, verify, ownership ...); `known_ids` are nodes already in the graph a spec may
    depend on. Never raises on odd input: a bad shape is the schema's business."""
    from clavain.plans.ownership_check import Literals, ownership_findings
    from clavain.plans.project_files import ProjectFiles
    from clavain.plans.verify_check import ProgramFinder

    nodes = [spec for spec in specs if isinstance(spec, dict) and isinstance(spec.get("id"), str)]
    depends = {node["id"]: _strings(node.get("dependsOn")) for node in nodes}
    tasks = [node for node in nodes if node.get("type", "task") == "task"]
    ownership = {task["id"]: _strings(task.get("ownership")) for task in tasks}
    files = ProjectFiles.of(project)
    literals = Literals(ownership)
    finder = ProgramFinder(project, lambda path: literals.names_above(_normalised(path)))
    require = bool(_setting(config, "requireVerify", False))
    errors: list[Finding] = []
    seen: dict[str, tuple[bool, list[str]]] = {}  # command -> what it is (plans repeat them)
    for task in tasks:
        errors += _verify_findings(task["id"], task.get("verify"), finder, require, seen)
    errors += _dependency_findings(depends, set(known_ids))
    warnings = ownership_findings(ownership, depends, files, literals)
    limit = _setting(config, "maxTasks", None)
    if isinstance(limit, int) and not isinstance(limit, bool) and len(tasks) > limit:
        warnings.append(Finding(WARNING, "too_many_tasks", None,
                                f"the plan has {len(tasks)} tasks, more than plans.maxTasks "
                                f"({limit}): fewer, larger tasks, or raise the setting"))
    return errors + warnings


def _strings(value: Any) -> list[str]:
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


def _normalised(path: str) -> str:
    from clavain.workgraph.ownership import normalise

    return normalise(path)


def _setting(config: dict[str, Any], key: str, default: Any) -> Any:
    plans = config.get("plans") if isinstance(config, dict) else None
    return plans.get(key, default) if isinstance(plans, dict) else default


def _verify_findings(task: str, verify: Any, finder: Any, require: bool,
                     seen: dict[str, tuple[bool, list[str]]]) -> list[Finding]:
    from clavain.plans.verify_check import always_passes, programs

    commands = _strings(verify)
    if not commands:
        if require:
            return [Finding(ERROR, "verify_missing", task,
                            f"{task}: has no verify command (plans.requireVerify is on): give "
                            "it a shell command that fails before the task and passes after")]
        return []
    found = []
    for command in commands:
        if command not in seen:
            passes = always_passes(command)
            seen[command] = (passes, [] if passes else programs(command))
        passes, runs = seen[command]
        if passes:
            found.append(Finding(ERROR, "verify_always_passes", task,
                                 f"{task}: verify {command!r} always passes: it checks "
                                 "nothing; use a command that fails until the task is done"))
            continue
        for program in runs:
            if not finder.exists(program):
                found.append(Finding(ERROR, "verify_program_missing", task,
                                     f"{task}: verify {command!r} runs {program!r}, which is "
                                     "not on PATH, in the project's venv nor in the "
                                     "repository"))
    return found


def _dependency_findings(depends: dict[str, list[str]], known: set[str]) -> list[Finding]:
    found = []
    for node, deps in depends.items():
        for dep in dict.fromkeys(deps):
            if dep not in depends and dep not in known:
                found.append(Finding(ERROR, "unknown_dependency", node,
                                     f"{node}: depends on {dep!r}, which is neither in the "
                                     "plan nor in the graph"))
    for cycle in cycle_members(depends):
        names = ", ".join(cycle[:CYCLE_NAMES]) + (
            f" and {len(cycle) - CYCLE_NAMES} more" if len(cycle) > CYCLE_NAMES else "")
        found.append(Finding(ERROR, "dependency_cycle", cycle[0],
                             f"{cycle[0]}: is in a dependency cycle ({names}): none of them "
                             "can ever start; drop one dependsOn"))
    return found


def plan_nodes(text: str, where: str) -> list[dict[str, Any]]:
    """The node specs of a plan file: a sprint plan's Markdown (its one ```json block with
    `"nodes"`) or a graph import's JSON (`{"nodes": [...]}`). Only the shape lint needs is
    checked (a list of objects): lint reports what is wrong with the nodes, it does not refuse
    them the way `sprint done plan` does."""
    from clavain.plans.nodes_block import nodes_blocks
    from clavain.textio import BadText, load_json

    if text.lstrip().startswith("{"):
        block, what = text, where
    else:
        blocks = nodes_blocks(text)
        if len(blocks) != 1:
            raise ClavainError(f"{where}: neither JSON nor a plan with exactly one ```json block "
                               f'holding {{"nodes": [...]}} (found {len(blocks)})')
        block, what = blocks[0], f"{where} (the nodes block)"
    try:
        document = load_json(block, what)
    except BadText as exc:
        raise ClavainError(str(exc)) from None
    nodes = document.get("nodes") if isinstance(document, dict) else None
    if not isinstance(nodes, list) or not all(isinstance(node, dict) for node in nodes):
        raise ClavainError(f'{what}: expected {{"nodes": [...]}}, a list of node objects')
    return nodes


def lint_plan_text(text: str, where: str, *, project: Path,
                   config: dict[str, Any]) -> list[Finding]:
    """`clavain plan lint`: the findings of a plan file's text (errors first)."""
    return lint_specs(plan_nodes(text, where), project=project, config=config)
