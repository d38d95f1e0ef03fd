"""Budgets at the hooks: which run a tool call belongs to, its limits, and the PreToolUse /
PostToolUseFailure steps the hooks (and the coming supervisor) call.

Tokens and dollars are measured from the transcripts by a detached process that a tool call
starts at most every 30 s (`usage.start_measuring`): a hook per tool call after the tool ran
cost ~20 ms of CPU per call on a two-core machine, even async. A test that passes again needs
no hook: a red record only matches while nothing has changed since it failed.

Budgets apply where Clavain keeps state (a `.clavain/` folder): no session in another project
gets a database it never asked for. The run is the active sprint (`sprint:<id>`, its complexity
setting the scope), else the session (`session:<id>`), so one session's counts never reach
another's. Stdlib only.

What a failure does to the call (a denial never turns into an allow):
- the database stays locked past HOOK_BUSY_MS (3 s): denied, "retry" (the counters cannot be
  read, and the host kills a hook at 10 s: waiting longer would let the call run);
- `.clavain/state.sqlite` is a symlink: denied, naming the fix (it would be written through,
  outside the project);
- the call cannot be recorded (read-only `.clavain/`, full disk, I/O error): it runs, with a
  warning to the person (systemMessage) and a hooks.log line; SessionStart and `doctor` say
  it too (nothing was counted, and a person must know);
- a state file is a FIFO, a device or over 1 MB: read as missing (defaults, no sprint): a
  hook must never block on it;
- any other exception (a bug of ours): it runs, and the dispatcher logs it (a broken budget
  must not stop all work).
A decision is recorded only in the transaction that returns it, so the host always receives
what was recorded.
"""

from __future__ import annotations

import os
import time

CONFIG_MAX_BYTES = 1 << 20
# How long a hook waits for another writer: well under the host's 10 s PreToolUse timeout.
HOOK_BUSY_MS = 3000
LOCKED = ("Clavain budget: the state database stayed locked for {s:g} s (another clavain process "
          "is writing), so this call could not be counted; retry it.")
SYMLINKED = ("Clavain budget: {db} is a symlink (to {target}); Clavain will not write through it. "
             "Ask the user to replace it with a real file, or to remove it.")
UNRECORDED = ("Clavain could not record this tool call ({problem}); budgets are not being "
              "counted in {root} until that is fixed.")


# Set by the headless supervisor in every runner's environment: `run:<run id>`.
SUPERVISED_RUN_VARIABLE = "CLAVAIN_BUDGET_RUN"
SUPERVISED_PREFIX = "run:"


def run_context(root: str, session_id: object, supervised_run: str | None = None) -> dict:
    """{"run_key", "limits", "problems", "patterns"} for calls in the project whose state
    folder is `root`, now."""
    from clavain.guards import commands, policy

    sprint_id, complexity = _active_sprint(root)
    settings, problems = _budget_settings(root)
    limits, more = policy.resolve(settings, os.environ, complexity)
    session = session_id if isinstance(session_id, str) and session_id else "unknown"
    run_key = f"sprint:{sprint_id}" if sprint_id else f"session:{session[:200]}"
    supervised = supervised_run or os.environ.get(SUPERVISED_RUN_VARIABLE, "")
    if supervised.startswith(SUPERVISED_PREFIX) and len(supervised) <= 200:
        run_key = supervised  # a runner of `clavain run`: its calls count against that run
    return {"run_key": run_key,
            "limits": limits, "problems": problems + more,
            "patterns": commands.compile_patterns(limits["testPatterns"])}


def _read_json(path: str) -> object:
    """A JSON file of the state folder; None when missing or not a regular file of at most
    CONFIG_MAX_BYTES (a FIFO or a hung device never blocks the hook: non-blocking open, no
    symlink followed); raises when unreadable."""
    from clavain import fastjson

    flags = (os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
             | getattr(os, "O_CLOEXEC", 0))
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError as exc:
        import errno  # built in: free

        if exc.errno in (errno.ELOOP, errno.ENXIO):  # a symlink; a FIFO's other end
            return None
        raise
    try:
        import stat

        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > CONFIG_MAX_BYTES:
            return None
        raw = os.read(fd, CONFIG_MAX_BYTES + 1)
    finally:
        os.close(fd)
    return fastjson.loads(raw.decode("utf-8"))


def _active_sprint(root: str) -> tuple[str | None, object]:
    """(sprint id, complexity) from the checkpoint, read without its schema check (this runs on
    every tool call; a damaged checkpoint is `clavain sprint`'s to report, not a budget's)."""
    try:
        checkpoint = _read_json(os.path.join(root, "checkpoint.json"))
    except (OSError, ValueError, RecursionError):
        return None, None
    if not isinstance(checkpoint, dict) or not isinstance(checkpoint.get("sprint_id"), str):
        return None, None
    return checkpoint["sprint_id"], checkpoint.get("complexity")


def _budget_settings(root: str) -> tuple[object, list[str]]:
    path = os.path.join(root, "config.json")
    try:
        config = _read_json(path)
    except (OSError, ValueError, RecursionError) as exc:
        return None, [f"{path} is unreadable ({type(exc).__name__}); defaults used"]
    if config is not None and not isinstance(config, dict):
        return None, [f"{path} is not a JSON object; budget defaults used"]
    if config is None or "budgets" not in config:
        return None, []
    if not isinstance(config["budgets"], dict):  # `null` too, as the schema says
        return None, ["config.json: budgets must be an object; defaults used"]
    return config["budgets"], []


def pre_tool_use(payload: dict) -> dict | None:
    """The hook's output for one tool call: a denial, a warning in context, or None."""
    from clavain.guards import budget
    from clavain.hooks import launcher_started

    started = launcher_started() or time.perf_counter()
    tool = payload.get("tool_name")
    if tool not in budget.COUNTED_TOOLS:
        return None
    where = _counting_here(payload)
    if where is None:
        return None
    project, root, database, context = where
    call = budget.describe(tool, payload.get("tool_input"), context["patterns"],
                           os.path.join(root, "config.json"))
    from clavain.store.db import sqlite3  # the C driver: no `datetime` on every tool call

    refused = _unsafe_database(database)
    if refused:
        return _deny(refused)
    try:
        conn = _open_database(database)
        try:
            result = budget.check(conn, run_key=context["run_key"],
                                  session_id=_text(payload.get("session_id")), call=call,
                                  limits=context["limits"], problems=context["problems"],
                                  started=started, tool_use_id=_text(payload.get("tool_use_id")),
                                  transcript=_text(payload.get("transcript_path")))
        finally:
            conn.close()
    except (sqlite3.DatabaseError, OSError) as exc:  # locked, read-only, full, corrupt
        return _not_counted(exc, root, payload, database, call, context)
    transcript = _text(payload.get("transcript_path"))
    if result["measure"] and transcript and not context["run_key"].startswith(SUPERVISED_PREFIX):
        # A supervised run's tokens come from its runners' own reports (the supervisor).
        _start_measuring(project, context["run_key"], transcript, payload)
    if result["decision"] == "deny":
        return _deny(result["reason"])
    if result["decision"] == "warn":
        return {"hookSpecificOutput": {"hookEventName": "PreToolUse",
                                       "additionalContext": result["reason"]}}
    return None


def _deny(reason: str) -> dict:
    return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                   "permissionDecisionReason": reason}}


def _open_database(path: str):
    """The state database for one call, waiting at most HOOK_BUSY_MS for another writer."""
    from clavain.store import db

    return db.connect(path, busy_timeout_ms=HOOK_BUSY_MS)


def _unsafe_database(path: str) -> str | None:
    """Why the database must not be opened (a symlink: it would be written through), or None."""
    try:
        target = os.readlink(path)
    except OSError:  # missing (created on first count) or not a symlink
        return None
    return SYMLINKED.format(db=path, target=target)


def _not_counted(exc: Exception, root: str, payload: dict, database: str, call: dict,
                 context: dict) -> dict:
    """A call the database refused to record. Locked past the bound: denied (the counters are
    unknown). Otherwise (read-only, full disk, I/O, a damaged file): denied if what can still be
    read says a budget is spent; else it runs, and the person is told."""
    from clavain.hooks import log_failure

    message = str(exc)
    if "locked" in message or "busy" in message:
        return _deny(LOCKED.format(s=HOOK_BUSY_MS / 1000))
    spent = _spent_when_unwritable(database, call, context)
    if spent:
        return _deny(spent)
    warning = UNRECORDED.format(problem=message, root=root)
    log_failure("PreToolUse", warning, payload)
    import sys

    print(warning, file=sys.stderr)
    return {"systemMessage": warning}


def _spent_when_unwritable(database: str, call: dict, context: dict) -> str | None:
    """The denial the run's counters still call for, read without writing (None when they
    cannot be read either, or nothing is spent)."""
    from clavain.guards import budget
    from clavain.store import db

    try:
        conn = db.connect_readonly(database, timeout_ms=HOOK_BUSY_MS)
        try:
            run = conn.execute("SELECT * FROM budget_runs WHERE run_key = ?",
                               (context["run_key"],)).fetchone()
            return budget.refusal(conn, run, call, context["limits"], time.time()) \
                if run is not None else None
        finally:
            conn.close()
    except (db.sqlite3.DatabaseError, OSError):
        return None


def _counting_here(payload: dict, *, database_needed: bool = False) -> tuple | None:
    """(project, state folder, database, run context) when budgets count in the payload's
    project, else None: no `.clavain/` folder (most projects never use Clavain), budgets
    disabled, or (`database_needed`) nothing counted yet. `locate`, not `paths.StatePaths`:
    `pathlib` alone would cost more than the whole check."""
    from clavain import locate
    from clavain.hooks import payload_cwd

    project = locate.project_dir(payload_cwd(payload))
    root = locate.state_dir(project)
    database = locate.db_file(root)
    if not os.path.isdir(root) or (database_needed and not os.path.exists(database)):
        return None
    context = run_context(root, payload.get("session_id"))
    return (project, root, database, context) if context["limits"]["enabled"] else None


def _start_measuring(project: str, run_key: str, transcript: str, payload: dict) -> None:
    """Start the background measurement; a failure to start it is logged, and never costs the
    decision already taken (a deny must reach the host)."""
    try:
        from clavain.guards.usage import start_measuring

        start_measuring(project, run_key, transcript)
    except Exception as exc:
        from clavain.hooks import log_failure

        log_failure("PreToolUse", f"usage measurement not started: {type(exc).__name__}: {exc}",
                    payload)


def post_tool_use_failure(payload: dict) -> None:
    """After a call failed (async: the model is not waiting): a test command is remembered red,
    so running it again with nothing changed is caught; a failed edit is marked, so it never
    counts as a patch applied. An interrupted or timed-out run says nothing about the tests."""
    from clavain.guards import budget

    tool = payload.get("tool_name")
    error = payload.get("error")
    if tool not in ("Bash", *budget.EDIT_TOOLS) or payload.get("is_interrupt") or (
            isinstance(error, str) and "timed out" in error.lower()):
        return
    where = _counting_here(payload, database_needed=True)
    if where is None:
        return
    _, _, database, context = where
    if _unsafe_database(database):
        return
    call = budget.describe(tool, payload.get("tool_input"), context["patterns"])
    conn = _open_database(database)
    try:
        budget.record_failure(conn, run_key=context["run_key"], call=call,
                              tool_use_id=_text(payload.get("tool_use_id")))
    finally:
        conn.close()


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
