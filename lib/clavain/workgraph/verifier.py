"""The shell verifier: run a verify node's commands without an LLM and turn the outcome into a
runner result (`{"status", "summary", "errors"}`), so verification costs no model call.

Commands run one after another with `bash -c` in the project root, each in its own process group
with a timeout; the first failure stops the rest (later commands usually build on earlier ones).
Each command's output goes to `.clavain/runs/<run-id>/<node>/cmd-N.log`, the result to
`result.json` beside them.

Recording the outcome makes the verifier a runner like any other: it claims the node under the
one run-id rule (explicit, else $CLAVAIN_RUN_ID, else a new id; never the current holder's),
which requires the node's dependencies to be done, and holds the lock with its own pid, so a
verifier that dies is given back as a crash (`stale`); it renews that lease while a long
command runs. SIGTERM or SIGINT kills the running command's whole process group and gives the claim
back unspent (`shell.SignalGuard`).

Test commands count against the current budget run's `maxTestRuns` (`TestRunBudget`): each one
is counted, through `guards.budget.check` like a Bash call's test runs, just before it runs;
one the budget denies is not run (nor anything after it), and the verify fails with the
denial as its reason. Spending attempts on a budget that stays spent would only march the node
to `failed` and an escalation, so a node whose last verify the budget already refused waits
for a person instead (`checkpoint`: needs_human, the denial as the question).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

from clavain import config as config_mod
from clavain.errors import ClavainError
from clavain.fsutil import write_json_atomic
from clavain.paths import safe_path_part
from clavain.store.db import connect
from clavain.store.graph_db import is_shared
from clavain.workgraph import claims, kv
from clavain.workgraph.export import after_commit
from clavain.workgraph.graphs import Graph
from clavain.workgraph.nodes import require_node
from clavain.workgraph.results import apply_result, check_applicable
from clavain.workgraph.runner_env import current_run_id, fence_from_env, runner_env
from clavain.workgraph.shell import CommandOutcome, Interrupted, SignalGuard, run_commands

# Node types whose outcome a shell verification may decide; a task's own `verify` list can be
# checked with apply=False, but passing it must not mark the task done without executing it.
VERIFY_TYPES = frozenset({"verify", "final_verify"})
TAIL_LINES = 12
TAIL_CHARS = 1500
COMMAND_CHARS = 2000  # of a command quoted in the result (its log holds all of it)
# The budget's refusal of the node's last verify ("" once a verify ran unrefused): a second
# refusal in a row asks a person instead of spending another attempt.
BUDGET_KEY = "err.budget"


def log_tail(path: Path) -> str:
    with path.open("rb") as handle:
        handle.seek(0, os.SEEK_END)
        handle.seek(max(0, handle.tell() - 8 * TAIL_CHARS))
        text = handle.read().decode("utf-8", errors="replace")
    return "\n".join(text.strip().splitlines()[-TAIL_LINES:])[-TAIL_CHARS:]


def _clip(command: str) -> str:
    return command if len(command) <= COMMAND_CHARS else command[:COMMAND_CHARS - 1] + "…"


def verdict(commands: list[str], outcomes: list[CommandOutcome],
            timeout: float, refused: str | None = None) -> dict[str, Any]:
    """The runner result for a set of outcomes; `refused` is the budget's reason for not
    running the command after them."""
    if not commands:
        return {"status": "fail", "summary": "verify node has no commands to run",
                "errors": ["no verify commands: give the node a `verify` list"]}
    failed = next((o for o in outcomes if not o.passed), None)
    if failed is None and refused is not None:
        index = len(outcomes) + 1
        shown = _clip(commands[index - 1])
        return {"status": "fail",
                "summary": f"verify command {index} of {len(commands)} not run: {refused}",
                "errors": [f"`{shown}` not run: {refused}"]}
    if failed is None:
        return {"status": "success", "summary": f"all {len(commands)} verify commands passed",
                "errors": []}
    how = (f"timed out after {timeout:g}s" if failed.timed_out
           else f"exited {failed.exit_code}")
    shown = _clip(failed.command)  # the result's summary has a length limit
    summary = f"verify command {failed.index} of {len(commands)} {how}: {shown}"
    error = f"`{shown}` {how} (log: {failed.log_path})"
    tail = log_tail(failed.log_path)
    return {"status": "fail", "summary": summary,
            "errors": [f"{error}\n{tail}" if tail else error]}


def result_line(result: dict[str, Any]) -> str:
    """The `<result>…</result>` line a runner prints, on one line."""
    return f"<result>{json.dumps(result, separators=(',', ':'))}</result>"


class TestRunBudget:
    """The current budget run's test-run count for the commands a verify runs. The run is the
    hook's (`guards.counting`): the host session, else the active sprint, with the budget
    variables as Claude Code gave them to the command (`authority.host_environment`: an emptied
    or raised variable in front of `clavain verify` changes nothing); with neither (a person's
    terminal), or budgets disabled, nothing is counted.
    `allows` is `run_commands`' `before`: a command that runs tests is counted (as
    tool `verify`, kind `verify`: test runs only, no Bash command or loop guard, since the
    `clavain verify` call itself was counted as one) or refused; anything else just runs."""

    def __init__(self, g: Graph) -> None:
        from clavain.authority import host_environment
        from clavain.guards.counting import SUPERVISED_PREFIX, run_context

        # Budgets are this machine's, in the project's SQLite file, wherever the graph is: the
        # graph's own connection is that file unless the graph is on a shared server.
        self.local = None if is_shared(g.conn) else g.conn
        self.db_path = g.state.db
        self.config_path = str(g.state.config)
        # What the host set (the session, budget variables, a headless run's id), not what
        # the command line in front of `clavain verify` changed.
        env = host_environment()
        self.session = env.get("CLAUDE_CODE_SESSION_ID") or None
        context = run_context(str(g.state.root), self.session, env=env)
        counting = context["limits"]["enabled"] and (self.session is not None or
                                                     context["run_key"].startswith(
                                                         ("sprint:", SUPERVISED_PREFIX)))
        self.context: dict[str, Any] | None = context if counting else None
        self.counted = 0
        self.warnings: list[str] = []
        self.denied: str | None = None

    def allows(self, command: str) -> bool:
        from clavain.guards import budget

        if self.context is None:
            return True
        call = budget.describe("Bash", {"command": command}, self.context["patterns"],
                               self.config_path)
        if not call["tests"]:
            return True
        conn = self.local or connect(self.db_path)
        try:
            decided = budget.check(conn, run_key=self.context["run_key"],
                                   session_id=self.session,
                                   sprint_id=self.context["sprint_id"],
                                   call={**call, "tool": "verify", "kind": "verify"},
                                   limits=self.context["limits"],
                                   problems=self.context["problems"])
        finally:
            if conn is not self.local:
                conn.close()
        if decided["decision"] == "deny":
            self.denied = decided["reason"]
            return False
        self.counted += call["tests"]
        if decided["reason"]:
            self.warnings.append(decided["reason"])
        return True

    def as_dict(self) -> dict[str, Any]:
        return {"run": self.context["run_key"] if self.context else None,
                "test_runs_counted": self.counted, "warnings": self.warnings,
                "denied": self.denied}


def _ask_a_person(g: Graph, node_id: str, result: dict[str, Any]) -> dict[str, Any]:
    """A refusal right after a refusal: the budget is still spent, so the node waits for a
    person (who raises the budget) instead of spending its attempts on it."""
    mark = kv.get(g, node_id, BUDGET_KEY)
    if mark is None or not mark["value"]:
        return result
    question = (f"{result['summary']} Raise the budget (`.clavain/config.json` → `budgets`) or "
                "run `clavain budget reset` in a terminal, then answer "
                f"(`clavain graph answer {node_id} --answer TEXT`) to verify again.")
    return {**result, "status": "checkpoint", "question": question}


def _timeout_for(cfg: dict[str, Any], timeout: float | None) -> float:
    if timeout is None:
        timeout = float(config_mod.get(cfg, "defaults.verifyTimeoutSeconds", 600))
    if not timeout > 0:  # also NaN, which would make the wait endless
        raise ClavainError(f"timeout must be a positive number of seconds, got {timeout:g}")
    return timeout


def _claim_for_verify(g: Graph, node: dict[str, Any], run_id: str,
                      fence: int | None) -> None:
    """Hold the node for this run like any runner: refused unless it may take a result. With
    `fence` (a supervisor claimed it for this verify) the claim must be that one: never a new
    claim, whose generation would fence out the supervisor's own bookkeeping."""
    node_id = node["id"]
    if node["type"] not in VERIFY_TYPES:
        raise ClavainError(
            f"node {node_id!r} is a {node['type']} node; the shell verifier decides only verify "
            "and final_verify nodes (run its commands without recording instead)")
    check_applicable(g, node, run_id, fence)
    if fence is not None:
        return
    if node["lock_run_id"] == run_id:
        return  # already claimed by this run (`graph next --claim`, then `verify`)
    if claims.claim_node(g, node_id, run_id=run_id, pid=os.getpid()) is None:
        current = require_node(g, node_id)
        check_applicable(g, current, run_id)  # explains a race lost since the check
        until = current["blocked_until"]
        raise ClavainError(f"node {node_id!r} cannot be claimed now"
                           + (f" (retry backoff until {until})" if until else ""))


def _give_back(g: Graph, node_id: str, run_id: str, why: str, fence: int | None) -> None:
    """Release this run's claim without spending an attempt (a person stopped it)."""
    claims.give_back(g, claims.Claim(g.id, node_id, run_id, fence, None), why=f"verifier {why}")


def run_verify(g: Graph, node_id: str, *, apply: bool = True, timeout: float | None = None,
               run_id: str | None = None) -> dict[str, Any]:
    """Run `node_id`'s verify commands, write the logs and `result.json`, and (with `apply`)
    claim the node first and record the result as a runner's result would be. A signal stops
    it with `Interrupted`: during a command, the claim goes back unspent; while the result is
    recorded, it is recorded first."""
    with SignalGuard() as guard:
        report = _run_verify(g, node_id, guard, apply=apply, timeout=timeout, run_id=run_id)
    if guard.pending is not None:
        raise Interrupted(guard.pending, recorded=report["applied"])
    return report


def _run_verify(g: Graph, node_id: str, guard: SignalGuard, *, apply: bool,
                timeout: float | None, run_id: str | None) -> dict[str, Any]:
    from clavain.tree import fingerprint

    state = g.state
    node = require_node(g, node_id)
    commands = [str(c) for c in node.get("verify") or []]
    cfg = config_mod.load(state.config)
    per_command = _timeout_for(cfg, timeout)
    run_id = current_run_id(run_id, prefix="verify")
    run_dir = state.runs / safe_path_part(run_id) / safe_path_part(node_id)
    env = {**os.environ, **runner_env(state, node, run_id, g.id)}
    if commands and shutil.which("bash", path=env.get("PATH", os.defpath)) is None:
        # Not a failed check: recording one would spend an attempt on a broken environment.
        raise ClavainError("bash is not on PATH; the shell verifier runs each command with "
                           "`bash -c`")
    renew = None
    lease = claims.lease_of(cfg)
    fence = fence_from_env(node_id)  # a supervisor's claim, handed to this verify
    if apply:
        _claim_for_verify(g, node, run_id, fence)
        after_commit(g, cfg)

        def renew() -> None:  # a long verify is alive: its claim must not look stale
            with contextlib.suppress(Exception):  # a store briefly away costs one renewal
                claims.renew(g, node_id, run_id=run_id, snapshot=True, fence=fence)
    # The tree the commands ran on, and the one they left: a sprint ships only when the final
    # gate ran on the tree as it is now.
    tree_before = fingerprint(state.project, state_root=state.root)
    try:
        budget = TestRunBudget(g)
        guard.allow()
        outcomes = run_commands(commands, cwd=state.project, log_dir=run_dir,
                                timeout=per_command, env=env, state_root=state.root,
                                guard=guard, renew=renew, renew_every=max(1.0, lease / 3),
                                before=budget.allows)
        guard.hold()
    except BaseException as exc:
        guard.hold()
        if apply:
            _give_back(g, node_id, run_id, str(exc) if isinstance(exc, Interrupted)
                       else f"stopped by {type(exc).__name__}", fence)
            after_commit(g, cfg)
        raise
    tree_after = fingerprint(state.project, state_root=state.root)
    result = verdict(commands, outcomes, per_command, budget.denied)
    if apply and budget.denied is not None:
        result = _ask_a_person(g, node_id, result)
    result_path = run_dir / "result.json"
    write_json_atomic(result_path, result, inside=state.root)
    # The log worth reading first: the failing command's, else the last one's.
    failed = next((o for o in outcomes if not o.passed), None)
    shown = failed or (outcomes[-1] if outcomes else None)
    log = str(shown.log_path) if shown else None
    # out.verified_run: the gates accept a verify node as passed only when the run that made it
    # done is this one (a hand-made `done` has none).
    extra = {key: value for key, value in (("out.tree", tree_after),
                                           ("out.tree_before", tree_before),
                                           ("out.verified_run", run_id)) if value}
    if budget.denied is not None:
        extra[BUDGET_KEY] = budget.denied
    elif apply and (kv.get(g, node_id, BUDGET_KEY) or {}).get("value"):
        extra[BUDGET_KEY] = ""  # this verify ran: a later refusal is a first one again
    report: dict[str, Any] = {
        "node_id": node_id, "graph_id": g.id, "run_id": run_id, "result": result,
        "commands": [o.as_dict() for o in outcomes], "result_path": str(result_path),
        "tree": tree_after, "tree_before": tree_before, "applied": False,
        "budget": budget.as_dict(),
    }
    if apply:
        report["apply"] = apply_result(g, node_id, result, run_id=run_id, stdout_path=log,
                                       result_path=str(result_path), extra_kv=extra,
                                       by_verifier=True, fence=fence)
        report["applied"] = True
    return report
