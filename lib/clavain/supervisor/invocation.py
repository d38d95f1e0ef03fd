"""The process that does one node: argv, what goes on its stdin, and its time limit.

- `claude`: `claude -p --output-format json --verbose --max-turns N --allowedTools …
  [--model M]`, the node's packet on stdin (`supervisor.claude` in config); in hard mode
  `--settings` gives its session the project's sandbox wherever it runs
  (`sandbox.runner_settings`); with a budget,
  `--max-budget-usd <its share> --session-id <uuid>` (`run_reserve`).
- `shell`: this package's shell runner with the node's own `commands` (no LLM).
- `shellVerify`: `clavain verify ID --json`, which claims under the same run, runs the checks
  and records the result itself.
- a configured runner: its `command`, the packet on stdin, `<result>` expected on stdout.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clavain import config as config_mod
from clavain.claude_bin import find_claude
from clavain.errors import ClavainError
from clavain.supervisor.routes import CLAUDE, SHELL, SHELL_VERIFY, Route
from clavain.workgraph.graphs import Graph
from clavain.workgraph.packets import build_packet
from clavain.workgraph.runner_env import clavain_bin

# Set inside Claude Code; a runner is a session of its own, not a tool call of the person's.
HOST_VARIABLES = ("CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT", "CLAUDE_CODE_SESSION_ID")


def runner_process_env(cfg: dict[str, Any], extra: dict[str, str]) -> dict[str, str]:
    """The environment of any runner process: ours with `extra` over it, less the host's
    session markers, with claude's API retries bounded (its default of ten holds a worker
    ~200 s before a rate limit reaches us; a person's own setting wins)."""
    env = {**os.environ, **extra}
    for name in HOST_VARIABLES:
        env.pop(name, None)
    env.setdefault("CLAUDE_CODE_MAX_RETRIES",
                   str(config_mod.get(cfg, "supervisor.claude.apiRetries", 2)))
    return env


def configured_argv(cfg: dict[str, Any], runner: str) -> tuple[list[str], float]:
    """A configured runner's argv and time limit."""
    configured = config_mod.get(cfg, f"runners.{runner}")
    if not isinstance(configured, dict):
        raise ClavainError(f"unknown runner {runner!r} (configure it under `runners` in "
                           ".clavain/config.json, or use claude)")
    command = configured["command"]
    argv = ["bash", "-c", command] if isinstance(command, str) else [str(c) for c in command]
    return argv, float(configured.get("timeoutSeconds")
                       or config_mod.get(cfg, "supervisor.shellTimeoutSeconds", 1800))


@dataclass(frozen=True)
class Invocation:
    argv: list[str]
    stdin_text: str
    timeout: float


def prompt_argv(cfg: dict[str, Any], runner: str, model: str | None, *, purpose: str,
                max_turns: int | None = None) -> tuple[list[str], float]:
    """argv and time limit of a runner that answers a prompt on stdin (claude, or a configured
    runner) for `purpose` ("a loop", "a microcall"); the command runners are refused."""
    if runner in (SHELL, SHELL_VERIFY):
        raise ClavainError(f"runner {runner!r} runs commands, not prompts; {purpose} needs "
                           "claude or a configured runner")
    if runner == CLAUDE:
        return claude_argv(cfg, model, max_turns=max_turns), float(
            config_mod.get(cfg, "supervisor.claude.timeoutSeconds", 1800))
    return configured_argv(cfg, runner)


def claude_argv(cfg: dict[str, Any], model: str | None, *,
                max_turns: int | None = None) -> list[str]:
    binary = find_claude()
    if binary is None:
        given = os.environ.get("CLAVAIN_CLAUDE_BIN")
        if given:
            raise ClavainError(f"CLAVAIN_CLAUDE_BIN={given} is not an executable file; the "
                               "claude runner needs the `claude` binary there")
        raise ClavainError("the claude runner needs the `claude` binary: install Claude Code, "
                           "or set CLAVAIN_CLAUDE_BIN to its path")
    settings = config_mod.get(cfg, "supervisor.claude")
    # --verbose: the report is every message as one array, and only then does it carry the
    # host's `rate_limit_event` (the subscription's windows, `guards.window`).
    argv = [str(binary), "-p", "--output-format", "json", "--verbose",
            "--max-turns", str(max_turns or settings["maxTurns"]),
            "--allowedTools", " ".join(settings["allowedTools"])]
    if model:
        argv += ["--model", model]
    return argv + [str(arg) for arg in settings["extraArgs"]]


def _packet(g: Graph, cfg: dict[str, Any], node: dict[str, Any],
            packet_mode: str | None) -> str:
    mode = packet_mode or config_mod.get(cfg, "supervisor.packetMode", "thin")
    return build_packet(g, node, thin=mode == "thin")["packet"]


def build(g: Graph, cfg: dict[str, Any], node: dict[str, Any], route: Route, *, run_id: str,
          log_dir: Path, packet_mode: str | None = None, share: Any = None) -> Invocation:
    """`share` (`run_reserve.Share`): what the node's runner may spend; claude is given it as
    the hard limit the host enforces, with the session id its transcript is named by."""
    shell_timeout = float(config_mod.get(cfg, "supervisor.shellTimeoutSeconds", 1800))
    if route.runner == SHELL_VERIFY:
        argv = [clavain_bin(), "verify", node["id"], "--run-id", run_id, "--graph", g.id,
                "--json"]
        commands = len(node.get("verify") or [])
        per_command = float(config_mod.get(cfg, "defaults.verifyTimeoutSeconds", 600))
        return Invocation(argv, "", per_command * max(1, commands) + 30)
    if route.runner == SHELL:
        request = {"commands": list(node.get("commands") or []), "log_dir": str(log_dir),
                   "state_root": str(g.state.root), "timeout": shell_timeout}
        return Invocation([sys.executable, "-m", "clavain.supervisor.shell_runner"],
                          json.dumps(request), shell_timeout * max(1, len(request["commands"])))
    argv, timeout = prompt_argv(cfg, route.runner, route.model, purpose="a node")
    if route.runner == CLAUDE:
        from clavain.sandbox import runner_settings

        confined = runner_settings(g.state.project, g.state.root, f"{run_id}/{node['id']}")
        if confined is not None:
            argv += ["--settings", confined]
        if share is not None:
            argv += ["--max-budget-usd", share.max_budget_arg(), "--session-id",
                     share.session_id]
    return Invocation(argv, _packet(g, cfg, node, packet_mode), timeout)
