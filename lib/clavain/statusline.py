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
`budgets.windowShareMax`; the line shows them, `5h ⚠95% (over 80%)` past the share, `(near …)`
from WARN_SHARE of it.

Whose dollars are whose: `budget …` is Clavain's count for this session against its limits
(`budget_runs`), `Claude Code $…` the host's own session cost; the two differ (the host counts
what Clavain does not see). A figure at WARN_SHARE of its limit or more carries `⚠` (text, so
it shows without colour; yellow, red past the limit, as an addition unless NO_COLOR is set).
The latest headless run (`.clavain/runs/*/supervisor.json`) shows while it runs or waits, and
for RUN_SHOWN_SECONDS after it ended short of complete; `N questions wait` counts the nodes
waiting for a person (needs_human) in active graphs.

`statusline_setup.install` writes the `statusLine` setting (`clavain init --statusline`);
`--with CMD` (what `--combine` writes) runs a person's own status line first (`main`).
"""

from __future__ import annotations

import os
import sys

PAYLOAD_MAX_BYTES = 1 << 20
SEPARATOR = " · "
DB_TIMEOUT_MS = 100  # a writer holding the database leaves the budget out, not the line late
WARN_SHARE = 0.8  # a figure this close to its limit is marked
WARN = "⚠"
RUN_SHOWN_SECONDS = 24 * 3600  # a run that ended blocked stays on the line this long
# How a run that did not complete ended, in a few words (supervisor.json's status, and for a
# blocked one metrics.json's reason).
RUN_ENDINGS = {"blocked": "blocked", "budget": "stopped: budget", "interrupted": "stopped",
               "window_limit": "stopped: subscription window", "stopped_at_limit": "paused"}
RUN_REASONS = {"needs_human": "waits for an answer", "deadlock": "nothing can run",
               "breaker_open": "breaker open", "budget": "budget reached"}


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
    from clavain.sprint import checkpoint as sprint_checkpoint
    from clavain.sprint.route import GATED_STEPS

    try:
        checkpoint = sprint_checkpoint.read_in(root)
    except sprint_checkpoint.DamagedCheckpoint:
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


def _mark(text: str, used: float, limit: float | None, env: dict | os._Environ[str]) -> str:
    """`text` with `⚠` in front at WARN_SHARE of `limit` or more; coloured as an addition."""
    if not limit or limit <= 0 or used < WARN_SHARE * limit:
        return text
    marked = WARN + text
    if env.get("NO_COLOR"):
        return marked
    return f"\033[{'31' if used >= limit else '33'}m{marked}\033[0m"


def _budget(conn: object, context: dict, env: dict | os._Environ[str]) -> str | None:
    """`budget cmds 12/200 $0.42+0.80 res/$5.00`: the session's Bash commands and Clavain's
    dollars (spent, and reserved for work under way: `guards.reservations`) against their
    limits (the hooks' run key and limits: `guards.counting`), `⚠` on one at WARN_SHARE of its
    limit; None before the session's first counted call."""
    import sqlite3

    from clavain.guards.reservations import reserved

    if conn is None:
        return None
    limits = context["limits"]
    row = conn.execute("SELECT commands, cost_usd FROM budget_runs WHERE run_key = ?",  # type: ignore[attr-defined]
                       (context["run_key"],)).fetchone()
    if row is None:
        return None
    try:
        held = reserved(conn, context["run_key"])["cost_usd"]
    except sqlite3.OperationalError:  # a database from before reservations (0012)
        held = 0.0
    parts = []
    for label, used, key in (("cmds ", row[0], "maxCommands"), ("", float(row[1]), "maxCostUsd")):
        limit = limits.get(key)
        text = f"{label}{_number(used)}"
        if key == "maxCostUsd" and held > 0:
            text += f"+{held:.2f} res"
            used += held  # what the gate weighs against the limit: spent and held
        text += f"/{_number(limit)}" if limit else ""
        parts.append(_mark(text, used, limit if isinstance(limit, (int, float)) else None,
                           env))
    return "budget " + " ".join(parts)


def _questions(conn: object) -> str | None:
    """`2 questions wait`: nodes of active graphs waiting for a person's answer."""
    if conn is None:
        return None
    from clavain.store import queries

    count = queries.run(conn, "status.questions_waiting").fetchone()[0]
    if not count:
        return None
    return f"{WARN}{count} question{'s' if count != 1 else ''} wait{'s' if count == 1 else ''}"


def _run(root: str, now: float) -> str | None:
    """The latest headless run (`clavain run`): `run 2 at work`, `run waiting` (running with no
    runner at this moment: a back-off, a rate limit, other runs), `run blocked: nothing can
    run`, `run stopped: budget`; nothing once it completed or ended RUN_SHOWN_SECONDS ago. Only
    `supervisor.json` (small) is read, metrics.json only for a blocked run's reason."""
    from clavain.fsutil import read_json_object

    runs = os.path.join(root, "runs")
    latest, latest_at = None, 0.0
    try:
        entries = os.scandir(runs)
    except OSError:
        return None
    with entries:
        for entry in entries:
            try:
                at = os.stat(os.path.join(entry.path, "supervisor.json")).st_mtime
            except OSError:
                continue
            if at > latest_at:
                latest, latest_at = entry.path, at
    if latest is None:
        return None
    record = read_json_object(os.path.join(latest, "supervisor.json"))
    if record is None:
        return None
    status = record.get("status")
    if status == "running":
        runners = record.get("runners")
        busy = len(runners) if isinstance(runners, dict) else 0
        return f"run {busy} at work" if busy else "run waiting"
    if status not in RUN_ENDINGS or now - latest_at > RUN_SHOWN_SECONDS:
        return None  # complete, or long enough ago to be history
    text = f"{WARN}run {RUN_ENDINGS[status]}"
    if status == "blocked":
        # Too big or damaged: the ending alone.
        metrics = read_json_object(os.path.join(latest, "metrics.json"))
        reason = metrics.get("reason") if metrics is not None else None
        if isinstance(reason, str) and reason:
            text += f": {RUN_REASONS.get(reason, reason.replace('_', ' '))}"
    return text


def _windows(root: str, payload: dict, context: dict, env: dict | os._Environ[str]
             ) -> str | None:
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
        over = ""
        if share is not None:
            over = f" (over {window.percent(share)})" if used >= share else \
                f" (near {window.percent(share)})" if used >= WARN_SHARE * share else ""
        # The limit is the run's share of the window where one is set, else the window.
        text = _mark(window.percent(used), used, share if share is not None else 100.0, env)
        shown.append(f"{window.SHORT.get(name, name)} {text}{over}")
    return " ".join(shown) or None


def _loop(root: str, session_id: str | None) -> str | None:
    """`loop 3/10` while this session runs `/clavain:loop`."""
    from clavain.fsutil import read_json_object
    from clavain.loop.session_state import state_file

    path = state_file(root, session_id)
    if path is None:
        return None
    state = read_json_object(path)
    if state is None or not isinstance(state.get("iteration"), int):
        return None
    cap = state.get("max_iterations")
    return f"loop {state['iteration']}" + (f"/{cap}" if isinstance(cap, int) else "")


def _host_cost(payload: dict) -> str | None:
    cost = payload.get("cost")
    total = cost.get("total_cost_usd") if isinstance(cost, dict) else None
    if isinstance(total, (int, float)) and not isinstance(total, bool) and total >= 0:
        return f"Claude Code ${total:.2f}"  # the host's figure, not Clavain's budget
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
        """The hooks' run key and limits (`guards.counting`), read once for the parts that need
        them."""
        if "context" not in found:
            from clavain.guards.counting import run_context

            found["context"] = run_context(root, session_id, env=env)
        return found["context"]

    def database() -> object:
        """One read-only connection for the parts that read the database, opened once."""
        if "conn" not in found:
            found["conn"] = None
            from clavain import locate

            path = locate.db_file(root, env)
            if os.path.isfile(path):
                from clavain.store.db import connect_readonly

                found["conn"] = connect_readonly(path, timeout_ms=DB_TIMEOUT_MS)
        return found["conn"]

    import time

    try:
        for part in (lambda: _authority(root), lambda: _budget(database(), context(), env),
                     lambda: _windows(root, payload, context(), env),
                     lambda: _host_cost(payload), lambda: _loop(root, session_id),
                     lambda: _run(root, time.time()), lambda: _questions(database())):
            try:
                text = part()
            except Exception:  # one unreadable part leaves the rest of the line standing
                text = None
            if text:
                parts.append(text)
    finally:
        if found.get("conn") is not None:
            found["conn"].close()
    return SEPARATOR.join(parts)


OWN_TIMEOUT_SECONDS = 2.0  # a person's own status line that hangs costs the bar this, no more
BETWEEN = " │ "  # a person's line, then Clavain's


def main(stdin: object = None, argv: list[str] | None = None) -> int:
    """Read the payload from stdin, print the line; exit 0 whatever happens. `argv` ["--with",
    CMD]: a person's own status line command, run (by the shell, the payload on its stdin, at
    the same time as Clavain's line is made) and printed first; Clavain's follows on its last
    line, or alone outside a Clavain project."""
    own = argv[1] if argv and len(argv) == 2 and argv[0] == "--with" and argv[1] else None
    theirs, text = "", ""
    try:
        from clavain.fsutil import read_up_to

        stream = sys.stdin if stdin is None else stdin
        raw = read_up_to(stream.fileno(), PAYLOAD_MAX_BYTES)  # type: ignore[attr-defined]
    except Exception:
        return 0
    started = _start_own(own) if own else None
    try:
        from clavain import fastjson

        payload = fastjson.loads(raw.decode("utf-8", "replace")) if raw.strip() else {}
        text = line(payload if isinstance(payload, dict) else {})
    except Exception:
        text = ""
    if started is not None:
        theirs = _finish_own(started, raw)
    shown = combined(theirs, text)
    if shown:
        try:
            sys.stdout.write(shown + "\n")
            sys.stdout.flush()
        except OSError:
            pass
    return 0


def combined(theirs: str, ours: str) -> str:
    """A person's status line output, then Clavain's: on its last line after BETWEEN, or alone
    when one of the two is empty."""
    theirs = theirs.rstrip("\n")
    if not theirs or not ours:
        return theirs or ours
    return theirs + BETWEEN + ours


def _start_own(command: str) -> object:
    import subprocess

    try:
        return subprocess.Popen(command, shell=True, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    except OSError:
        return None


def _finish_own(proc: object, raw: bytes) -> str:
    """What the person's command printed; nothing when it fails to start or outlasts
    OWN_TIMEOUT_SECONDS (then it is killed): the bar never waits on it longer."""
    import subprocess

    try:
        out, _ = proc.communicate(raw, timeout=OWN_TIMEOUT_SECONDS)  # type: ignore[attr-defined]
    except (subprocess.TimeoutExpired, OSError):
        proc.kill()  # type: ignore[attr-defined]
        proc.wait()  # type: ignore[attr-defined]
        return ""
    return out.decode("utf-8", "replace")
