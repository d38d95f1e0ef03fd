"""A supervised run's budgets: the same limits as a session's (`guards.policy`: profile × scope,
`.clavain/config.json` → `budgets`, `CLAVAIN_BUDGET_*`), counted per run under the budget run
`run:<run id>`.

Runners count their own tool calls there (the supervisor gives them `CLAVAIN_BUDGET_RUN`, and
PreToolUse denies a call once a budget is spent); the supervisor adds each runner's measured
tokens and dollars (from its own report) and starts no node once any budget is spent.

Budgets are this machine's: they live in the project's SQLite file even when the workgraph is on
a shared server (`store.graph_db`), so each call here opens that file briefly.
"""

from __future__ import annotations

from typing import Any

from clavain.clock import now_iso
from clavain.guards.budget import BUDGETS, amount
from clavain.guards.gate import SUPERVISED_PREFIX, run_context
from clavain.paths import StatePaths
from clavain.store.db import connect, transaction


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
        """Add one runner's measured usage to the run."""
        if not tokens and not cost_usd:
            return
        at = now_iso()
        conn = connect(self.state.db)
        try:
            with transaction(conn):
                conn.execute("INSERT OR IGNORE INTO budget_runs (run_key, started_at, "
                             "updated_at) VALUES (?, ?, ?)", (self.key, at, at))
                conn.execute("UPDATE budget_runs SET tokens = tokens + ?, "
                             "cost_usd = cost_usd + ?, updated_at = ? WHERE run_key = ?",
                             (tokens, cost_usd, at, self.key))
        finally:
            conn.close()

    def used(self) -> dict[str, float]:
        conn = connect(self.state.db)
        try:
            row = conn.execute("SELECT * FROM budget_runs WHERE run_key = ?",
                               (self.key,)).fetchone()
        finally:
            conn.close()
        return {column: (row[column] if row is not None else 0) for column, _, _ in BUDGETS}

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
