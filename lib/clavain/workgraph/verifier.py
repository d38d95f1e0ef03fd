"""The shell verifier: run a verify node's commands without an LLM and turn the outcome into a
runner result (`{"status", "summary", "errors"}`), so verification costs no model call.

Commands run one after another with `bash -c` in the project root, each in its own process group
with a timeout; the first failure stops the rest (later commands usually build on earlier ones).
Each command's output goes to `.clavain/runs/<run-id>/<node>/cmd-N.log`, the result to
`result.json` beside them.

Recording the outcome makes the verifier a runner like any other: it claims the node under the
one run-id rule (explicit, else $CLAVAIN_RUN_ID, else a new id; never the current holder's),
which requires the node's dependencies to be done, and holds the lock with its own pid, so a
verifier that dies is released as a failed attempt. SIGTERM or SIGINT kills the running
command's whole process group and gives the claim back unspent.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clavain import config as config_mod
from clavain.clock import now_iso
from clavain.errors import ClavainError
from clavain.fsutil import open_inside, write_json_atomic
from clavain.paths import StatePaths
from clavain.store.db import transaction
from clavain.workgraph.leases import claim_node
from clavain.workgraph.nodes import record_event, require_node
from clavain.workgraph.results import apply_result, check_applicable
from clavain.workgraph.runner_env import current_run_id, runner_env

# Node types whose outcome a shell verification may decide; a task's own `verify` list can be
# checked with apply=False, but passing it must not mark the task done without executing it.
VERIFY_TYPES = frozenset({"verify", "final_verify"})
TERM_GRACE_SECONDS = 5
TAIL_LINES = 12
TAIL_CHARS = 1500
COMMAND_CHARS = 2000  # of a command quoted in the result (its log holds all of it)


@dataclass(frozen=True)
class CommandOutcome:
    index: int
    command: str
    exit_code: int | None  # None when the command was killed for running too long
    timed_out: bool
    log_path: Path

    @property
    def passed(self) -> bool:
        return not self.timed_out and self.exit_code == 0

    def as_dict(self) -> dict[str, Any]:
        return {"index": self.index, "command": self.command, "exit_code": self.exit_code,
                "timed_out": self.timed_out, "log": str(self.log_path)}


def safe_path_part(name: str) -> str:
    """A node or run id as one folder name: ids come from agents, so no `/` or `..` escapes."""
    cleaned = re.sub(r"[^A-Za-z0-9._:-]", "_", name).lstrip(".")
    return cleaned or "_"


def _kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


class Interrupted(Exception):
    """SIGTERM or SIGINT arrived while a command ran; its process group is already killed."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum


@contextmanager
def _signals_kill_group(current: list[int]) -> Iterator[None]:
    """While a command runs, SIGTERM/SIGINT kill its process group (the pid in `current`)
    before anything else: a supervisor stopping a verifier must not leave `make test` running."""
    if threading.current_thread() is not threading.main_thread():
        yield  # handlers can only be installed from the main thread
        return

    def on_signal(signum: int, _frame: object) -> None:
        for pgid in current:
            _kill_group(pgid, signal.SIGKILL)
        raise Interrupted(signum)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_command(index: int, command: str, *, cwd: Path, log_path: Path, timeout: float,
                env: dict[str, str], state_root: Path, current: list[int] | None = None
                ) -> CommandOutcome:
    """Run one command, its output (stdout and stderr interleaved) streamed to `log_path`.
    `current` receives the command's process group id while it runs."""
    current = current if current is not None else []
    with open_inside(state_root, log_path, "wb") as log:
        log.write(f"$ {command}\n".encode())
        log.flush()
        proc = subprocess.Popen(
            ["bash", "-c", command], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        current.append(proc.pid)
        timed_out = False
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            # The whole group: `bash -c "make test"` leaves the real work in grandchildren.
            timed_out = True
            _kill_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=TERM_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                _kill_group(proc.pid, signal.SIGKILL)
                proc.wait()
        # Background leftovers of a finished command would hold ports and this log open.
        _kill_group(proc.pid, signal.SIGKILL)
        current.remove(proc.pid)
        footer = (f"[timed out after {timeout:g}s; process group killed]" if timed_out
                  else f"[exit {proc.returncode}]")
        log.write(f"\n{footer}\n".encode())
    return CommandOutcome(index, command, None if timed_out else proc.returncode, timed_out,
                          log_path)


def run_commands(commands: list[str], *, cwd: Path, log_dir: Path, timeout: float,
                 env: dict[str, str], state_root: Path) -> list[CommandOutcome]:
    """Run in order, stopping after the first command that fails or times out. Raises
    Interrupted (after killing the running command's group) on SIGTERM/SIGINT."""
    outcomes: list[CommandOutcome] = []
    current: list[int] = []
    with _signals_kill_group(current):
        for index, command in enumerate(commands, start=1):
            outcome = run_command(index, command, cwd=cwd,
                                  log_path=log_dir / f"cmd-{index}.log", timeout=timeout,
                                  env=env, state_root=state_root, current=current)
            outcomes.append(outcome)
            if not outcome.passed:
                break
    return outcomes


def _tail(path: Path) -> str:
    with path.open("rb") as handle:
        handle.seek(0, os.SEEK_END)
        handle.seek(max(0, handle.tell() - 8 * TAIL_CHARS))
        text = handle.read().decode("utf-8", errors="replace")
    return "\n".join(text.strip().splitlines()[-TAIL_LINES:])[-TAIL_CHARS:]


def _clip(command: str) -> str:
    return command if len(command) <= COMMAND_CHARS else command[:COMMAND_CHARS - 1] + "…"


def verdict(commands: list[str], outcomes: list[CommandOutcome],
            timeout: float) -> dict[str, Any]:
    """The runner result for a set of outcomes."""
    if not commands:
        return {"status": "fail", "summary": "verify node has no commands to run",
                "errors": ["no verify commands: give the node a `verify` list"]}
    failed = next((o for o in outcomes if not o.passed), None)
    if failed is None:
        return {"status": "success", "summary": f"all {len(commands)} verify commands passed",
                "errors": []}
    how = (f"timed out after {timeout:g}s" if failed.timed_out
           else f"exited {failed.exit_code}")
    shown = _clip(failed.command)  # the result's summary has a length limit
    summary = f"verify command {failed.index} of {len(commands)} {how}: {shown}"
    error = f"`{shown}` {how} (log: {failed.log_path})"
    tail = _tail(failed.log_path)
    return {"status": "fail", "summary": summary,
            "errors": [f"{error}\n{tail}" if tail else error]}


def result_line(result: dict[str, Any]) -> str:
    """The `<result>…</result>` line a runner prints, on one line."""
    return f"<result>{json.dumps(result, separators=(',', ':'))}</result>"


def _timeout_for(state: StatePaths, timeout: float | None) -> float:
    if timeout is None:
        cfg = config_mod.load(state.config)
        timeout = float(config_mod.get(cfg, "defaults.verifyTimeoutSeconds", 600))
    if not timeout > 0:  # also NaN, which would make the wait endless
        raise ClavainError(f"timeout must be a positive number of seconds, got {timeout:g}")
    return timeout


def _claim_for_verify(conn: sqlite3.Connection, node: dict[str, Any], run_id: str) -> None:
    """Hold the node for this run like any runner: refused unless it may take a result."""
    node_id = node["id"]
    if node["type"] not in VERIFY_TYPES:
        raise ClavainError(
            f"node {node_id!r} is a {node['type']} node; the shell verifier decides only verify "
            "and final_verify nodes (run its commands without recording instead)")
    check_applicable(conn, node, run_id)
    if node["lock_run_id"] == run_id:
        return  # already claimed by this run (`graph next --claim`, then `verify`)
    if claim_node(conn, node_id, run_id=run_id, pid=os.getpid()) is None:
        current = require_node(conn, node_id)
        check_applicable(conn, current, run_id)  # explains a race lost since the check
        until = current["blocked_until"]
        raise ClavainError(f"node {node_id!r} cannot be claimed now"
                           + (f" (retry backoff until {until})" if until else ""))


def _give_back(conn: sqlite3.Connection, node_id: str, run_id: str, why: str) -> None:
    """Release this run's claim without spending an attempt (a person stopped it)."""
    at = now_iso()
    with transaction(conn):
        released = conn.execute(
            "UPDATE nodes SET status = 'open', lock_run_id = NULL, lock_started_at = NULL, "
            "lock_renewed_at = NULL, lock_pid = NULL, lock_host = NULL, updated_at = ? "
            "WHERE id = ? AND lock_run_id = ? RETURNING id", (at, node_id, run_id)).fetchall()
        if released:
            record_event(conn, node_id, "in_progress", "open", at=at, run_id=run_id,
                         note=f"verifier {why}; claim released, no attempt spent")


def run_verify(conn: sqlite3.Connection, state: StatePaths, node_id: str, *, apply: bool = True,
               timeout: float | None = None, run_id: str | None = None) -> dict[str, Any]:
    """Run `node_id`'s verify commands, write the logs and `result.json`, and (with `apply`)
    claim the node first and record the result as a runner's result would be."""
    node = require_node(conn, node_id)
    commands = [str(c) for c in node.get("verify") or []]
    per_command = _timeout_for(state, timeout)
    run_id = current_run_id(run_id, prefix="verify")
    run_dir = state.runs / safe_path_part(run_id) / safe_path_part(node_id)
    env = {**os.environ, **runner_env(state, node, run_id)}
    if commands and shutil.which("bash", path=env.get("PATH", os.defpath)) is None:
        # Not a failed check: recording one would spend an attempt on a broken environment.
        raise ClavainError("bash is not on PATH; the shell verifier runs each command with "
                           "`bash -c`")
    if apply:
        _claim_for_verify(conn, node, run_id)
    try:
        outcomes = run_commands(commands, cwd=state.project, log_dir=run_dir,
                                timeout=per_command, env=env, state_root=state.root)
    except BaseException as exc:
        if apply:
            _give_back(conn, node_id, run_id, str(exc) if isinstance(exc, Interrupted)
                       else f"stopped by {type(exc).__name__}")
        raise
    result = verdict(commands, outcomes, per_command)
    result_path = run_dir / "result.json"
    write_json_atomic(result_path, result, inside=state.root)
    # The log worth reading first: the failing command's, else the last one's.
    failed = next((o for o in outcomes if not o.passed), None)
    shown = failed or (outcomes[-1] if outcomes else None)
    log = str(shown.log_path) if shown else None
    report: dict[str, Any] = {
        "node_id": node_id, "run_id": run_id, "result": result,
        "commands": [o.as_dict() for o in outcomes], "result_path": str(result_path),
        "applied": False,
    }
    if apply:
        report["apply"] = apply_result(conn, state, node_id, result, run_id=run_id,
                                       stdout_path=log, result_path=str(result_path))
        report["applied"] = True
    return report
