"""`clavain statusline`: one short line for Claude Code's status bar, from the JSON the host
sends on stdin (`session_id`, `workspace.current_dir`, `cost.total_cost_usd`, …).

The host runs it after every assistant message (at most every 300 ms), so it costs what a hook
costs: stdlib only, lazy imports, `python -I -S` from bin/clavain, state files read with
`fsutil.read_state_file` (a FIFO never blocks) and the database opened read-only. It never
fails the host: outside a Clavain project it prints nothing, and a part it cannot read is left
out (a damaged checkpoint says so in two words) rather than raising.

The payload's `rate_limits` (the subscription's 5-hour and weekly windows, subscribers only) are
recorded in `.clavain/window.json` (`guards.window.record`: written only when a figure
changed), where the PreToolUse hook and the headless runs read them against
`budgets.windowShareMax`; the line shows them, `5h 95% (over 80%)` past the share.

`install` writes the `statusLine` setting into the project's `.claude/settings.local.json`
(`clavain init --statusline`), with `sandbox.read_settings`' checks.
"""

from __future__ import annotations

import os
import sys

PAYLOAD_MAX_BYTES = 1 << 20
SEPARATOR = " · "
DB_TIMEOUT_MS = 100  # a writer holding the database leaves the budget out, not the line late


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def state_root(payload: dict, env: dict | os._Environ[str] | None = None) -> str | None:
    """The `.clavain/` folder of the project the session works in, None outside one."""
    from clavain import locate

    env = os.environ if env is None else env
    workspace = payload.get("workspace")
    workspace = workspace if isinstance(workspace, dict) else {}
    for start in (_text(workspace.get("current_dir")), _text(workspace.get("project_dir")),
                  _text(payload.get("cwd"))):
        if start is None or not os.path.isabs(start):
            continue
        root = locate.state_dir(locate.project_dir(start, env), env)
        if os.path.isdir(root):
            return root
    return None


def _sprint(root: str) -> str:
    """`execute 5/9, gate pending` (a step whose gate must open before it is recorded done),
    `plan 3/9`; `done 9/9` when every step is recorded; `no sprint`; `checkpoint damaged`."""
    from clavain.fsutil import read_state_json
    from clavain.sprint.route import GATED_STEPS

    try:
        checkpoint = read_state_json(os.path.join(root, "checkpoint.json"))
    except (OSError, ValueError, RecursionError):
        return "checkpoint damaged"
    if checkpoint is None:
        return "no sprint"
    route = checkpoint.get("route") if isinstance(checkpoint, dict) else None
    step = checkpoint.get("current_step") if isinstance(checkpoint, dict) else None
    if not isinstance(route, list) or not route or (step is not None and step not in route):
        return "checkpoint damaged"
    if step is None:
        return f"done {len(route)}/{len(route)}"
    gate = ", gate pending" if step in GATED_STEPS else ""
    return f"{step} {route.index(step) + 1}/{len(route)}{gate}"


def _authority(root: str) -> str:
    """`hard mode` when the host's sandbox enforces the person's decisions here, else
    `best effort` (`hard_mode.status`, without asking the host what is missing)."""
    from clavain.sandbox import hard_mode

    return "hard mode" if hard_mode(os.path.dirname(root), root) else "best effort"


def _number(value: object) -> str:
    if isinstance(value, float):
        return f"${value:.2f}"
    return str(value)


def _budget(root: str, context: dict, env: dict | os._Environ[str]) -> str | None:
    """`cmds 12/200 $0.42+0.80 res/$5.00`: the session's Bash commands and dollars (spent, and
    reserved for work under way: `guards.reservations`) against their limits (the gate's run
    key and limits), None before the session's first counted call."""
    from clavain import locate

    path = locate.db_file(root, env)
    if not os.path.isfile(path):
        return None
    import sqlite3

    from clavain.guards.reservations import reserved
    from clavain.store.db import connect_readonly

    limits = context["limits"]
    conn = connect_readonly(path, timeout_ms=DB_TIMEOUT_MS)
    try:
        row = conn.execute("SELECT commands, cost_usd FROM budget_runs WHERE run_key = ?",
                           (context["run_key"],)).fetchone()
        try:
            held = reserved(conn, context["run_key"])["cost_usd"] if row is not None else 0.0
        except sqlite3.OperationalError:  # a database from before reservations (0012)
            held = 0.0
    finally:
        conn.close()
    if row is None:
        return None
    parts = []
    for label, used, key in (("cmds ", row[0], "maxCommands"), ("", float(row[1]), "maxCostUsd")):
        limit = limits.get(key)
        text = f"{label}{_number(used)}"
        if key == "maxCostUsd" and held > 0:
            text += f"+{held:.2f} res"
        parts.append(text + (f"/{_number(limit)}" if limit else ""))
    return " ".join(parts)


def _windows(root: str, payload: dict, context: dict) -> str | None:
    """`5h 95% (over 80%) 7d 41%`: the subscription's live windows, recorded first (cheaply:
    the file is rewritten only when a figure changed)."""
    import time

    from clavain.guards import window

    now = time.time()
    readings = window.from_statusline(payload, now)
    if readings:
        try:  # noqa: SIM105 - contextlib is one more import on every refresh
            window.record(root, readings, window.STATUSLINE, now)
        except OSError:  # a read-only or full state folder: the line still shows the figures
            pass
    live = window.current(root, now)
    share = context["limits"].get("windowShareMax") if context["limits"].get("enabled") \
        is not False else None
    shown = []
    for name in sorted(live, key=lambda n: (n != "five_hour", n != "seven_day", n)):
        used = live[name]["used_percent"]
        over = f" (over {window.percent(share)})" if share is not None and used >= share \
            else ""
        shown.append(f"{window.SHORT.get(name, name)} {window.percent(used)}{over}")
    return " ".join(shown) or None


def _loop(root: str, session_id: str | None) -> str | None:
    """`loop 3/10` while this session runs `/clavain:loop`."""
    from clavain.fsutil import read_state_json
    from clavain.loop.session_state import state_file

    path = state_file(root, session_id)
    if path is None:
        return None
    state = read_state_json(path)
    if not isinstance(state, dict) or not isinstance(state.get("iteration"), int):
        return None
    cap = state.get("max_iterations")
    return f"loop {state['iteration']}" + (f"/{cap}" if isinstance(cap, int) else "")


def _host_cost(payload: dict) -> str | None:
    cost = payload.get("cost")
    total = cost.get("total_cost_usd") if isinstance(cost, dict) else None
    if isinstance(total, (int, float)) and not isinstance(total, bool) and total >= 0:
        return f"session ${total:.2f}"
    return None


def line(payload: dict, env: dict | os._Environ[str] | None = None) -> str:
    """The status line for one payload; empty outside a Clavain project."""
    env = os.environ if env is None else env
    root = state_root(payload, env)
    if root is None:
        return ""
    session_id = _text(payload.get("session_id"))
    parts = [f"clavain: {_sprint(root)}"]
    found: dict = {}

    def context() -> dict:
        """The gate's run key and limits, read once for the parts that need them."""
        if "context" not in found:
            from clavain.guards.gate import run_context

            found["context"] = run_context(root, session_id, env=env)
        return found["context"]

    for part in (lambda: _authority(root), lambda: _budget(root, context(), env),
                 lambda: _windows(root, payload, context()),
                 lambda: _host_cost(payload), lambda: _loop(root, session_id)):
        try:
            text = part()
        except Exception:  # one unreadable part leaves the rest of the line standing
            text = None
        if text:
            parts.append(text)
    return SEPARATOR.join(parts)


def main(stdin: object = None) -> int:
    """Read the payload from stdin, print the line; exit 0 whatever happens."""
    try:
        from clavain import fastjson
        from clavain.fsutil import read_up_to

        stream = sys.stdin if stdin is None else stdin
        raw = read_up_to(stream.fileno(), PAYLOAD_MAX_BYTES)  # type: ignore[attr-defined]
        payload = fastjson.loads(raw.decode("utf-8", "replace")) if raw.strip() else {}
        text = line(payload if isinstance(payload, dict) else {})
    except Exception:
        return 0
    if text:
        try:
            sys.stdout.write(text + "\n")
            sys.stdout.flush()
        except OSError:
            pass
    return 0


def install(project: str, command: str, *, force: bool = False) -> dict:
    """Put `{"type": "command", "command": command}` in the project's settings.local.json,
    keeping every other key. A different status line already there is a person's own: refused
    (ClavainError naming it) unless `force`. {"settings", "changed", "replaced"}."""
    from pathlib import Path

    from clavain import hard_mode, sandbox
    from clavain.errors import ClavainError
    from clavain.fsutil import write_json_atomic

    path = sandbox.settings_file(Path(project))
    settings = sandbox.read_settings(path)
    wanted = {"type": "command", "command": command}
    current = settings.get("statusLine")
    if isinstance(current, dict) and current.get("type") == "command" \
            and current.get("command") == command:  # ours already (with its own padding, say)
        return {"settings": str(path), "changed": False, "replaced": None}
    if current is not None and not force:
        shown = current.get("command") if isinstance(current, dict) else current
        raise ClavainError(f"{path} already has a status line of its own ({shown!r}); "
                           "`clavain init --statusline --force` replaces it")
    write_json_atomic(path, {**settings, "statusLine": wanted})
    # It names this machine's paths, as hard mode's settings do: kept out of git.
    return {"settings": str(path), "changed": True, "replaced": current,
            "git_excluded": hard_mode.exclude_from_git(path)}
