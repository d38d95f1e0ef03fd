"""Who runs a node: its role (planner, escalation, executor, verifier, …), the runner that does
that role's work and, for `claude`, the model — the role → runner/model mapping of
`.clavain/config.json` → `supervisor.roles`, shown by `clavain run --dry-run`.

Precedence: a verify or final_verify node is always the shell verifier's (only it records their
results); `--runner R` (a person's choice for this run) replaces the runner of the work roles;
else the node's own `runner`; else its role's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from clavain import config as config_mod
from clavain.errors import ClavainError
from clavain.workgraph import escalation
from clavain.workgraph.nodes import runner_names
from clavain.workgraph.packets import role_for

SHELL_VERIFY = "shellVerify"
SHELL = "shell"
CLAUDE = "claude"
# The roles `--runner` replaces: work a model (or a script standing in for one) does.
WORK_ROLES = frozenset({"planner", "escalation", "executor"})
CHECK_ROLES = frozenset({"verifier", "final-verifier"})


@dataclass(frozen=True)
class Route:
    role: str
    runner: str
    model: str | None

    @property
    def llm(self) -> bool:
        """Whether the runner calls a model: `claude`, or a configured runner (which may)."""
        return self.runner not in (SHELL, SHELL_VERIFY)

    def as_dict(self) -> dict[str, Any]:
        return {"role": self.role, "runner": self.runner, "model": self.model, "llm": self.llm}


def role_of(node: dict[str, Any]) -> str:
    """The role that works `node`: an escalation is a plan node with its own (stronger) route."""
    if node["type"] == "plan" and escalation.escalated_node(node["id"]):
        return "escalation"
    return role_for(node["type"])


def role_route(cfg: dict[str, Any], role: str) -> dict[str, Any]:
    route = config_mod.get(cfg, f"supervisor.roles.{role}")
    if not isinstance(route, dict):
        raise ClavainError(f"no route for role {role!r} in supervisor.roles")
    return route


def route_for(cfg: dict[str, Any], node: dict[str, Any], *,
              runner_override: str | None = None) -> Route:
    role = role_of(node)
    if role in CHECK_ROLES:
        return Route(role, SHELL_VERIFY, None)
    configured = role_route(cfg, role)
    runner = (runner_override if runner_override and role in WORK_ROLES
              else node.get("runner") or configured["runner"])
    if runner not in runner_names(cfg):
        raise ClavainError(f"node {node['id']!r}: unknown runner {runner!r} (runners: "
                           f"{', '.join(runner_names(cfg))})")
    if runner == SHELL_VERIFY:
        raise ClavainError(f"node {node['id']!r} ({role}): the shell verifier only checks verify "
                           "nodes; give the role another runner in supervisor.roles")
    return Route(role, runner, configured.get("model") if runner == CLAUDE else None)


def check_override(cfg: dict[str, Any], runner: str | None) -> None:
    """`--runner` must name a runner that can do work."""
    if runner is None:
        return
    if runner not in runner_names(cfg) or runner == SHELL_VERIFY:
        allowed = [r for r in runner_names(cfg) if r != SHELL_VERIFY]
        raise ClavainError(f"unknown work runner {runner!r} (one of: {', '.join(allowed)})")
