"""A supervised run's budgets: the same limits as a session's (`guards.policy`: profile × scope,
`.clavain/config.json` → `budgets`, `CLAVAIN_BUDGET_*`), counted per run under the budget run
`run:<run id>`.

Runners count their own tool calls there (the supervisor gives them `CLAVAIN_BUDGET_RUN`, and
PreToolUse denies a call once a budget is spent); the supervisor adds each runner's measured
tokens and dollars (from its own report) and starts a node only with a reservation that fits
(`run_reserve`).

Budgets are this machine's: they live in the project's SQLite file even when the workgraph is on
a shared server (`store.graph_db`), so each call here opens that file briefly.
"""

from __future__ import annotations

from typing import Any

from clavain.guards import reservations
from clavain.guards.budget import BUDGETS, amount, run_row
from clavain.guards.counting import SUPERVISED_PREFIX, run_context
from clavain.paths import StatePaths
from clavain.store.db import connect


def run_key(run_id: str) -> str:
    return f"{SUPERVISED_PREFIX}{run_id}"


class RunBudget:
    def __init__(self, state: StatePaths, run_id: str) -> None:
        self.state = state
        self.key = run_key(run_id)
        context = run_context(str(state.root), None, supervised_run=self.key)
        self.limits: dict[str, Any] = context["limits"]
        self.problems: list[str] = context["problems"]

    def add_usage(self, *, tokens: int, cost_usd: float) -> None:
        """Add measured usage that no reservation stood for (a loop's turn, a microcall)."""
        from clavain.supervisor.run_reserve import settle

        if tokens or cost_usd:
            settle(self.state, self.key, None, tokens=tokens, cost_usd=cost_usd)

    def used(self) -> dict[str, float]:
        """What the run counted; tokens and dollars include its charged reservations (runners
        that died unmeasured count as spent: `run_reserve`)."""
        conn = connect(self.state.db)
        try:
            row = run_row(conn, self.key)
            figure = reservations.spent_with_charged(conn, self.key)  # the one owner
        finally:
            conn.close()
        used = {column: (row[column] if row is not None else 0) for column, _, _ in BUDGETS}
        used.update(tokens=figure["tokens"], cost_usd=figure["cost_usd"])
        return used

    def spent(self) -> str | None:
        """One line naming the first budget the run has used up, or None."""
        if not self.limits["enabled"]:
            return None
        used = self.used()
        for column, key, label in BUDGETS:
            if used[column] >= self.limits[key]:
                return (f"{label} budget spent: {amount(used[column])} of "
                        f"{amount(self.limits[key])} ({key})")
        return None


def admit(reserve: Any, cfg: dict[str, Any], node: dict[str, Any], runner_override: str | None,
          *, idle: int, running: bool) -> tuple[Any, Any, dict[str, Any] | None]:
    """(share, route, refusal): `node`'s reservation before it starts (`run_reserve`); a
    route that cannot be read is left to the worker, which says why the node cannot run. The
    refusal is the run's ending (status "budget"), or — while other runners of the run
    (`running`) hold reservations that may come back unspent — a wait for them."""
    from clavain.errors import ClavainError
    from clavain.supervisor.routes import route_for
    from clavain.supervisor.run_reserve import MeterError, NoRoom

    try:
        route = route_for(cfg, node, runner_override=runner_override)
    except ClavainError:
        return None, None, None
    try:
        return reserve.reserve(node, route, idle=idle), route, None
    except NoRoom as exc:
        if exc.held and running:
            import time

            return None, route, {"wait": "budget", "until": time.time() + 0.25,
                                 "message": str(exc)}
        return None, route, {"status": "budget", "reason": "budget", "message": str(exc)}
    except MeterError as exc:
        return None, route, {"status": "budget", "reason": "budget_meter", "message": str(exc)}


def check_cap(ctx: Any, active: dict[str, dict[str, Any]], report: Any) -> None:
    """Nothing makes a configured runner honour its share: once the run's measured spend (and
    what is charged) reaches its cap, such runners are stopped (`worker._Stops`). Asked at
    every poll of the supervisor's loop."""
    from clavain.supervisor.routes import CLAUDE, SHELL, SHELL_VERIFY

    if ctx.cap_reached.is_set() or not any(
            entry.get("runner") not in (None, CLAUDE, SHELL, SHELL_VERIFY)
            for entry in active.values()):
        return
    try:
        over = ctx.reserve.over_cap()
    except Exception:
        return  # the next reservation fails closed and says why
    if over is not None:
        ctx.cap_reached.set()
        report({"event": "cap_reached", "message": over})


def budget_message(why: str, spend: dict[str, Any] | None, limits: dict[str, Any], *,
                   done: int, left: int) -> str:
    """A run that ended on its budget: why nothing more started, what was done, what is left,
    and the figures as the run ended."""
    parts = [f"nothing more started: {why}" if why else "the budget let nothing more start",
             f"{done} node(s) done, {left} left"]
    if spend is not None:
        cap = limits.get("maxCostUsd")
        figures = f"spent ${spend['cost_usd']:.4f}" + (f" of ${float(cap):.4f} (maxCostUsd)"
                                                       if cap is not None else "")
        figures += f", {spend['tokens']:,} tokens"
        if limits.get("maxTokens") is not None:
            figures += f" of {int(limits['maxTokens']):,}"
        if spend["charged"]["count"]:
            figures += (f"; of which ${spend['charged']['cost_usd']:.4f} charged for "
                        f"{spend['charged']['count']} runner(s) that ended unmeasured")
        if spend["held"]["count"]:
            figures += (f"; ${spend['held']['cost_usd']:.4f} still reserved by "
                        f"{spend['held']['count']} runner(s)")
        parts.append(figures)
    else:
        parts.append("the run's spend could not be read")
    return "; ".join(parts)
