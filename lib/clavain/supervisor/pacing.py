"""When a supervised run may start the next node, and how it waits when it may not: what its
finished workers said (rate limits, worker errors in a row, a runner that cannot work), why no
node may start now (a damaged store, a budget, the iteration cap, the subscription's windows
past `budgets.windowShareMax`: a wait for their reset, or the run's end), what the scheduler's
reason for "nothing to claim" means for the run (wait for others, a backoff, the end), the
countdown while it waits, and the bounded wait for a workgraph store that is restarting.

The supervisor (`supervise`) asks; this module decides. Every wait reports a `waiting` event
each second (why, seconds left, until, message) so a person sees a countdown, never silence.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from clavain import config as config_mod
from clavain.errors import ClavainError
from clavain.stop_flag import StopFlag
from clavain.store import faults as store_faults
from clavain.store.graph_db import is_shared
from clavain.supervisor.outcome import MAX_LIMITS_IN_A_ROW, limit_wait_seconds

OTHERS_POLL_SECONDS = 2.0
# On a shared server the wake is the server's notification; the poll is only a fallback.
OTHERS_POLL_SECONDS_SHARED = 15.0
READY_RETRY_SECONDS = 0.2
# Worker errors (a bug, not the node's failure) in a row before the run stops to be looked at.
MAX_ERRORS_IN_A_ROW = 3
# While waiting for a window's reset, the file and the share are read again this often: a
# person who raises the share, or a reading after an early reset, ends the wait.
WINDOW_RECHECK_SECONDS = 30.0

Report = Callable[[dict[str, Any]], None]


class StoreOutage(ClavainError):
    """The workgraph store stayed unreachable for the whole configured wait."""


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300]


def window_hold(root: str, *, wait_on_limit: bool, command: str,
                now: float | None = None) -> dict[str, Any] | None:
    """Past `budgets.windowShareMax` of a subscription window (`guards.window`): a wait for
    its reset ({"wait": "window", "until", "message"}) with `wait_on_limit`, else the run's
    ending ({"status": "window_limit", …}) saying when it would resume; None when no live
    window is past the share. The share is read again each time (a person may change it)."""
    from clavain.guards import window
    from clavain.guards.counting import run_context

    now = time.time() if now is None else now
    limits = run_context(root, None)["limits"]
    over = window.over_share(root, limits, now)
    if not over:
        return None
    name, rec = over[0]
    said = window.describe(name, rec, float(limits["windowShareMax"]), now)
    if wait_on_limit:
        return {"wait": "window", "until": float(rec["resets_at"]),
                "message": f"no new runner: {said}"}
    return {"status": "window_limit", "reason": "window_share",
            "resume_at": float(rec["resets_at"]),
            "message": f"stopped: {said}; it would resume then (`{command}` again; "
                       "--wait-on-limit waits for it)"}


class Pacing:
    def __init__(self, cfg: dict[str, Any], stop: StopFlag, report: Report, *,
                 root: str | None = None, wait_on_limit: bool | None = None) -> None:
        self.cfg = cfg
        self.root = root  # the state folder whose window.json paces the run (None: not paced)
        self.wait_on_limit = bool(config_mod.get(cfg, "supervisor.waitOnLimit", True)) \
            if wait_on_limit is None else wait_on_limit
        self.stop = stop
        self.report = report
        self.rate_limited_until: float | None = None
        self.limits_in_a_row = 0
        self.errors_in_a_row = 0
        self.last_error: str | None = None
        self.unusable: str | None = None  # why the runner cannot work at all

    # ------------------------------------------------------------ what workers said

    def note(self, event: dict[str, Any]) -> None:
        """A worker finished: remember what its outcome says about the run."""
        outcome = event.get("outcome")
        if outcome == "rate_limited":
            self._note_rate_limit(event)
        else:
            self.limits_in_a_row = 0
        if outcome == "runner_unusable":
            self.unusable = self.unusable or str(event.get("summary"))
        if outcome == "error":
            self.errors_in_a_row += 1
            self.last_error = str(event.get("summary"))
        elif outcome not in ("store_unavailable", "store_damaged"):
            self.errors_in_a_row = 0

    def _note_rate_limit(self, event: dict[str, Any]) -> None:
        """Pause the run until the limit's reset (`outcome.limit_wait_seconds`)."""
        limit = event.get("rate_limit") or {}
        self.limits_in_a_row += 1
        now = time.time()
        reset_at = datetime.fromisoformat(limit["reset_at"]) if limit.get("reset_at") else None
        seconds = limit_wait_seconds(
            reset_at, limit.get("retry_after_seconds"), now=now, in_a_row=self.limits_in_a_row,
            cap=float(config_mod.get(self.cfg, "supervisor.maxRateLimitWaitSeconds", 3600)))
        self.rate_limited_until = max(self.rate_limited_until or 0, now + seconds)

    # ------------------------------------------------------------ may a node start?

    def hold(self, *, halt: list[str] | None, spent: str | None, started: int,
             limit: int | None) -> dict[str, Any] | None:
        """Why no node may start now — the run's ending, or a wait — or None. `halt`: the
        damaged store's message once a worker found it."""
        if halt is not None:
            return {"status": "blocked", "reason": "store_damaged",
                    "message": halt[0] if halt else "the workgraph store is damaged"}
        if self.unusable:
            return {"status": "blocked", "reason": "runner_unusable", "message": self.unusable}
        if self.errors_in_a_row >= MAX_ERRORS_IN_A_ROW:
            return {"status": "blocked", "reason": "worker_errors",
                    "message": f"{self.errors_in_a_row} worker errors in a row (the last: "
                               f"{self.last_error}); the nodes went back unspent, a person "
                               "must look"}
        if self.limits_in_a_row >= MAX_LIMITS_IN_A_ROW:
            return {"status": "blocked", "reason": "rate_limited",
                    "message": f"rate limited {self.limits_in_a_row} times in a row; "
                               "a person must look"}
        if self.rate_limited_until and time.time() < self.rate_limited_until:
            return {"wait": "rate_limit", "until": self.rate_limited_until}
        window = self.window_hold()
        if window is not None:
            return window
        if spent:
            return {"status": "budget", "reason": "budget", "message": spent}
        if limit is not None and started >= limit:
            return {"status": "stopped_at_limit", "reason": "max_iterations",
                    "message": f"stopped after {limit} runner call(s) as asked "
                               "(--once / --max-iterations)"}
        return None

    def idle(self, envelope: dict[str, Any], conn: Any, *, ours_running: bool
             ) -> dict[str, Any] | None:
        """What the scheduler's reason for claiming nothing means for the run: None (wait for
        its own workers), a wait (others, a backoff), or its ending."""
        reason = envelope["reason"]
        if reason == "running" and ours_running:
            return None
        if reason == "ready":  # given back elsewhere a moment ago: claim again
            return {"wait": "others", "until": time.time() + READY_RETRY_SECONDS,
                    "message": envelope["message"]}
        if reason == "running":
            poll = OTHERS_POLL_SECONDS_SHARED if is_shared(conn) else OTHERS_POLL_SECONDS
            return {"wait": "others", "until": time.time() + poll,
                    "message": envelope["message"]}
        if reason == "backoff":
            until = datetime.fromisoformat(envelope["until"].replace("Z", "+00:00"))
            return {"wait": "backoff", "until": until.timestamp(),
                    "message": envelope["message"]}
        status = "complete" if reason == "all_done" else "blocked"
        return {"status": status, "reason": reason, "message": envelope["message"]}

    def window_hold(self) -> dict[str, Any] | None:
        """`window_hold` for this run (None when it is not paced by the windows)."""
        if self.root is None:
            return None
        return window_hold(self.root, wait_on_limit=self.wait_on_limit, command="clavain run")

    # ------------------------------------------------------------ waiting

    def wait(self, ending: dict[str, Any] | None, conn: Any, graph_id: str) -> None:
        """Wait for a backoff, a rate limit's reset or other runs, with a countdown."""
        if ending is None:
            return
        until = float(ending["until"])
        last_shown = 0.0
        checked = time.monotonic()
        while not self.stop.is_set():
            left = until - time.time()
            if left <= 0:
                break
            if ending["wait"] == "window" and time.monotonic() - checked >= \
                    WINDOW_RECHECK_SECONDS:
                checked = time.monotonic()
                if self.window_hold() is None:
                    break  # the share was raised, or the window reset early: go on now
            if time.monotonic() - last_shown >= 1.0:
                last_shown = time.monotonic()
                self._countdown(ending["wait"], left, until, ending.get("message"))
            # Only a shared server tells of others' progress; a file is polled.
            if ending["wait"] in ("rate_limit", "window") or not is_shared(conn):
                self.stop.wait(min(1.0, left))
                continue
            try:
                if conn.wait_for_ready(graph_id, min(1.0, left)):
                    break  # the graph changed on the server: look again now
            except Exception as exc:
                if store_faults.kind(exc) is None:
                    raise
                break  # the server went away: the next claim waits for it, with a countdown
        if ending["wait"] == "rate_limit":
            self.rate_limited_until = None

    def store(self, action: Callable[[], Any]) -> Any:
        """`action` on the store, a restart or outage waited out with a countdown (bounded by
        `store.outageWaitSeconds`); past that, StoreOutage: one line naming the cause."""
        seconds = store_faults.outage_seconds(self.cfg)
        shown = [0.0]

        def waiting(left: float, exc: BaseException) -> None:
            if time.monotonic() - shown[0] >= 1.0:
                shown[0] = time.monotonic()
                self._countdown("store", left, time.time() + left, one_line(exc))

        try:
            return store_faults.wait_out(action, seconds=seconds, on_wait=waiting,
                                         stopped=self.stop.is_set)
        except Exception as exc:
            if store_faults.kind(exc) != store_faults.UNAVAILABLE:
                raise
            raise StoreOutage(f"the workgraph store did not answer for {seconds:g} s "
                              f"(store.outageWaitSeconds): {one_line(exc)}") from None

    def _countdown(self, why: str, left: float, until: float, message: str | None) -> None:
        self.report({"event": "waiting", "why": why, "seconds_left": left,
                     "until": datetime.fromtimestamp(until, timezone.utc).isoformat(),
                     "message": message})
