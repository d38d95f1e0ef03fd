"""Which run a tool call belongs to, and the limits that apply to it: asked by the hooks that
count (PreToolUse, PostToolUseFailure, SubagentStop), the supervisor, the report, `doctor` and
the status line. Stdlib only; `os.path`, never `pathlib`.

The run is the session (`session:<id>`), whichever sprint it works on, so abandoning a sprint
and starting another gives nothing back; a call from no known session (a terminal) counts
against the active sprint (`sprint:<id>`); a runner of `clavain run` counts against that run
(`run:<id>`, from CLAVAIN_BUDGET_RUN). The active sprint's complexity sets the scope."""

from __future__ import annotations

import os

CONFIG_MAX_BYTES = 1 << 20
# Set by the headless supervisor in every runner's environment: `run:<run id>`.
SUPERVISED_RUN_VARIABLE = "CLAVAIN_BUDGET_RUN"
SUPERVISED_PREFIX = "run:"


def run_context(root: str, session_id: object, supervised_run: str | None = None,
                env: dict | None = None) -> dict:
    """{"run_key", "sprint_id", "limits", "problems", "patterns"} for calls in the project whose
    state folder is `root`, now; budget variables from `env` (default: this process's)."""
    from clavain.guards import policy

    env = os.environ if env is None else env
    sprint_id, complexity = _active_sprint(root)
    settings, problems = _budget_settings(root)
    limits, more = policy.resolve(settings, env, complexity)
    session = session_id if isinstance(session_id, str) and session_id else None
    # The session's counts, whichever sprint it works on: abandoning a sprint and starting
    # another gives nothing back. Only a call from no known session (a terminal) counts
    # against the sprint itself.
    run_key = (f"session:{session[:200]}" if session else f"sprint:{sprint_id}" if sprint_id
               else "session:unknown")
    supervised = supervised_run or env.get(SUPERVISED_RUN_VARIABLE, "")
    if supervised.startswith(SUPERVISED_PREFIX) and len(supervised) <= 200:
        run_key = supervised  # a runner of `clavain run`: its calls count against that run
    return {"run_key": run_key, "sprint_id": sprint_id,
            "limits": limits, "problems": problems + more,
            "patterns": _test_patterns(limits["testPatterns"])}


def _test_patterns(extra: list[str]) -> list:
    """`budgets.testPatterns` compiled; with none, no `guards.commands` import (SubagentStop
    asks for the run's context but describes no command)."""
    if not extra:
        return []
    from clavain.guards.commands import compile_patterns

    return compile_patterns(extra)


def _active_sprint(root: str) -> tuple[str | None, object]:
    """(sprint id, complexity) from the checkpoint (`checkpoint.read_in`, the one reader); none
    when it is damaged: that is `clavain sprint`'s to report, not a budget's."""
    from clavain.sprint import checkpoint as sprint_checkpoint

    try:
        checkpoint = sprint_checkpoint.read_in(root)
    except sprint_checkpoint.DamagedCheckpoint:
        return None, None
    if checkpoint is None:
        return None, None
    return checkpoint["sprint_id"], checkpoint.get("complexity")


def _budget_settings(root: str) -> tuple[object, list[str]]:
    from clavain.fsutil import read_json_object

    problems: list[str] = []
    config = read_json_object(os.path.join(root, "config.json"), CONFIG_MAX_BYTES, problems)
    if problems:  # named, with what is done about it
        return None, [f"{problems[0]}; defaults used"]
    if config is None or "budgets" not in config:
        return None, []
    if not isinstance(config["budgets"], dict):  # `null` too, as the schema says
        return None, ["config.json: budgets must be an object; defaults used"]
    return config["budgets"], []


def counting_here(payload: dict, *, database_needed: bool = False,
                   counting_only: bool = True) -> tuple | None:
    """(project, state folder, database, run context) when budgets count in the payload's
    project, else None: no `.clavain/` folder (most projects never use Clavain), budgets
    disabled (unless not `counting_only`: the state folder's guards hold without budgets), or
    (`database_needed`) nothing counted yet. `locate`, not `paths.StatePaths`: `pathlib` alone
    would cost more than the whole check."""
    from clavain import locate
    from clavain.locate import payload_cwd

    project = locate.project_dir(payload_cwd(payload))
    root = locate.state_dir(project)
    database = locate.db_file(root)
    if not os.path.isdir(root) or (database_needed and not os.path.exists(database)):
        return None
    context = run_context(root, payload.get("session_id"))
    if counting_only and not context["limits"]["enabled"]:
        return None
    return project, root, database, context
