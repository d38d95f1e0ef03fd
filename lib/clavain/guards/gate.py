"""Budgets at the hooks: the PreToolUse step (which run a call counts against, and its limits,
are `guards.counting`'s; PostToolUseFailure borrows the hook's open and its text check).

Tokens and dollars are measured from the transcripts by a detached process that a tool call
starts at most every 30 s (`usage.start_measuring`): a hook per tool call after the tool ran
cost ~20 ms of CPU per call on a two-core machine, even async. A test that passes again needs
no hook: a red record only matches while nothing has changed since it failed.

Budgets apply where Clavain keeps state (a `.clavain/` folder): no session in another project
gets a database it never asked for. The run behind each sprint is remembered
(`budget_sprints`: a sprint's summary finds its run by it). One session's counts never reach
another's. Stdlib only.

What a failure does to the call (a denial never turns into an allow):
- the database stays locked past HOOK_BUSY_MS (3 s): denied, "retry" (the counters cannot be
  read, and the host kills a hook at 10 s: waiting longer would let the call run);
- `.clavain/state.sqlite` (or its -wal, -shm, -journal) is a symlink, a FIFO or a device
  (`store.db.unsafe_database`, checked without blocking by `db.connect` before it opens):
  denied, naming the file and the fix
  (a symlink would be written through, outside the project; a FIFO's open would block past
  the host's timeout, and the call would run uncounted);
- the call cannot be recorded (read-only `.clavain/`, full disk, I/O error): the counters are
  still read (`db.connect_readonly`, immutable when the -shm cannot be made) and a spent
  budget is denied; otherwise it runs, with a warning to the person (systemMessage) and a
  hooks.log line; SessionStart and `doctor` say it too (nothing was counted, and a person
  must know);
- config.json or checkpoint.json is a symlink, a FIFO, a device or over 1 MB: never blocked
  on (`fsutil.read_state_file`), read as missing (defaults, no sprint), and a broken config
  is named once per run in the budget warning;
- a record of what the person typed is pending for the session and cannot be voided (the
  database locked, damaged or unwritable): denied, since this call could take it
  (`sprint.typed_once`);
- a call that starts subagents (Agent/Task/Workflow) reserves its projected cost in the same
  transaction as its count (`guards.fanout`): whatever stops the transaction — a full or
  read-only disk, a damaged file, a bug of ours — denies it (`UNRESERVED`), and a
  reservation never released (no SubagentStop, a crash) only over-counts until `clavain budget
  reset`; the 5-hour window's denial (`guards.window`) is a standing one; a window check that
  raises is logged and the budget's own check decides;
- any other exception (a bug of ours): a call that needs no counters to be refused (the state
  folder, Claude Code's settings, a person's decision: `budget.standing_refusal`, decided
  before anything else can fail) is still denied; any other runs, and the dispatcher logs it
  (a broken budget must not stop all work).
A decision is recorded only in the transaction that returns it, so the host always receives
what was recorded.
"""

from __future__ import annotations

import os
import time

from clavain.guards.counting import SUPERVISED_PREFIX, counting_here

# How long a hook waits for another writer: well under the host's 10 s PreToolUse timeout.
HOOK_BUSY_MS = 3000
LOCKED = ("Clavain budget: the state database stayed locked for {s:g} s (another clavain process "
          "is writing), so this call could not be counted; retry it.")
UNSAFE = ("Clavain budget: {problem}. This call is denied: its counters cannot be read. Ask the "
          "user to fix it.")
NOT_VOIDED = ("Clavain could not void the record of what the user typed in this session "
              "({problem}), so this call is denied: a record is good only for the turn that "
              "typed it. Retry the call; if this repeats, ask the user to run `clavain doctor`.")
UNRESERVED = ("Clavain budget: this call would start subagents, and their projected cost could "
              "not be reserved ({problem}), so it is denied: a fan-out never runs uncounted. "
              "Go on without it; if this repeats, ask the user to run `clavain doctor`.")
UNRECORDED = ("Clavain could not record this tool call ({problem}); budgets are not being "
              "counted in {root} until that is fixed.")


def pre_tool_use(payload: dict) -> dict | None:
    """The hook's output for one tool call: a denial, a warning in context, or None."""
    from clavain.guards import budget
    from clavain.locate import payload_cwd

    started = time.perf_counter()  # `_counted` prefers the launcher's start when it is known
    not_voided = _void_typed_records(payload)
    if not_voided is not None:
        return not_voided
    tool = payload.get("tool_name")
    if tool not in budget.COUNTED_TOOLS:
        return None
    where = counting_here(payload, counting_only=False)
    if where is None:
        return None
    project, root, database, context = where
    # Where the call's writes land is judged from the folder it runs in (`guards.landing`).
    call = budget.describe(tool, payload.get("tool_input"), context["patterns"],
                           os.path.join(root, "config.json"), cwd=payload_cwd(payload),
                           project=project)
    # Decided once, before anything that can fail: a denial that needs no counters (the state
    # folder, the settings, a person's decision, the 5-hour window) holds whatever goes wrong
    # after it.
    # Budgets off: nothing is counted, and the state folder is still guarded.
    standing = budget.standing_refusal(call)
    try:
        if call["kind"] == "agent" or payload.get("agent_id"):  # a subagent starts, or works
            _fan_out_facts(payload, call, project, root, context)
            standing = standing or budget.standing_refusal(call)
        decided = _counted(payload, project, root, database, context, call, started,
                           standing) if context["limits"]["enabled"] else None
    except Exception as exc:
        if standing:
            decided = None
        elif call["kind"] == "agent" and context["limits"]["enabled"]:
            # A fan-out whose cost could not be reserved never runs uncounted.
            return _deny(UNRESERVED.format(problem=f"{type(exc).__name__}: {exc}"))
        else:
            raise
    if standing and not _denies(decided):
        return _deny(standing)
    return decided


def _fan_out_facts(payload: dict, call: dict, project: str, root: str, context: dict) -> None:
    """What `guards.fanout` decides on, read before the transaction: the subagent a call comes
    from (the host's `agent_id`: only inside a subagent) and its transcript; what a call that
    starts subagents would start; the 5-hour window's denial (a standing one: it needs no
    counters)."""
    agent_id = _text(payload.get("agent_id"))
    if agent_id:
        from clavain.guards.agents import agent_transcript

        call.update(agent_id=agent_id[:200], agent_type=_text(payload.get("agent_type")),
                    agent_file=agent_transcript(_text(payload.get("transcript_path")),
                                                agent_id))
    if call["kind"] != "agent" or not context["limits"]["enabled"]:
        return
    from clavain.guards import fanout

    call["fanout"] = fanout.shape(call["tool"], payload.get("tool_input"), project)
    try:
        from clavain.guards.window import share_denial

        call["refusal"] = call["refusal"] or share_denial(root, context["limits"], time.time())
    except Exception as exc:  # a bug of ours: the budget's own check still holds
        from clavain.hook_log import log_failure

        log_failure("PreToolUse", f"window share not checked: {type(exc).__name__}: {exc}",
                    payload)


def _void_typed_records(payload: dict) -> dict | None:
    """A tool call ends the turn's chance to take what the person typed (`sprint.typed_once`):
    the session's records are voided before the call runs, budgets on or off. One listdir when
    there is none. A denial when one could not be voided (fail closed: this call could take
    it)."""
    session = payload.get("session_id")
    if not isinstance(session, str) or not session:
        return None
    from clavain import locate
    from clavain.locate import payload_cwd

    # Where the budget check looks too (if this raises, so does it: the dispatcher logs it),
    # and the session's own project, where the person's slash command recorded it: a call
    # run from a folder with a `.clavain/` of its own still ends the turn there.
    roots = [locate.state_dir(locate.project_dir(payload_cwd(payload)))]
    session_project = os.environ.get("CLAUDE_PROJECT_DIR")
    if session_project and os.path.isabs(session_project):
        other = locate.state_dir(locate.project_dir(session_project))
        if other != roots[0]:
            roots.append(other)
    for root in roots:
        denied = _void_in(root, session, payload)
        if denied is not None:
            return denied
    return None


def _void_in(root: str, session: str, payload: dict) -> dict | None:
    from clavain import locate

    try:
        listed: list[str] | None = os.listdir(os.path.join(root, locate.TYPED_DIR_NAME))
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError:  # unreadable: a record may still be opened by name
        listed = None
    if listed is not None and not any(name.endswith(locate.typed_record("", session))
                                      for name in listed):
        return None  # the common call: no module imported, no database opened
    from clavain.hook_log import log_failure
    from clavain.sprint import typed_once

    names = typed_once.pending(root, session, listed)
    if not names:
        return None
    try:
        problem, stuck = typed_once.void_session(root, locate.db_file(root), session, names,
                                                 payload.get("tool_name"), HOOK_BUSY_MS)
    except Exception as exc:  # a record was there and may not be void: fail closed
        problem, stuck = f"{type(exc).__name__}: {exc}", []
    if stuck or problem:
        log_failure("PreToolUse", f"typed record not voided: {problem or 'rows voided'}; "
                    f"not removed: {', '.join(stuck) or 'none'}", payload)
    return _deny(NOT_VOIDED.format(problem=problem)) if problem else None


def _denies(decided: dict | None) -> bool:
    return bool(decided) and decided.get("hookSpecificOutput", {}).get(
        "permissionDecision") == "deny"


def _counted(payload: dict, project: str, root: str, database: str, context: dict, call: dict,
             started: float, standing: str | None) -> dict | None:
    """The call counted against the run's budgets and loop guards: its decision."""
    from clavain.clock import launcher_started  # budget.check imports `clock` anyway
    from clavain.fsutil import UnsafePathError
    from clavain.guards import budget
    from clavain.store.db import sqlite3  # the C driver: no `datetime` on every tool call

    started = launcher_started() or started
    try:
        conn = _open_database(database)  # it refuses a FIFO, a device or a symlink itself
        try:
            result = budget.check(conn, run_key=context["run_key"],
                                  session_id=_text(payload.get("session_id")), call=call,
                                  sprint_id=context["sprint_id"],
                                  limits=context["limits"], problems=context["problems"],
                                  started=started, tool_use_id=_text(payload.get("tool_use_id")),
                                  transcript=_text(payload.get("transcript_path")))
        finally:
            conn.close()
    except UnsafePathError as exc:  # never opened: denied, whatever the call
        return _deny(UNSAFE.format(problem=str(exc).rstrip(".")))
    except (sqlite3.DatabaseError, OSError) as exc:  # locked, read-only, full, corrupt
        if standing:  # a broken database: no warning for a call denied anyway
            return _deny(standing)
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


def _not_counted(exc: Exception, root: str, payload: dict, database: str, call: dict,
                 context: dict) -> dict:
    """A call the database refused to record. Locked past the bound: denied (the counters are
    unknown). Otherwise (read-only, full disk, I/O, a damaged file): denied if what can still be
    read says a budget is spent; else it runs, and the person is told."""
    from clavain.hook_log import log_failure

    message = str(exc)
    if "locked" in message or "busy" in message:
        return _deny(LOCKED.format(s=HOOK_BUSY_MS / 1000))
    spent = _spent_when_unwritable(database, call, context)
    if spent:
        return _deny(spent)
    from clavain.store import health  # only now that something failed: the one judgement

    judged = health.judge(exc, database)
    if judged is not None:
        message = judged.line
    if call["kind"] == "agent":
        return _deny(UNRESERVED.format(problem=message))
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


def _start_measuring(project: str, run_key: str, transcript: str, payload: dict) -> None:
    """Start the background measurement; a failure to start it is logged, and never costs the
    decision already taken (a deny must reach the host)."""
    try:
        from clavain.guards.usage import start_measuring

        start_measuring(project, run_key, transcript)
    except Exception as exc:
        from clavain.hook_log import log_failure

        log_failure("PreToolUse", f"usage measurement not started: {type(exc).__name__}: {exc}",
                    payload)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
