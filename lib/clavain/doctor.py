"""`clavain doctor`: what this installation has, as rows of check / status / detail."""

from __future__ import annotations

import os
import platform
import sys
from importlib import metadata
from typing import Any

from clavain import __version__, bootstrap
from clavain.claude_bin import find_claude
from clavain.paths import (
    StatePaths,
    claude_config_dir,
    install_kind,
    plugin_data_dir,
    plugin_root,
)
from clavain.store import db

OK, WARN, FAIL = "ok", "warn", "fail"

# What the CLI names under the plugin root (guides, commands, agents, schemas).
PLUGIN_FOLDERS = ("skills", "commands", "agents", "schemas")
INSTALL_KINDS = {
    "clone": "a clone: editable install or bin/clavain",
    "export": "the plugin's files exported for Claude Code (scripts/install-plugin.sh)",
    "plugin": "Claude Code's plugin install",
    "package": "a pip-installed package: skills, commands and agents inside it, no hooks",
}


def _row(check: str, status: str, detail: str, **extra: Any) -> dict[str, Any]:
    return {"check": check, "status": status, "detail": detail, **extra}


def _python() -> dict[str, Any]:
    version = platform.python_version()
    status = OK if sys.version_info >= (3, 10) else FAIL
    fix = "" if status == OK else ": Clavain needs 3.10 or newer; point CLAVAIN_PYTHON at one"
    return _row("python", status, f"{version} at {sys.executable}{fix}",
                executable=sys.executable)


def _venv() -> dict[str, Any]:
    data_dir = plugin_data_dir()
    if data_dir is None:
        if install_kind(plugin_root()) in ("plugin", "export"):
            return _terminal_venv()
        # Outside a session nothing names the plugin's venv, and none is needed: this
        # interpreter runs Clavain with its own packages (the dependencies row checks them).
        return _row("venv", OK, f"runs on {sys.executable} and its packages; the plugin's "
                    "own venv is made by its first Claude Code session", python=sys.executable)
    python = bootstrap.venv_python(data_dir)
    if bootstrap.is_ready(data_dir):
        return _row("venv", OK, f"ready at {python.parent.parent}", python=str(python))
    problem = bootstrap.failure(data_dir)
    if problem:
        return _row("venv", FAIL, f"install failed: {problem}; fix that (often the network "
                    "or a Python without venv support), then start a new session: it tries "
                    "again")
    return _row("venv", WARN, f"not ready yet at {python.parent.parent}: the session's first "
                "start is installing it; wait a minute and run doctor again")


def _terminal_venv() -> dict[str, Any]:
    """The plugin's files run from a terminal, outside any session: its venv is in Claude
    Code's data folder once a session built it."""
    ready = bootstrap.plugin_venvs(claude_config_dir())
    if ready:
        return _row("venv", OK, f"the plugin's venv is ready at {ready[0]} (outside a "
                    f"session: CLAVAIN_PYTHON={ready[0] / 'bin' / 'python'})",
                    python=str(ready[0] / "bin" / "python"))
    return _row("venv", WARN, f"none yet: {bootstrap.start_a_session(claude_config_dir())}")


def _dependencies() -> dict[str, Any]:
    found, missing = {}, []
    for name in ("pydantic", "jsonschema", "filelock"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            missing.append(name)
    detail = ", ".join(f"{k} {v}" for k, v in found.items())
    if missing:
        fix = bootstrap.install_fix(install_kind(plugin_root()), claude_config_dir())
        return _row("dependencies", FAIL, f"{sys.executable} lacks {', '.join(missing)}: {fix}",
                    versions=found)
    return _row("dependencies", OK, detail, versions=found)


def _claude() -> dict[str, Any]:
    binary = find_claude()
    named = os.environ.get("CLAVAIN_CLAUDE_BIN")
    if binary is None and named:
        return _row("claude", WARN, f"CLAVAIN_CLAUDE_BIN names {named}, which is not an "
                    "executable: point it at the claude binary, or unset it")
    if binary is None:
        # Only the plugin and `--runner claude` need it; the shell runner and the CLI do not.
        return _row("claude", OK, "not installed (needed only for the plugin and "
                    "`--runner claude`: install Claude Code, or set CLAVAIN_CLAUDE_BIN)")
    return _row("claude", OK, str(binary), path=str(binary))


def _plugin_root() -> dict[str, Any]:
    root = plugin_root()
    kind = install_kind(root)
    missing = [name for name in PLUGIN_FOLDERS if not (root / name).is_dir()]
    if kind == "unknown" or missing:
        return _row("plugin_root", WARN, f"{root} lacks {', '.join(missing) or 'the manifest'}"
                    ": reinstall Clavain (`pip install` of a clone, or the plugin)",
                    path=str(root), install=kind, missing=missing)
    return _row("plugin_root", OK, f"{root} ({INSTALL_KINDS[kind]})", path=str(root),
                install=kind)


def _state(state: StatePaths) -> dict[str, Any]:
    if not state.root.exists():
        # Normal before the first use: nothing to fix, only what will create it.
        return _row("state_dir", OK, f"none yet at {state.root} (`clavain init` or the "
                    "first command that stores anything creates it)", path=str(state.root))
    from clavain.store import health

    if os.access(state.root, os.W_OK):
        return _row("state_dir", OK, str(state.root), path=str(state.root))
    return _row("state_dir", FAIL, health.make(health.READ_ONLY, str(state.db)).line,
                path=str(state.root), state=health.READ_ONLY)


def _authority(state: StatePaths) -> dict[str, Any]:
    """Whether the sandbox enforces a person's decisions here (hard mode), or they hold only
    against shortcuts (best effort), with what is missing and how to install it. A warning
    where something is to do: a package to install, or a project set up without a person's
    `init`; not for a person's own decision, nor before any `init`."""
    from clavain import hard_mode

    found = hard_mode.status(state.project, state.root)
    settled = found["mode"] == hard_mode.HARD or found.get("why") == "person" or (
        found.get("why") == "not_on" and not state.root.exists())
    status = OK if settled else WARN
    return _row("authority", status, f"{found['mode']}: {found['detail']}", mode=found["mode"])


def _config(state: StatePaths) -> dict[str, Any]:
    from clavain import config
    from clavain.errors import ClavainError

    if not state.config.exists():
        return _row("config", OK, "no .clavain/config.json (built-in defaults)")
    try:
        config.load(state.config)
    except ClavainError as exc:
        listed = str(exc).replace(" problems:\n  ", " problems: ").replace("\n  ", "; ")
        return _row("config", FAIL, f"{listed} (fix the file, or remove it for the defaults)",
                    path=str(state.config))
    return _row("config", OK, f"{state.config} matches schemas/config.schema.json",
                path=str(state.config))


def _budgets(state: StatePaths) -> dict[str, Any]:
    """The budgets that apply here as PreToolUse reads them (`budgets` in the config and the
    CLAVAIN_BUDGET_* variables), or what is wrong with their settings: a misspelled key or a
    bad value is never a silent default."""
    from clavain.guards.budget import BUDGETS, amount
    from clavain.guards.counting import run_context

    context = run_context(str(state.root), None)
    limits, problems = context["limits"], context["problems"]
    if problems:
        return _row("budgets", FAIL, "; ".join(problems) + " (fix .clavain/config.json "
                    "`budgets` or the CLAVAIN_BUDGET_* variable)", problems=problems)
    if not limits["enabled"]:
        return _row("budgets", OK, "off (budgets.enabled is false)", problems=[])
    shown = ", ".join(f"{label.lower()} {amount(limits[key])}" for _, key, label in BUDGETS)
    return _row("budgets", OK, f"{limits['profile']}/{limits['scope']}: {shown}", problems=[],
                limits={key: limits[key] for _, key, _ in BUDGETS})


def _schema(state: StatePaths) -> dict[str, Any]:
    latest = db.latest_version()
    current = db.schema_version(state.db)
    if current is None:
        return _row("schema", OK, f"no database yet (will be created at version {latest})",
                    version=None, latest=latest)
    status = OK if current <= latest else FAIL
    note = "" if current == latest else (
        " (migrates on next use)" if current < latest else " (newer than this Clavain)")
    return _row("schema", status, f"version {current} of {latest}{note}",
                version=current, latest=latest)


def _database(state: StatePaths) -> dict[str, Any]:
    """The project's SQLite file checked page by page (bounded in time): a damaged file is
    named with the fix before a run claims anything in it."""
    from clavain.store import health

    if not state.db.exists():
        return _row("database", OK, "no database yet")
    judged = health.judge_path(state.db)  # the one judgement every command gives
    if judged.kind != health.HEALTHY:
        return _row("database", FAIL, judged.line, path=str(state.db), state=judged.kind)
    return _row("database", WARN if judged.cause else OK,
                f"{state.db}: {judged.cause or 'integrity ok'}", path=str(state.db),
                state=judged.kind)


def _git_leftovers(state: StatePaths) -> dict[str, Any]:
    """What crashed runs left in git (worktrees, branches): the next `clavain run` removes the
    worktrees and merged branches; unmerged branches hold work found nowhere else."""
    from clavain.errors import ClavainError
    from clavain.supervisor import run_record, worktrees

    try:
        found = worktrees.leftovers(state.project, state.root,
                                    live=run_record.live_runs(state),
                                    kept=run_record.kept_branches(state))
    except (ClavainError, OSError):
        return _row("git", OK, "not a git repository (or no git): nothing left by runs")
    removable = found["worktrees"] + found["branches"]
    parts = []
    if removable:
        parts.append(f"{len(removable)} left by crashed runs ({', '.join(removable[:3])}"
                     + (" …" if len(removable) > 3 else "") + "): the next `clavain run` "
                     "removes them")
    if found["kept"]:
        parts.append("run branch(es) kept with work found nowhere else (a conflict, a busy "
                     f"tree): {', '.join(found['kept'][:3])}"
                     + (" …" if len(found["kept"]) > 3 else "")
                     + " (merge it, or `git branch -D` it)")
    status = WARN if removable else OK
    return _row("git", status, "; ".join(parts) or "no run branches or worktrees left behind",
                **found)


def _store(state: StatePaths) -> dict[str, Any]:
    """Where the workgraph is: the project's SQLite file, or a team's PostgreSQL server with its
    version and schema version; an unreachable server or an old schema is one line with the fix."""
    from clavain.errors import ClavainError
    from clavain.store import graph_db

    try:
        facts = graph_db.describe(state)
    except ClavainError as exc:
        return _row("store", FAIL, str(exc), backend="postgresql")
    if facts["backend"] == "sqlite":
        chosen = "the default" if facts["default"] else "CLAVAIN_DB"
        return _row("store", OK, f"sqlite: {facts['where']} ({chosen})", **facts)
    have, latest = facts["schema_version"], facts["latest"]
    status, note = OK, ""
    if have < latest:
        note = (" — not set up yet: `clavain db migrate` creates the schema" if have == 0
                else " — older than this Clavain: `clavain db migrate` brings it up to date")
    elif have > latest:
        status, note = FAIL, " — newer than this Clavain: upgrade Clavain on this machine"
    return _row("store", status, f"postgresql {facts['server_version']} at {facts['where']}, "
                f"schema version {have} of {latest}{note}", **facts)


def _hook_cost(state: StatePaths) -> dict[str, Any]:
    """What the PreToolUse hook costs here: its time per call as each call recorded it (from
    bin/clavain-hook's start to the decision), over the last 500 calls."""
    version = db.schema_version(state.db)
    if version is None or version < 3:
        return _row("hook_cost", OK, "no tool call counted yet")
    conn = db.connect_readonly(state.db)
    try:
        times = sorted(row[0] for row in conn.execute(
            "SELECT hook_ms FROM (SELECT hook_ms FROM budget_calls WHERE hook_ms IS NOT NULL "
            "ORDER BY id DESC LIMIT 500)"))
    finally:
        conn.close()
    if not times:
        return _row("hook_cost", OK, "no tool call counted yet")
    from clavain.guards.report import quantile

    p50, p95 = quantile(times, 0.5), quantile(times, 0.95)
    return _row("hook_cost", OK, f"PreToolUse p50 {p50:.1f} ms, p95 {p95:.1f} ms over "
                f"{len(times)} calls (from the hook launcher's start; bash's own ~2 ms "
                "before it not included)",
                p50_ms=p50, p95_ms=p95, calls=len(times))


def _sprint(state: StatePaths) -> dict[str, Any]:
    """The sprint checkpoint: readable, damaged (with the fix), and damaged ones set aside."""
    from clavain.sprint import checkpoint

    kept = checkpoint.set_aside_files(state)
    aside = f"; {len(kept)} damaged checkpoint(s) set aside ({kept[-1]})" if kept else ""
    try:
        active = checkpoint.read(state)
    except checkpoint.DamagedCheckpoint as exc:
        return _row("sprint", FAIL, f"{exc}", set_aside=kept)
    if active is None:
        return _row("sprint", OK, f"no active sprint{aside}", set_aside=kept)
    return _row("sprint", OK, f"{active['sprint_id']} at step {active['current_step']}{aside}",
                sprint_id=active["sprint_id"], set_aside=kept)


def _state_links(state: StatePaths) -> dict[str, Any]:
    """A state file with a second name (a hard link) is changed through it unseen by the
    PreToolUse hook, which then refuses every change: each such file and its other names in
    the project, with the fix."""
    from clavain.guards.landing import linked_state_files, other_names

    linked = linked_state_files(str(state.root))
    if not linked:
        return _row("state_links", OK, "no state file has a second name (hard link)")
    named = []
    for path, count in linked:
        others = other_names(path, str(state.project))
        where = ", ".join(others[:3]) if others else "outside the project"
        named.append(f"{path} has {count} links (other: {where})")
    return _row("state_links", FAIL, "; ".join(named) + ": remove the other link (`rm` it); "
                "until then the hook refuses every change", files=[p for p, _ in linked])


def run(state: StatePaths | None = None) -> dict[str, Any]:
    state = state or StatePaths.discover()
    checks = [_python(), _venv(), _dependencies(), _claude(), _plugin_root(), _state(state),
              _authority(state), _config(state), _budgets(state)]
    # What reads the project's files: one that fails is its own failed row, never the end of
    # the report (a damaged database must not hide what else is wrong).
    for name, check in (("schema", _schema), ("database", _database), ("store", _store),
                        ("sprint", _sprint), ("git", _git_leftovers), ("hook_cost", _hook_cost),
                        ("state_links", _state_links)):
        try:
            checks.append(check(state))
        except Exception as exc:
            from clavain.fsutil import UnsafePathError
            from clavain.store import health

            # A FIFO or a symlink for a state file: the message names it and the fix; a
            # read-only, full, locked or damaged state: the one judgement's line.
            judged = health.judge(exc, state.db)
            detail = str(exc) if isinstance(exc, UnsafePathError) else \
                judged.line if judged is not None else f"{type(exc).__name__}: {exc}"
            checks.append(_row(name, FAIL, detail, **({"state": judged.kind} if judged else {})))
    healthy = all(row["status"] != FAIL for row in checks)
    return {"version": __version__, "healthy": healthy, "checks": checks}

