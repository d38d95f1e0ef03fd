"""The project's checks (`.clavain/config.json` → `checks`), run for the loop: all at once, each
with its timeout, in the project root. A failing check is work the next iteration may pick; a
check past its timeout fails (its whole process group is killed), and one that cannot start
fails with the reason — a broken check is never silently "passing".

The Stop hook runs them inside the host's own time limit, so it gives them a total `deadline`
too: a check still running then is stopped and one not started is not run, both reported as
not finished (failing, never passing); `worst_case_seconds` is what the loop's start checks
against that total.
"""

from __future__ import annotations

import concurrent.futures
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

from clavain.paths import safe_path_part
from clavain.processes import kill_group
from clavain.workgraph.shell import SignalGuard, run_command
from clavain.workgraph.verifier import log_tail

MAX_PARALLEL = 8
DEFAULT_TIMEOUT = 120.0


def timeout_of(check: dict[str, Any]) -> float:
    return float(check.get("timeout") or DEFAULT_TIMEOUT)


def worst_case_seconds(checks: list[dict[str, Any]]) -> float:
    """How long `run_checks` may take when every check runs to its timeout: each starts, in
    config order, when one of the MAX_PARALLEL places is free."""
    import heapq

    free_at = [0.0] * min(MAX_PARALLEL, len(checks))
    for check in checks:
        heapq.heapreplace(free_at, free_at[0] + timeout_of(check))
    return max(free_at, default=0.0)


def run_checks(checks: list[dict[str, Any]], *, project: Path, state_root: Path,
               log_dir: Path, stop: threading.Event | None = None,
               deadline: float | None = None) -> list[dict[str, Any]]:
    """Each check's outcome, in config order: id, priority, description, passed, exit_code,
    timed_out, finished, seconds, tail (the end of its output when it failed), log. When
    `stop` is set (Ctrl-C) every running check's process group is killed at once. `deadline`
    (`time.monotonic()`): the end of the time all the checks have together."""
    if not checks:
        return []
    log_dir.mkdir(parents=True, exist_ok=True)
    running = SignalGuard()  # not entered: only its list of running process groups
    workers = min(MAX_PARALLEL, len(checks))
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(_run_one, index, check, project, state_root, log_dir, running,
                               deadline)
                   for index, check in enumerate(checks, start=1)]
        while stop is not None and not all(future.done() for future in futures):
            if stop.wait(0.2):
                for pgid in list(running.pgids):
                    kill_group(pgid, signal.SIGKILL)
        return [future.result() for future in futures]


def _run_one(index: int, check: dict[str, Any], project: Path, state_root: Path,
             log_dir: Path, running: SignalGuard, deadline: float | None) -> dict[str, Any]:
    started = time.monotonic()
    log_path = log_dir / f"check-{safe_path_part(check['id'])}.log"
    timeout = own = timeout_of(check)
    base = {"id": check["id"], "priority": check.get("priority", "medium"),
            "description": check.get("description", ""), "command": check["cmd"],
            "log": str(log_path)}
    if deadline is not None:
        timeout = min(own, deadline - started)
        if timeout <= 0:
            return {**base, "passed": False, "exit_code": None, "timed_out": True,
                    "finished": False, "seconds": 0.0, "tail": "not run: the checks' total "
                    "time ran out before it could start"}
    try:
        outcome = run_command(index, check["cmd"], cwd=project, log_path=log_path,
                              timeout=timeout, env=dict(os.environ), state_root=state_root,
                              guard=running)
    except OSError as exc:
        return {**base, "passed": False, "exit_code": None, "timed_out": False,
                "finished": True, "seconds": round(time.monotonic() - started, 3),
                "tail": f"could not run: {exc}"}
    cut = outcome.timed_out and timeout < own  # stopped by the total, not its own timeout
    tail = "" if outcome.passed else log_tail(log_path)
    if cut:
        tail = f"{tail}\n[not finished: stopped when the checks' total time ran out]".lstrip()
    return {**base, "passed": outcome.passed, "exit_code": outcome.exit_code,
            "timed_out": outcome.timed_out, "finished": not cut,
            "seconds": round(time.monotonic() - started, 3), "tail": tail}
