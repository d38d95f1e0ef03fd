"""Budgets at the hooks: which run a tool call belongs to, its limits, and the PreToolUse /
PostToolUseFailure steps the hooks (and the coming supervisor) call.

Tokens and dollars are measured from the transcripts by a detached process that a tool call
starts at most every 30 s (`usage.start_measuring`): a hook per tool call after the tool ran
cost ~20 ms of CPU per call on a two-core machine, even async. A test that passes again needs
no hook: a red record only matches while nothing has changed since it failed.

Budgets apply where Clavain keeps state (a `.clavain/` folder): no session in another project
gets a database it never asked for. The run is the active sprint (`sprint:<id>`, its complexity
setting the scope), else the session (`session:<id>`), so one session's counts never reach
another's. Anything that goes wrong is raised to the hook dispatcher, which logs it and lets
the tool run: a broken budget never blocks work. Stdlib only.
"""

from __future__ import annotations

import os
import time

CONFIG_MAX_BYTES = 1 << 20


def run_context(root: str, session_id: object) -> dict:
    """{"run_key", "limits", "problems", "patterns"} for calls in the project whose state
    folder is `root`, now."""
    from clavain.guards import commands, policy

    sprint_id, complexity = _active_sprint(root)
    settings, problems = _budget_settings(root)
    limits, more = policy.resolve(settings, os.environ, complexity)
    session = session_id if isinstance(session_id, str) and session_id else "unknown"
    return {"run_key": f"sprint:{sprint_id}" if sprint_id else f"session:{session[:200]}",
            "limits": limits, "problems": problems + more,
            "patterns": commands.compile_patterns(limits["testPatterns"])}


def _read_json(path: str) -> object:
    """A JSON file of the state folder; None when missing; raises when unreadable."""
    from clavain import fastjson

    try:
        with open(path, "rb") as handle:
            return fastjson.loads(handle.read(CONFIG_MAX_BYTES).decode("utf-8"))
    except FileNotFoundError:
        return None


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
    budgets = config.get("budgets") if isinstance(config, dict) else None
    if budgets is not None and not isinstance(budgets, dict):
        return None, ["config.json: budgets must be an object; defaults used"]
    return budgets, []


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
    from clavain.hooks.connections import close_database, open_database

    conn = open_database(database)
    try:
        result = budget.check(conn, run_key=context["run_key"],
                              session_id=_text(payload.get("session_id")), call=call,
                              limits=context["limits"], problems=context["problems"],
                              started=started, tool_use_id=_text(payload.get("tool_use_id")),
                              transcript=_text(payload.get("transcript_path")))
    finally:
        close_database(conn)
    transcript = _text(payload.get("transcript_path"))
    if result["measure"] and transcript:
        _start_measuring(project, context["run_key"], transcript, payload)
    if result["decision"] == "deny":
        return {"hookSpecificOutput": {"hookEventName": "PreToolUse",
                                       "permissionDecision": "deny",
                                       "permissionDecisionReason": result["reason"]}}
    if result["decision"] == "warn":
        return {"hookSpecificOutput": {"hookEventName": "PreToolUse",
                                       "additionalContext": result["reason"]}}
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
    from clavain.hooks.connections import close_database, open_database

    call = budget.describe(tool, payload.get("tool_input"), context["patterns"])
    conn = open_database(database)
    try:
        budget.record_failure(conn, run_key=context["run_key"], call=call,
                              tool_use_id=_text(payload.get("tool_use_id")))
    finally:
        close_database(conn)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
