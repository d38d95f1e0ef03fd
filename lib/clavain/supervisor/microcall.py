"""`clavain microcall`: one runner call with the microcall template (a cheap model by default,
`supervisor.roles.microcall`), the JSON extracted from its reply, optionally stored in KV — for
the small questions a supervisor or a script needs answered (classify this, name that) without a
session of its own.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

from clavain import config as config_mod
from clavain.errors import ClavainError
from clavain.paths import StatePaths
from clavain.supervisor import claude_output
from clavain.supervisor.invocation import prompt_argv, runner_process_env
from clavain.supervisor.process import run_process
from clavain.supervisor.routes import CLAUDE
from clavain.supervisor.run_record import run_dir
from clavain.workgraph.packets import read_template, substitute
from clavain.workgraph.results import extract_result_json
from clavain.workgraph.runner_env import new_run_id

MICROCALL_ROLES = ("microcall", "researcher")


def microcall(state: StatePaths, prompt: str, *, runner: str | None = None,
              role: str = "microcall", store_key: str | None = None,
              store_in_run: bool = False, graph: str | None = None) -> dict[str, Any]:
    if not prompt.strip():
        raise ClavainError("the microcall prompt is empty")
    if role not in MICROCALL_ROLES:
        raise ClavainError(f"a microcall's role is one of {', '.join(MICROCALL_ROLES)}")
    cfg = config_mod.load(state.config)
    route = config_mod.get(cfg, f"supervisor.roles.{role}")
    name = runner or route["runner"]
    model = route.get("model") if name == CLAUDE else None
    text = substitute(read_template("microcall.md"), {"PROMPT": prompt.strip()},
                      source="microcall.md")
    # One turn is the point of a microcall; tools would only spend it.
    argv, timeout = prompt_argv(cfg, name, model, purpose="a microcall", max_turns=1)
    call_id = new_run_id("microcall")
    log_dir = run_dir(state, call_id)
    process = run_process(argv, stdin_text=text, cwd=state.project,
                          env=runner_process_env(cfg, {}),
                          log_dir=log_dir, timeout=timeout, stop=threading.Event())
    started = time.monotonic()
    if process.timed_out:
        raise ClavainError(f"the microcall runner {name} timed out after {timeout:g}s "
                           f"(output: {process.stdout_path})", exit_code=1)
    reply, usage = _reply(name, process)
    _charge(state, usage)
    try:
        value = extract_result_json(reply)
    except ClavainError as exc:
        raise ClavainError(f"the microcall reply holds no JSON: {exc} (output: "
                           f"{process.stdout_path})", exit_code=1) from None
    stored = _store(state, value, store_key, store_in_run, graph) if store_key else None
    return {"runner": name, "model": model, "role": role, "value": value, "stored": stored,
            "seconds": round(process.seconds + time.monotonic() - started, 3),
            "log_dir": str(log_dir), **usage}


def _reply(name: str, process: Any) -> tuple[str, dict[str, Any]]:
    if name != CLAUDE:
        return process.stdout, {"tokens": 0, "cost_usd": 0.0}
    report = claude_output.parse(process.stdout, process.stderr, process.exit_code)
    if report.rate_limit is not None:
        raise ClavainError(f"rate limited: {report.rate_limit.message}", exit_code=1)
    if report.problem:
        raise ClavainError(f"claude: {report.problem}", exit_code=1)
    if report.is_error and report.terminal_reason == "api_error":
        raise ClavainError(f"claude could not use the API: {report.result_text[:300]}",
                           exit_code=1)
    return report.result_text, {"tokens": report.tokens, "cost_usd": report.cost_usd}


def _charge(state: StatePaths, usage: dict[str, Any]) -> None:
    """Inside a supervised run (a runner asked), the call is the run's to pay for."""
    from clavain.guards.counting import SUPERVISED_PREFIX, SUPERVISED_RUN_VARIABLE

    supervised = os.environ.get(SUPERVISED_RUN_VARIABLE, "")
    if not supervised.startswith(SUPERVISED_PREFIX) or not (usage["tokens"] or usage["cost_usd"]):
        return
    from clavain.supervisor.run_budget import RunBudget

    RunBudget(state, supervised.removeprefix(SUPERVISED_PREFIX)).add_usage(
        tokens=usage["tokens"], cost_usd=usage["cost_usd"])


def _store(state: StatePaths, value: Any, key: str, in_run: bool,
           graph: str | None) -> dict[str, Any]:
    from clavain import current_graph
    from clavain.store.graph_db import open_graph_db
    from clavain.workgraph import kv
    from clavain.workgraph.graphs import Graph

    node_id = kv.RUN_NAMESPACE if in_run else os.environ.get("CLAVAIN_NODE_ID")
    if not node_id:
        raise ClavainError("storing a microcall's answer needs a node: run it inside a runner "
                           "($CLAVAIN_NODE_ID) or store it in the run namespace", exit_code=2)
    conn = open_graph_db(state)
    try:
        g = Graph(conn, current_graph.resolve(state, graph), state)
        kv.put(g, node_id, key, json.dumps(value), writer_node=os.environ.get("CLAVAIN_NODE_ID"))
    finally:
        conn.close()
    return {"node_id": node_id, "key": key}
