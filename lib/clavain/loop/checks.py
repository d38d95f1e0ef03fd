"""The project's checks (`.clavain/config.json` → `checks`), run for the loop: all at once, each
with its timeout, in the project root. A failing check is work the next iteration may pick; a
check past its timeout fails (its whole process group is killed), and one that cannot start
fails with the reason — a broken check is never silently "passing".
"""

from __future__ import annotations

import concurrent.futures
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

from clavain.processes import kill_group
from clavain.workgraph.shell import SignalGuard, run_command
from clavain.workgraph.verifier import log_tail, safe_path_part

MAX_PARALLEL = 8


def run_checks(checks: list[dict[str, Any]], *, project: Path, state_root: Path,
               log_dir: Path, stop: threading.Event | None = None) -> list[dict[str, Any]]:
    """Each check's outcome, in config order: id, priority, description, passed, exit_code,
    timed_out, seconds, tail (the end of its output when it failed), log. When `stop` is set
    (Ctrl-C) every running check's process group is killed at once."""
    if not checks:
        return []
    log_dir.mkdir(parents=True, exist_ok=True)
    running = SignalGuard()  # not entered: only its list of running process groups
    workers = min(MAX_PARALLEL, len(checks))
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(_run_one, index, check, project, state_root, log_dir, running)
                   for index, check in enumerate(checks, start=1)]
        while stop is not None and not all(future.done() for future in futures):
            if stop.wait(0.2):
                for pgid in list(running.pgids):
                    kill_group(pgid, signal.SIGKILL)
        return [future.result() for future in futures]


def _run_one(index: int, check: dict[str, Any], project: Path, state_root: Path,
             log_dir: Path, running: SignalGuard) -> dict[str, Any]:
    started = time.monotonic()
    log_path = log_dir / f"check-{safe_path_part(check['id'])}.log"
    timeout = float(check.get("timeout") or 120)
    base = {"id": check["id"], "priority": check.get("priority", "medium"),
            "description": check.get("description", ""), "command": check["cmd"],
            "log": str(log_path)}
    try:
        outcome = run_command(index, check["cmd"], cwd=project, log_path=log_path,
                              timeout=timeout, env=dict(os.environ), state_root=state_root,
                              guard=running)
    except OSError as exc:
        return {**base, "passed": False, "exit_code": None, "timed_out": False,
                "seconds": round(time.monotonic() - started, 3),
                "tail": f"could not run: {exc}"}
    return {**base, "passed": outcome.passed, "exit_code": outcome.exit_code,
            "timed_out": outcome.timed_out, "seconds": round(time.monotonic() - started, 3),
            "tail": "" if outcome.passed else log_tail(log_path)}
