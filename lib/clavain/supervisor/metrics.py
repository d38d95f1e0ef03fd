"""`.clavain/runs/<run>/metrics.json`: what a supervised run did, node by node, and the figures
that prove it — LLM calls by role, verify nodes that cost no LLM call, tokens, dollars, wall
time and the peak number of runners that were really alive at once (computed from the measured
start and end of every runner, not from the number of workers asked for).

A resumed run (`clavain run --resume RUN`) adds to the metrics it finds.

The run's tokens and dollars are its ledger's (`ledger`: `run_reserve.ledger_of`, what the
budget measured plus what it charged for runners that died unmeasured), so `clavain run`, its
page, `clavain budget status` and this file say one figure; the timeline's own sum is kept
beside it (`timeline_tokens`, `timeline_cost_usd`).

`waits` are the spans the run waited with nothing running (`pacing.Pacing.wait`: a rate
limit's reset, a subscription window, every open node in back-off, a budget, other runs, a
restarting store): the page draws them, so time nothing ran is explained, not blank.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clavain.clock import now_iso
from clavain.fsutil import read_json_object, write_json_atomic
from clavain.paths import StatePaths
from clavain.supervisor.routes import CHECK_ROLES

METRICS_NAME = "metrics.json"
# Waits of one kind this close together are one span (the supervisor looks again each turn).
WAIT_JOIN_SECONDS = 2.5
MAX_WAITS = 2000  # a bound on the file; the newest are dropped past it


def peak_concurrency(timeline: list[dict[str, Any]]) -> int:
    """The most intervals open at one instant (an end at t closes before a start at t)."""
    events = sorted([(entry["start_epoch"], 1) for entry in timeline]
                    + [(entry["end_epoch"], -1) for entry in timeline],
                    key=lambda event: (event[0], event[1]))
    peak = current = 0
    for _, step in events:
        current += step
        peak = max(peak, current)
    return peak


class RunMetrics:
    def __init__(self, path: Path, *, state_root: Path, run_id: str, graph_id: str) -> None:
        self.path = path
        self.state_root = state_root
        self._lock = threading.Lock()
        self._started = time.monotonic()
        earlier = read_json_object(path) or {}
        self.timeline: list[dict[str, Any]] = list(earlier.get("timeline") or [])
        self.waits: list[dict[str, Any]] = list(earlier.get("waits") or [])
        self.earlier_wall = float(earlier.get("wall_seconds") or 0)
        self.ledger: Callable[[], dict[str, Any]] | None = None
        self.data: dict[str, Any] = {"run_id": run_id, "graph_id": graph_id,
                                     "started_at": earlier.get("started_at") or now_iso(),
                                     "sessions": int(earlier.get("sessions") or 0) + 1}

    def record(self, entry: dict[str, Any]) -> None:
        """One runner call: node, role, runner, model, worker, start/end (ISO and epoch),
        seconds, outcome, llm, tokens, cost_usd."""
        with self._lock:
            self.timeline.append(entry)
            self._write_locked()

    def waited(self, why: str, start: float, end: float, message: Any = None) -> None:
        """A wait with nothing running, from `start` to `end` (epochs); one just before of the
        same kind is extended. Kept in memory: the next write saves it."""
        if end <= start:
            return
        with self._lock:
            last = self.waits[-1] if self.waits else None
            if last is not None and last.get("why") == why and \
                    start - float(last.get("end_epoch") or 0) <= WAIT_JOIN_SECONDS:
                last["end_epoch"] = round(max(end, float(last["end_epoch"])), 3)
            elif len(self.waits) < MAX_WAITS:
                self.waits.append({"why": why, "start_epoch": round(start, 3),
                                   "end_epoch": round(end, 3),
                                   "message": None if message is None else str(message)[:300]})

    def write(self, **extra: Any) -> dict[str, Any]:
        with self._lock:
            self.data.update(extra)
            return self._write_locked()

    def _write_locked(self) -> dict[str, Any]:
        summary = self._summary()
        write_json_atomic(self.path, summary, inside=self.state_root)
        return summary

    def _summary(self) -> dict[str, Any]:
        llm = [entry for entry in self.timeline if entry["llm"]]
        tokens = sum(int(entry.get("tokens") or 0) for entry in self.timeline)
        cost = round(sum(float(entry.get("cost_usd") or 0) for entry in self.timeline), 6)
        figures: dict[str, Any] = {"tokens": tokens, "cost_usd": cost,
                                   "timeline_tokens": tokens, "timeline_cost_usd": cost}
        if self.ledger is not None:
            try:
                spend = self.ledger()
                figures.update(tokens=spend["tokens"], cost_usd=spend["cost_usd"], spend=spend)
            except Exception as exc:  # the meter is out of reach: the timeline's, said so
                figures["spend_problem"] = f"{type(exc).__name__}: {exc}"
        return {
            **self.data,
            "nodes": dict(Counter(entry["outcome"] for entry in self.timeline)),
            "llm_invocations": len(llm),
            "llm_invocations_by_role": dict(Counter(entry["role"] for entry in llm)),
            "verify_without_llm": sum(1 for entry in self.timeline
                                      if entry["role"] in CHECK_ROLES
                                      and not entry["llm"]),
            **figures,
            "wall_seconds": round(self.earlier_wall + time.monotonic() - self._started, 3),
            "peak_concurrency": peak_concurrency(self.timeline),
            "timeline": self.timeline,
            "waits": self.waits,
        }


def load(path: Path) -> dict[str, Any] | None:
    return read_json_object(path, max_bytes=64 << 20)


def history(state: StatePaths, *, by_model: bool = False) -> dict[Any, dict[str, float]]:
    """Median tokens and dollars of one LLM call per role, over every recorded run; with
    `by_model`, also per (role, model) — the finer key a reservation is projected from first
    (a planner on opus costs what opus costs), the role its fallback."""
    per_key: dict[Any, list[tuple[int, float]]] = {}
    for path in sorted(state.runs.glob(f"*/{METRICS_NAME}")) if state.runs.is_dir() else []:
        for entry in (load(path) or {}).get("timeline") or []:
            if isinstance(entry, dict) and entry.get("llm") and entry.get("tokens"):
                call = (int(entry["tokens"]), float(entry.get("cost_usd") or 0))
                role = str(entry.get("role"))
                per_key.setdefault(role, []).append(call)
                if by_model:
                    per_key.setdefault((role, entry.get("model")), []).append(call)
    return {key: {"tokens": statistics.median(t for t, _ in calls),
                  "cost_usd": statistics.median(c for _, c in calls), "calls": len(calls)}
            for key, calls in per_key.items()}
