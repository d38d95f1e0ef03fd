"""A supervised run's spend, reserved before each node starts, so the run never passes its cap.

The old rule — start a node while the budget is not yet spent — let N workers put up to N
nodes' cost past the cap. Now a node whose route calls a model (claude, a configured runner)
starts only with a reservation (`guards.reservations`, the one owner of spend held before it
happens), taken in one write transaction on the project's SQLite file:

- projected: the median of this run's own measured calls of the node's role and model (its
  metrics timeline), else of the project's earlier runs (`metrics.history`, by role and
  model, else by role), else `supervisor.projection.tokensPerCall/costPerCallUsd`;
- unreserved = cap − spent − reserved (dollars and tokens alike); the node may start only if
  unreserved ≥ projected, and it gets r = min(unreserved, max(projected, min(unreserved / idle
  workers, projected × `supervisor.projection.shareMaxMultiple`))): N workers split what is
  left, none holds more than a few projections (a crash charges no more), and the
  reservations never sum past the cap. A node that does not fit goes back unspent; while
  other runners hold reservations the run waits for them (what they leave unspent comes
  back), and once none does, the run ends on its budget.

The share is the runner's hard limit (`claude --max-budget-usd`; a configured runner gets it in
its environment and is stopped once the run's spend reaches the cap). When a runner reports,
its reservation is released and its measured usage added in the same transaction (`settle`);
a runner that ended without reporting keeps its reservation `charged`, counted as spent, until
its transcript is measured (`measure_charged`). The run's cost is one figure everywhere
(`ledger`): what `budget_runs` measured plus what is charged.
"""

from __future__ import annotations

import math
import re
import statistics
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clavain import config as config_mod
from clavain.clock import now_iso
from clavain.errors import ClavainError
from clavain.guards import reservations
from clavain.paths import StatePaths
from clavain.store.db import connect, transaction
from clavain.supervisor.metrics import history
from clavain.supervisor.routes import Route

SHARE_USD_VARIABLE = "CLAVAIN_BUDGET_SHARE_USD"
SHARE_TOKENS_VARIABLE = "CLAVAIN_BUDGET_SHARE_TOKENS"
_EPSILON = 1e-9


class NoRoom(ClavainError):
    """The node's projected cost does not fit what the run has left unreserved. `held`: other
    runners of the run still hold reservations (what they do not spend comes back)."""

    def __init__(self, message: str, *, held: int = 0) -> None:
        super().__init__(message)
        self.held = held


class MeterError(ClavainError):
    """The run's budget tables could not be read or written: nothing more may start."""


@dataclass(frozen=True)
class Share:
    """What one node's runner may spend: its reservation."""

    holder: str
    tokens: int
    cost_usd: float
    projected: dict[str, float]
    session_id: str

    def env(self) -> dict[str, str]:
        return {SHARE_USD_VARIABLE: f"{self.cost_usd:.6f}", SHARE_TOKENS_VARIABLE: str(self.tokens)}

    def max_budget_arg(self) -> str:
        """The share for `--max-budget-usd`, rounded down (never a cent over the reservation)."""
        return f"{math.floor(self.cost_usd * 10_000) / 10_000:.4f}"


@dataclass
class RunReserve:
    """The reservations of one run (`run:<id>`): projection, reserve, settle, charge."""

    state: StatePaths
    key: str
    limits: dict[str, Any]
    cfg: dict[str, Any]
    timeline: Callable[[], list[dict[str, Any]]] = list
    _history: dict[Any, dict[str, float]] | None = field(default=None, repr=False)
    # node → the share its runner was stopped at: the node's next try needs twice that, so
    # a node no share could hold is not paid for again and again (it gets more, or the run
    # ends on its budget).
    stopped_at: dict[str, dict[str, float]] = field(default_factory=dict, repr=False)

    @property
    def enabled(self) -> bool:
        return bool(self.limits.get("enabled", True))

    # ------------------------------------------------------------ projection

    def projected(self, route: Route) -> dict[str, float] | None:
        """Tokens and dollars one call of `route` is expected to cost (None: no model call).
        A history that measured nothing (a runner that reports no usage) projects the
        configured default instead: a share of $0 would stop the runner before it begins."""
        if not route.llm:
            return None
        found = self._projected(route)
        default = default_projection(self.cfg)
        for column in ("tokens", "cost_usd"):
            if found[column] <= 0:
                found[column] = default[column]
        return found

    def _projected(self, route: Route) -> dict[str, Any]:
        own = [(int(e.get("tokens") or 0), float(e.get("cost_usd") or 0))
               for e in list(self.timeline())
               if e.get("llm") and e.get("role") == route.role
               and e.get("model") == route.model and (e.get("tokens") or e.get("cost_usd"))]
        if own:
            return {"tokens": statistics.median(t for t, _ in own),
                    "cost_usd": statistics.median(c for _, c in own), "source": "run"}
        if self._history is None:
            self._history = history(self.state, by_model=True)
        for key in ((route.role, route.model), route.role):
            if key in self._history:
                found = self._history[key]
                return {"tokens": found["tokens"], "cost_usd": found["cost_usd"],
                        "source": "project"}
        return {**default_projection(self.cfg), "source": "defaults"}

    # ------------------------------------------------------------ reserve

    def reserve(self, node: dict[str, Any], route: Route, *, idle: int) -> Share | None:
        """Reserve `node`'s share before it starts: None when it needs none (no model call,
        budgets off); NoRoom when its projection does not fit; MeterError when the budget
        tables cannot be read or written (fail closed)."""
        projected = self.projected(route)
        if projected is None or not self.enabled:
            return None
        need = projected
        floor = self.stopped_at.get(node["id"])
        if floor is not None:
            # It wants twice the share it was stopped at, and starts only with more than that
            # share: every try gets more room, or the run ends on its budget.
            projected = {column: max(projected[column], 2 * floor[column])
                         for column in ("tokens", "cost_usd")}
            projected["source"] = "twice the share its runner was stopped at"
            need = {"tokens": floor["tokens"] + 1, "cost_usd": floor["cost_usd"] + 0.01,
                    "source": "more than the share its runner was stopped at"}
        session = str(uuid.uuid4())
        try:
            conn = connect(self.state.db)
        except Exception as exc:
            raise MeterError(_meter_line("reserved", exc)) from None
        try:
            with transaction(conn):
                share = self._reserve_on(conn, node, route, projected, need, max(1, idle),
                                         session)
        except NoRoom:
            raise
        except Exception as exc:
            raise MeterError(_meter_line("reserved", exc)) from None
        finally:
            conn.close()
        return share

    def _reserve_on(self, conn: Any, node: dict[str, Any], route: Route,
                    projected: dict[str, Any], need: dict[str, Any], idle: int,
                    session: str) -> Share:
        used = reservations.spent(conn, self.key)
        held = reservations.reserved(conn, self.key)
        unreserved = {column: float(self.limits[key]) - used[column] - held[column]
                      for column, key, _ in reservations.CAPS}
        live = len(reservations.listed(conn, self.key, state=reservations.HELD))
        for column, key, label in reservations.CAPS:
            if unreserved[column] + _EPSILON < need[column]:
                raise NoRoom(
                    f"{node['id']} needs {_figure(column, need[column])} "
                    f"({label}, from {need['source']}) and only "
                    f"{_figure(column, max(0.0, unreserved[column]))} of the "
                    f"{_figure(column, self.limits[key])} cap ({key}) is unreserved: "
                    f"{_figure(column, used[column])} spent, "
                    f"{_figure(column, held[column])} reserved", held=live)
        # At most `shareMaxMultiple` projections: a runner that dies unmeasured is charged
        # no more than that, and one worker does not hold all that is left.
        most = float(config_mod.get(self.cfg, "supervisor.projection.shareMaxMultiple", 4))
        share = {column: min(unreserved[column],
                             max(projected[column],
                                 min(unreserved[column] / idle, projected[column] * most)))
                 for column in unreserved}
        holder = _free_holder(conn, self.key, f"{node['id']}#{int(node.get('attempts') or 0) + 1}")
        detail = {"node": node["id"], "role": route.role, "runner": route.runner,
                  "model": route.model, "session_id": session,
                  "projected": {"tokens": projected["tokens"],
                                "cost_usd": projected["cost_usd"],
                                "source": projected["source"]}}
        tokens = math.floor(share["tokens"])
        why = reservations.reserve_if_fits(conn, self.key, holder, self.limits,
                                           kind=reservations.RUNNER, tokens=tokens,
                                           cost_usd=share["cost_usd"], at=now_iso(),
                                           detail=detail)
        if why is not None:
            raise NoRoom(f"{node['id']}: {why}", held=live)
        return Share(holder, tokens, share["cost_usd"],
                     {"tokens": projected["tokens"], "cost_usd": projected["cost_usd"]},
                     session)

    def note_transcript(self, share: Share, path: Path) -> None:
        """Where the runner's transcript will be, so a runner that dies unmeasured can be
        measured later (by this run, or by the next one's recovery)."""
        conn = connect(self.state.db)
        try:
            with transaction(conn):
                reservations.note_transcript(conn, self.key, share.holder, str(path))
        finally:
            conn.close()

    # ------------------------------------------------------------ settle

    def settle(self, holder: str | None, *, tokens: int, cost_usd: float) -> None:
        """The runner reported: its reservation ends and its measured usage is added, in one
        transaction (a crash between the two would count it twice, or not at all)."""
        settle(self.state, self.key, holder, tokens=tokens, cost_usd=cost_usd)

    def charge(self, holder: str) -> dict[str, Any] | None:
        """The runner ended without reporting its usage: its reservation counts as spent until
        its transcript is measured — now, if it is there already. What was measured, if any."""
        conn = connect(self.state.db)
        try:
            with transaction(conn):
                reservations.charge(conn, self.key, holder)
        finally:
            conn.close()
        measured = measure_charged(self.state, self.key, only=holder)
        return measured[0] if measured else None

    # ------------------------------------------------------------ figures

    def ledger(self) -> dict[str, Any]:
        return ledger_of(self.state, self.key)

    def over_cap(self) -> str | None:
        """One line when what the run measured plus what is charged reached a cap."""
        if not self.enabled:
            return None
        figures = self.ledger()
        for column, key, label in reservations.CAPS:
            if figures[column] >= float(self.limits[key]) - _EPSILON:
                return (f"{label}: {_figure(column, figures[column])} spent of the "
                        f"{_figure(column, self.limits[key])} cap ({key})")
        return None


def default_projection(cfg: dict[str, Any]) -> dict[str, float]:
    return {"tokens": float(config_mod.get(cfg, "supervisor.projection.tokensPerCall")),
            "cost_usd": float(config_mod.get(cfg, "supervisor.projection.costPerCallUsd"))}


def settle(state: StatePaths, key: str, holder: str | None, *, tokens: int,
           cost_usd: float) -> None:
    """Release `holder` (if any) and add (tokens, cost_usd) to the run, in one transaction."""
    conn = connect(state.db)
    try:
        with transaction(conn):
            if holder is not None:
                reservations.release(conn, key, holder)
            add_on(conn, key, tokens=tokens, cost_usd=cost_usd)
    finally:
        conn.close()


def add_on(conn: Any, key: str, *, tokens: int, cost_usd: float) -> None:
    """Add measured usage to the run's row, on the caller's transaction."""
    if not tokens and not cost_usd:
        return
    reservations.add_spent(conn, key, tokens=tokens, cost_usd=cost_usd, at=now_iso())


def measure_charged(state: StatePaths, key: str, *, only: str | None = None
                    ) -> list[dict[str, Any]]:
    """Measure the charged reservations of `key` whose transcript exists: each is released and
    its measured tokens and dollars added, in one transaction. What was measured."""
    from clavain.guards.usage import usage_cost

    conn = connect(state.db)
    measured = []
    try:
        for entry in reservations.listed(conn, key, state=reservations.CHARGED):
            if only is not None and entry["holder"] != only:
                continue
            path = entry["detail"].get("transcript")
            if not isinstance(path, str) or not Path(path).is_file():
                continue
            tokens, dollars, _ = usage_cost([Path(path)])
            with transaction(conn):
                if reservations.release(conn, key, entry["holder"]) is None:
                    continue  # measured meanwhile by another
                add_on(conn, key, tokens=tokens, cost_usd=dollars)
            measured.append({"holder": entry["holder"], "charged_usd": entry["cost_usd"],
                             "tokens": tokens, "cost_usd": dollars, "transcript": path})
    finally:
        conn.close()
    return measured


def charge_held(state: StatePaths, key: str, *, running: frozenset[str] = frozenset()
                ) -> list[str]:
    """A dead supervisor's runners never reported: every reservation it left held becomes
    charged (then `measure_charged` measures those whose transcript exists) — but those of
    the nodes in `running`, whose runner could not be stopped and still spends: they stay
    held (a partial transcript measured now would let the rest go unseen)."""
    conn = connect(state.db)
    try:
        with transaction(conn):
            held = [e["holder"] for e in reservations.listed(conn, key,
                                                             state=reservations.HELD)
                    if e["detail"].get("node") not in running]
            for holder in held:
                reservations.charge(conn, key, holder)
    finally:
        conn.close()
    return held


def ledger_of(state: StatePaths, key: str) -> dict[str, Any]:
    """The run's one cost figure: measured (`budget_runs`) plus charged reservations; with the
    held reservations beside it."""
    conn = connect(state.db)
    try:
        used = reservations.spent(conn, key)
        rows = reservations.listed(conn, key)
    finally:
        conn.close()
    charged = [r for r in rows if r["state"] == reservations.CHARGED]
    held = [r for r in rows if r["state"] == reservations.HELD]
    return {"tokens": used["tokens"] + sum(int(r["tokens"]) for r in charged),
            "cost_usd": round(used["cost_usd"] + sum(float(r["cost_usd"]) for r in charged), 6),
            "measured": {"tokens": used["tokens"], "cost_usd": round(used["cost_usd"], 6)},
            "charged": {"count": len(charged), "tokens": sum(int(r["tokens"]) for r in charged),
                        "cost_usd": round(sum(float(r["cost_usd"]) for r in charged), 6)},
            "held": {"count": len(held), "tokens": sum(int(r["tokens"]) for r in held),
                     "cost_usd": round(sum(float(r["cost_usd"]) for r in held), 6)}}


def status(state: StatePaths, key: str, limits: dict[str, Any]) -> dict[str, Any]:
    """`clavain budget status`'s view of a run's reservations: spent, reserved (count, dollars,
    tokens, of which charged) and headroom under each cap."""
    figures = ledger_of(state, key)
    held, charged = figures["held"], figures["charged"]
    reserved = {"count": held["count"] + charged["count"],
                "tokens": held["tokens"] + charged["tokens"],
                "cost_usd": round(held["cost_usd"] + charged["cost_usd"], 6),
                "charged": charged}
    headroom: dict[str, float | None] = {"tokens": None, "cost_usd": None}
    if limits.get("enabled", True):
        headroom = {column: max(0.0, round(float(limits[key_]) - figures["measured"][column]
                                           - reserved[column], 6))
                    for column, key_, _ in reservations.CAPS}
    return {"run": key, "spent": {"tokens": figures["tokens"], "cost_usd": figures["cost_usd"]},
            "measured": figures["measured"], "reserved": reserved, "headroom": headroom}


def transcript_path(env: dict[str, str], cwd: Path, session_id: str) -> Path:
    """Where claude writes a session's transcript: its config folder (CLAUDE_CONFIG_DIR, else
    ~/.claude of the runner's HOME) → projects → the cwd with every character other than a
    letter or a digit turned into '-' (seen on 2.1.330) → <session id>.jsonl."""
    base = env.get("CLAUDE_CONFIG_DIR") or str(Path(env.get("HOME") or Path.home()) / ".claude")
    return Path(base) / "projects" / re.sub(r"[^A-Za-z0-9]", "-", str(cwd)) / \
        f"{session_id}.jsonl"


def _free_holder(conn: Any, key: str, holder: str) -> str:
    """`holder`, or `holder.N` when a charged reservation of an earlier try (a crash gives the
    node back with no attempt spent) still holds the name: a charge is never overwritten."""
    taken = reservations.holders_named(conn, key, holder)
    if holder not in taken:
        return holder
    number = 2
    while f"{holder}.{number}" in taken:
        number += 1
    return f"{holder}.{number}"


def _meter_line(doing: str, exc: BaseException) -> str:
    text = " ".join(str(exc).split())[:200]
    return (f"the run's budget could not be {doing} ({type(exc).__name__}: {text}); "
            "nothing more starts, to be safe")


def _figure(column: str, value: float) -> str:
    return f"${float(value):.4f}" if column == "cost_usd" else f"{int(value):,}"
