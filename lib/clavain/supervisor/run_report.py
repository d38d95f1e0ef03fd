"""`clavain report --run RUN` for a supervised run: its budgets (the budget run `run:<id>`, which
its runners' tool calls and its measured usage fill) with its metrics beside them."""

from __future__ import annotations

import signal
from typing import Any

from clavain.errors import ClavainError
from clavain.guards.counting import SUPERVISED_PREFIX, run_context
from clavain.guards.report import empty, project_report
from clavain.paths import StatePaths
from clavain.supervisor.metrics import METRICS_NAME, load
from clavain.supervisor.run_record import run_dir
from clavain.workgraph.statuses import SETTLED, NodeStatus

# How a run ended → the command's exit code.
EXIT_CODES = {"complete": 0, "stopped_at_limit": 0, "blocked": 1, "budget": 3,
              "window_limit": 7, "interrupted": 130}


def report_for(state: StatePaths, run: str | None, *,
               session_id: str | None = None) -> dict[str, Any]:
    """`_report_for`, with the run's reservations beside its budgets (`reservations`: spent,
    reserved — count, dollars, tokens, of which charged — and headroom; `run_reserve.status`)."""
    report = _report_for(state, run, session_id=session_id)
    if report.get("run") and state.db.is_file():
        from clavain.supervisor.run_reserve import status

        caps = {b["budget"]: b["limit"] for b in report.get("budgets") or []}
        limits = {"enabled": True, "maxTokens": caps.get("Tokens"),
                  "maxCostUsd": caps.get("Dollars")}
        if limits["maxTokens"] is None or limits["maxCostUsd"] is None:
            limits["enabled"] = False
        try:
            report["reservations"] = status(state, str(report["run"]), limits)
        except Exception as exc:  # the meter is out of reach: said beside the budgets
            report.setdefault("problems", []).append(
                f"the run's reservations could not be read: {type(exc).__name__}: {exc}")
    return report


def _sprint_known(state: StatePaths, sprint_id: str) -> bool:
    """The active sprint, or one that ended with its checkpoint kept in `runs/`."""
    from clavain.sprint.checkpoint import DamagedCheckpoint, read_in

    try:
        active = read_in(state.root)
    except DamagedCheckpoint:
        active = None
    return (active or {}).get("sprint_id") == sprint_id or \
        (run_dir(state, sprint_id) / "checkpoint.json").is_file()


def _report_for(state: StatePaths, run: str | None, *,
                session_id: str | None = None) -> dict[str, Any]:
    """The budget report of `run` (else `session_id`'s current run); for a `clavain run` id also
    its metrics, for a `clavain loop` run id its summary (a run whose runners made no counted
    call still has them, and its limits). Both count under the budget run `run:<id>`."""
    from clavain.supervisor.run_record import RECORD_NAME

    bare = run[len(SUPERVISED_PREFIX):] if run and run.startswith(SUPERVISED_PREFIX) else run
    metrics = load(run_dir(state, bare) / METRICS_NAME) if bare else None
    # A run whose first runner has not ended has its record, no metrics yet.
    started = bool(bare) and (run_dir(state, bare) / RECORD_NAME).is_file()
    loop = _loop_summary(state, bare) if bare and metrics is None and not started else None
    if metrics is None and loop is None and not started:
        if run and run.startswith("sprint:") and _sprint_known(state, run[len("sprint:"):]):
            try:
                return project_report(state, run, session_id=session_id)
            except ClavainError:  # a sprint whose session counted nothing yet: its limits
                context = run_context(str(state.root), None)
                return {**empty(run, context["limits"]), "problems": context["problems"]}
        return project_report(state, run, session_id=session_id)
    key = SUPERVISED_PREFIX + bare
    try:
        report = project_report(state, key, measure_now=False)
    except ClavainError:  # nothing counted for this run: its limits, unused
        context = run_context(str(state.root), None, supervised_run=key)
        report = {**empty(key, context["limits"]), "problems": context["problems"]}
    if loop is not None:
        return {**report, "loop_run": loop}
    return {**report, "supervised_run": metrics} if metrics else report


def final_report(sup: Any, status: str, ending: dict[str, Any], summary: dict[str, Any],
                 recovered: list[dict[str, Any]], claims: dict[str, Any],
                 nodes: list[dict[str, Any]]) -> dict[str, Any]:
    """What `clavain run` returns as a run (`sup`, the Supervisor) ends: its status, message,
    nodes done and left, claims, metrics, and its spend — the one cost figure, read now."""
    from clavain.supervisor.run_budget import budget_message
    from clavain.workgraph.claims import describe_end

    done = [n["id"] for n in nodes if n["status"] == NodeStatus.DONE]
    left = [{"id": n["id"], "status": n["status"]} for n in nodes
            if n["status"] not in SETTLED]
    message = ending.get("message") or ""
    spend = None
    if sup.ctx is not None:
        try:
            spend = sup.ctx.reserve.ledger()
        except Exception:  # the meter is out of reach: the figures in metrics still show
            spend = None
    if status == "budget":  # the figures as the run ends, not as dispatch stopped
        message = budget_message(message, spend, sup.ctx.reserve.limits if sup.ctx else {},
                                 done=len(done), left=len(left))
    if status == "interrupted":
        message = (f"stopped by {signal.Signals(sup.signal).name}" if sup.signal
                   else "stopped")
    if claims["given_back"] or claims["still_held"]:
        message += ("; " if message else "") + describe_end(
            claims["given_back"], claims["still_held"], claims["problem"])
    return {"run_id": sup.run_id, "graph_id": sup.g.id, "status": status,
            "reason": ending.get("reason"), "message": message,
            "exit_code": EXIT_CODES.get(status, 1), "done": done, "left": left,
            "recovered": recovered, "claims": claims, "metrics": summary, "spend": spend}


def _loop_summary(state: StatePaths, run_id: str) -> dict[str, Any] | None:
    """`clavain loop summary` of `run_id` when it names a loop run (its `loop.json`), else None."""
    from clavain.loop import records

    if not (records.loop_dir(state, run_id) / records.LOOP_NAME).is_file():
        return None
    return records.summary(state, run_id)


def render_supervised(metrics: dict[str, Any]) -> str:
    by_role = ", ".join(f"{role} {n}" for role, n in metrics["llm_invocations_by_role"].items())
    outcomes = ", ".join(f"{outcome} {n}" for outcome, n in metrics["nodes"].items())
    return "\n".join([
        "",
        f"Supervised run {metrics['run_id']} on graph {metrics['graph_id']}: "
        f"{metrics.get('status', 'running')}",
        f"  node runs: {outcomes or 'none'}",
        f"  LLM calls: {metrics['llm_invocations']}" + (f" ({by_role})" if by_role else ""),
        f"  verify nodes with no LLM: {metrics['verify_without_llm']}",
        f"  tokens: {metrics['tokens']:,}; cost: ${metrics['cost_usd']:.4f}",
        f"  wall: {metrics['wall_seconds']:.1f}s; peak concurrency: "
        f"{metrics['peak_concurrency']}",
        *(["  crashes (given back, no attempt spent): "
           + ", ".join(f"{node} {n}" for node, n in metrics["crashes"].items())]
          if metrics.get("crashes") else []),
    ]) + "\n"
