"""The PreToolUse decision: count a tool call against its run's budgets, or deny it.

One BEGIN IMMEDIATE transaction per call (parallel tool calls lose no count): the run's row is
read, the limits and the loop guards are checked, and the call is recorded with its decision. A
denied call counts nothing, so its retry is judged afresh. Loop guards:
- the same patch (path + old + new text) applied more than `maxPatchRepeats` times is denied;
  an edit that undoes an earlier one on the same file is flagged;
- a test command that failed, run again with nothing changed since, is denied (yolo, smoke)
  or flagged (strict);
- an identical command repeated with no other change in between warns at the third run and is
  denied at the fifth, within ten minutes.
Stdlib only; callers pass the connection, the clock and the limits (`policy.resolve`).
"""

from __future__ import annotations

import os
import time

from clavain.guards import commands
from clavain.guards.policy import ENV, REPEAT_DENY, REPEAT_WARN, REPEAT_WINDOW_SECONDS, WARN_AT
from clavain.guards.state_paths import (
    names_host_settings,
    names_state,
    writes_host_settings,
    writes_state,
)
from clavain.guards.wrappers import simple_commands

COUNTED_TOOLS = ("Bash", "WebFetch", "WebSearch", "Edit", "Write", "MultiEdit", "NotebookEdit",
                 "Agent", "Task", "Workflow")
EDIT_TOOLS = ("Edit", "Write", "MultiEdit", "NotebookEdit")
SUBJECT_CHARS = 300
RECENT_CALLS = 50
BUDGETS = (("commands", "maxCommands", "Bash commands"),
           ("test_runs", "maxTestRuns", "Test runs"),
           ("web_requests", "maxWebRequests", "Web requests"),
           ("tokens", "maxTokens", "Tokens"),
           ("cost_usd", "maxCostUsd", "Dollars"))
MEASURE_EVERY_SECONDS = 30
LIFT = ("Clavain budget: changing the budgets themselves (`.clavain/config.json`, `clavain "
        "budget reset`) is a person's decision, not an agent's. Stop and ask the user.")
STATE = ("Clavain: its state (`.clavain/`: the sprint checkpoint, verdicts, the database) changes "
         "only through the `clavain` CLI and its hooks, so that a gate cannot be passed by "
         "editing a file. Only `.clavain/scratch/` (the handoff note) is yours to write.")
PERSON = ("Clavain: {why} is a person's decision, not an agent's (passing a gate, skipping "
          "steps, resetting a budget or a breaker, starting a loop, speaking for what the user "
          "typed). Do the work the gate names, or stop and ask the user.")
# Why changing Claude Code's project settings is refused (they hold the hooks and the sandbox).
HOST_SETTINGS = "changing Claude Code's settings (`.claude/settings.json`, `settings.local.json`)"
# Where a write lands that is no agent's, whatever the path's spelling (`guards.landing`).
PLUGIN = ("Clavain: its own files (the plugin folder and its data folder, where its hooks and "
          "venv live) are not an agent's to change: the hooks that count this session run from "
          "them. Ask the user.")
LINKED = ("Clavain: {files} has another name (a hard link: {links} links), so a write through "
          "that name would change Clavain's state unseen; every change is refused until a "
          "person removes the other link (`clavain doctor` names it).")
STOP = ("Stop here: do not retry this call or work around it. Return partial success (what is "
        "done, what is left and why) or escalate to a person.")


def describe(tool: str, tool_input: object, patterns: list, config_path: str = "",
             cwd: str = "", project: str = "") -> dict:
    """What a call is: kind, subject, fingerprint (and the undo's), test parts, whether it may
    change files, whether it only reads, whether it would lift the budgets themselves (an edit
    of `config_path`, `clavain budget reset`). Given the call's `cwd` (and `config_path`, in
    the state folder), where its writes land is judged too (`guards.landing`): a path through
    a link, `..` or `.` is the place it reaches."""
    data = tool_input if isinstance(tool_input, dict) else {}

    def text(key: str) -> str:
        value = data.get(key)
        return value if isinstance(value, str) else ""

    call = {"tool": tool, "kind": "other", "subject": "", "fingerprint": None, "undo": None,
            "tests": 0, "changed": False, "clavain": False, "lifts_budget": False,
            "person_only": None, "edits_state": False, "refusal": None}
    if tool == "Bash":
        command = text("command")
        tests = len(commands.find_test_runs(command, patterns))
        changed = commands.may_change_files(command, patterns)
        # The same words as the test counter: wrappers, launcher paths, `python -m clavain`,
        # `bash -c '…'` and `$(…)` stripped (wrappers.simple_commands).
        words = simple_commands(command)
        edits_state = writes_state(command, patterns)
        call.update(kind="test" if tests else "command", subject=command, tests=tests,
                    fingerprint=commands.fingerprint(commands.normalized(command, patterns)),
                    changed=changed,
                    clavain=any(w[:1] == ["clavain"] for w in words),
                    lifts_budget=commands.lifts_budget(command) or
                    (edits_state and bool(config_path) and
                     os.path.basename(config_path) in command and ".clavain" in command),
                    person_only=commands.person_only(command)
                    or (HOST_SETTINGS if writes_host_settings(command, patterns) else None),
                    edits_state=edits_state)
    elif tool in ("WebFetch", "WebSearch"):
        call.update(kind="web", subject=text("url") or text("query"))
    elif tool in EDIT_TOOLS:
        path = text("file_path") or text("notebook_path")
        old, new = _edit_texts(tool, data)
        call.update(kind="edit", subject=path, changed=True,
                    fingerprint=commands.fingerprint(path, old, new),
                    undo=commands.fingerprint(path, new, old),
                    lifts_budget=(bool(config_path) and _same_file(path, config_path))
                    or _names_config(path),
                    edits_state=names_state(path),
                    person_only=HOST_SETTINGS if names_host_settings(path) else None)
    elif tool in ("Agent", "Task", "Workflow"):
        call.update(kind="agent", subject=text("subagent_type") or text("name")
                    or text("scriptPath") or text("description"))
    # Only a call that may write looks at the disk: the common call (a read, a test) does not.
    may_write = call["kind"] == "edit" or (tool == "Bash" and (
        call["changed"] or commands.reads_that_write(call["subject"])))
    if cwd and config_path and may_write:
        _landed(call, cwd, project, os.path.dirname(config_path), patterns)
    call["subject"] = call["subject"][:SUBJECT_CHARS]
    return call


def _landed(call: dict, cwd: str, project: str, root: str, patterns: list) -> None:
    """The refusals where a call's writes land asks for (`guards.landing`), beside those its
    spelling asked for; a state file with a second name refuses every change."""
    from clavain.guards import landing

    where = landing.where_call_lands(call, cwd, project or os.path.dirname(root), root,
                                     patterns)
    if where == landing.STATE:
        call["edits_state"] = True
    elif where == landing.SETTINGS:
        call["person_only"] = call["person_only"] or HOST_SETTINGS
    elif where == landing.PLUGIN:
        call["refusal"] = PLUGIN
    linked = landing.linked_state_files(root) if call["changed"] else None
    if linked and not call["refusal"]:
        call["refusal"] = LINKED.format(files=", ".join(path for path, _ in linked),
                                        links=max(count for _, count in linked))


def _names_config(path: str) -> bool:
    """Any Clavain config file, this project's or one the agent would make elsewhere to step
    out of its budget (`cd` into a folder with a `.clavain/config.json` of its own)."""
    return path.replace("\\", "/").endswith(".clavain/config.json")


def _same_file(path: str, other: str) -> bool:
    try:
        return os.path.abspath(path) == os.path.abspath(other)
    except ValueError:  # a NUL in the path
        return False


def _edit_texts(tool: str, data: dict) -> tuple[str, str]:
    def text(item: object, key: str) -> str:
        value = item.get(key) if isinstance(item, dict) else None
        return value if isinstance(value, str) else ""

    if tool == "MultiEdit":
        edits = data.get("edits") if isinstance(data.get("edits"), list) else []
        return ("\n\0".join(text(e, "old_string") for e in edits),
                "\n\0".join(text(e, "new_string") for e in edits))
    if tool == "Write":
        return "", text(data, "content")
    if tool == "NotebookEdit":
        return text(data, "cell_id"), text(data, "new_source")
    return text(data, "old_string"), text(data, "new_string")


def check(conn, *, run_key: str, session_id: str | None, call: dict, limits: dict,
          problems: list[str], now: float | None = None, started: float | None = None,
          tool_use_id: str | None = None, transcript: str | None = None,
          sprint_id: str | None = None) -> dict:
    """{"decision": allow | warn | deny, "reason": text or None, "measure": bool} for one tool
    call, recorded with its counts (a denied call counts nothing) and, given the hook's
    `perf_counter` start, the hook's own time. `measure` is True for the one call in
    MEASURE_EVERY_SECONDS that should start measuring the run's tokens (claimed in the same
    transaction, so parallel calls start one measurement). Runs its own transaction."""
    from clavain import fastjson
    from clavain.store.db import transaction

    now = time.time() if now is None else now
    at = stamp(now)
    with transaction(conn):
        # measured_at = now: a new run's first background measurement comes 30 s in (its
        # first seconds cost next to nothing, and a short session starts no measurer at all).
        conn.execute("INSERT OR IGNORE INTO budget_runs (run_key, started_at, updated_at, "
                     "measured_at) VALUES (?, ?, ?, ?)", (run_key, at, at, at))
        if transcript:  # the sessions a run's tokens are measured over
            conn.execute("INSERT OR IGNORE INTO budget_usage (run_key, transcript, added_at) "
                         "VALUES (?, ?, ?)", (run_key, transcript, at))
        run = conn.execute("SELECT * FROM budget_runs WHERE run_key = ?", (run_key,)).fetchone()
        warned = set(fastjson.loads(run["warned_json"]))
        denial = refusal(conn, run, call, limits, now)
        notes = [] if denial else _loop_notes(conn, run, call, limits, now)
        denial = denial or next((note for kind, note in notes if kind == "deny"), None)
        if denial is None and (call.get("agent_id") or call.get("fanout")):
            from clavain.guards.fanout import decide

            denial = decide(conn, run_key, call, limits, tool_use_id, at)
        warnings = [note for kind, note in notes if kind == "warn"]
        # A subagent was stopped by its own cap: the main thread's next call that runs says so.
        if run["agents_untold"] and denial is None and not call.get("agent_id"):
            from clavain.guards.agents import tell_parent

            warnings += filter(None, [tell_parent(conn, run_key, at)])
        if problems and "config" not in warned:
            warned.add("config")
            warnings.append("Clavain budget settings: " + "; ".join(problems))
        if denial is None:
            warnings += _count(conn, run, call, limits, warned, at)
        decision = "deny" if denial else "warn" if warnings else "allow"
        reason = denial or (" ".join(warnings) if warnings else None)
        hook_ms = round((time.perf_counter() - started) * 1000, 3) if started else None
        conn.execute(
            "INSERT INTO budget_calls (run_key, at, session_id, tool, kind, subject, fingerprint,"
            " changed, changes_at, tool_use_id, decision, reason, hook_ms) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (run_key, at, session_id, call["tool"], call["kind"], call["subject"],
             call["fingerprint"], int(call["changed"]), run["changes"], tool_use_id, decision,
             reason, hook_ms))
        if sprint_id:  # the run behind the sprint's summary (rewritten only when it changes)
            conn.execute("INSERT INTO budget_sprints (sprint_id, run_key, at) VALUES (?, ?, ?) "
                         "ON CONFLICT (sprint_id) DO UPDATE SET run_key = excluded.run_key, "
                         "at = excluded.at WHERE budget_sprints.run_key != excluded.run_key",
                         (sprint_id, run_key, at))
        measure = run["measured_at"] is None or \
            run["measured_at"] < stamp(now - MEASURE_EVERY_SECONDS)
        conn.execute("UPDATE budget_runs SET warned_json = ?, updated_at = ?, "
                     "measured_at = CASE WHEN ? THEN ? ELSE measured_at END WHERE run_key = ?",
                     (fastjson.dumps(sorted(warned)), at, measure, at, run_key))
    return {"decision": decision, "reason": reason, "measure": measure}


def run_row(conn, run_key: str):
    """The run's row of `budget_runs` (its counters and measured spend), or None before it
    counted anything."""
    return conn.execute("SELECT * FROM budget_runs WHERE run_key = ?", (run_key,)).fetchone()


def stamp(seconds: float) -> str:
    """UTC ISO-8601 to the millisecond (`clock.iso_at`: no `datetime` on every tool call)."""
    from clavain.clock import iso_at

    return iso_at(seconds)


def standing_refusal(call: dict) -> str | None:
    """Why the call is denied whatever the counters say (lifting the budgets, a person's
    decision, editing the state folder), or None: it needs no database, so a broken or
    unwritable one, or budgets turned off, never lets such a call through."""
    if call["lifts_budget"]:
        return LIFT
    if call["person_only"]:
        return PERSON.format(why=call["person_only"])
    if call["edits_state"]:
        return STATE
    return call.get("refusal")


def refusal(conn, run, call: dict, limits: dict, now: float) -> str | None:
    """Why the call is denied before counting (a budget spent, its lifting), or None."""
    standing = standing_refusal(call)
    if standing:
        return standing
    where = f"({limits['profile']}/{limits['scope']}, run {run['run_key']})"
    by_key = {key: (column, label) for column, key, label in BUDGETS}
    for key in ("maxTokens", "maxCostUsd"):
        if run[by_key[key][0]] >= limits[key]:
            return _spent(run, limits, key, by_key[key], where)
    if call["kind"] in ("command", "test") and run["commands"] >= limits["maxCommands"]:
        return _spent(run, limits, "maxCommands", by_key["maxCommands"], where)
    if call["tests"] and run["test_runs"] + call["tests"] > limits["maxTestRuns"]:
        if run["test_runs"] >= limits["maxTestRuns"]:
            return _spent(run, limits, "maxTestRuns", by_key["maxTestRuns"], where)
        left = limits["maxTestRuns"] - run["test_runs"]
        return (f"Clavain budget: this command runs {call['tests']} tests (test runs count "
                f"each) and only {left} of {limits['maxTestRuns']} test runs are left "
                f"({run['test_runs']} used) {where}. Do not retry it as it is: run at most "
                f"{left} at once, or stop and return partial success (what is done, what is "
                f"left and why) or escalate to a person. {raise_hint('maxTestRuns')}")
    if call["kind"] == "web" and run["web_requests"] >= limits["maxWebRequests"]:
        return _spent(run, limits, "maxWebRequests", by_key["maxWebRequests"], where)
    return None


def _spent(run, limits: dict, key: str, budget: tuple[str, str], where: str) -> str:
    """The denial of a budget used up (used >= limit), or set to 0."""
    column, label = budget
    label = label.lower() if key in ("maxTestRuns", "maxWebRequests") else label
    if not limits[key]:
        return (f"Clavain budget: {label} are set to 0 {where}: none are allowed. {STOP} "
                f"{raise_hint(key)}")
    return (f"Clavain budget exhausted: {label} {amount(run[column])} of "
            f"{amount(limits[key])} used {where}. {STOP} {raise_hint(key)}")


def raise_hint(key: str) -> str:
    """How a person (not the agent) gives a budget more room."""
    return (f"To go on, the user raises `budgets.{key}` in .clavain/config.json or sets "
            f"{ENV[key]}, or runs `clavain budget reset`, in a terminal.")


def amount(value: float) -> str:
    """A budget figure for people: dollars as `$1.25`, counts as `1,234`."""
    return f"${value:.2f}" if isinstance(value, float) else f"{value:,}"


def _loop_notes(conn, run, call: dict, limits: dict, now: float) -> list[tuple[str, str]]:
    notes: list[tuple[str, str]] = []
    if call["kind"] == "edit":
        applied = conn.execute(
            "SELECT count(*) FROM budget_calls WHERE run_key = ? AND fingerprint = ? "
            "AND decision NOT IN ('deny', 'failed')",
            (run["run_key"], call["fingerprint"])).fetchone()[0]
        if applied >= limits["maxPatchRepeats"]:
            notes.append(("deny", f"Clavain loop guard: this same patch to {call['subject']} was "
                                  f"already applied {applied} times: you are going in circles. "
                                  f"{STOP}"))
        elif conn.execute("SELECT 1 FROM budget_calls WHERE run_key = ? AND fingerprint = ? "
                          "AND decision NOT IN ('deny', 'failed') LIMIT 1",
                          (run["run_key"], call["undo"])).fetchone():
            notes.append(("warn", f"Clavain loop guard: this edit undoes an earlier one on "
                                  f"{call['subject']} (edit/revert ping-pong). Decide which "
                                  "version is right before editing again."))
    if call["kind"] == "test":
        red = conn.execute("SELECT changes_at FROM budget_red_tests WHERE run_key = ? AND "
                           "fingerprint = ?", (run["run_key"], call["fingerprint"])).fetchone()
        if red is not None and red["changes_at"] == run["changes"]:
            note = ("Clavain loop guard: this test command failed and nothing has changed "
                    "since; running it again will fail the same way.")
            notes.append(("deny", f"{note} {STOP}") if limits["profile"] in ("yolo", "smoke")
                         else ("warn", note + " Change something first."))
    # Clavain's own commands repeat by design (`graph next` in the execute loop).
    if call["kind"] in ("command", "test") and not call["clavain"]:
        repeats = _identical_in_a_row(conn, run["run_key"], call["fingerprint"], now)
        reads_only = not call["changed"] and not call["tests"]
        if repeats + 1 >= REPEAT_WARN and reads_only:
            # Parallel reviewers each run the same `git diff`: a read is never denied.
            if repeats + 1 == REPEAT_WARN:
                notes.append(("warn", f"Clavain loop guard: this exact command already ran "
                                      f"{repeats} times with nothing changed in between; its "
                                      "output has not changed either."))
        elif repeats + 1 >= REPEAT_DENY:
            notes.append(("deny", f"Clavain loop guard: this exact command already ran {repeats} "
                                  "times with nothing else changed in between. " + STOP))
        elif repeats + 1 >= REPEAT_WARN:
            notes.append(("warn", f"Clavain loop guard: this exact command already ran {repeats} "
                                  "times with nothing else changed in between; a fifth run "
                                  "is denied."))
    return notes


def _identical_in_a_row(conn, run_key: str, fingerprint: str, now: float) -> int:
    """Earlier runs of the same command since the last call by something else that may have
    changed files, within the window."""
    since = stamp(now - REPEAT_WINDOW_SECONDS)
    repeats = 0
    for row in conn.execute("SELECT fingerprint, changed, decision, at FROM budget_calls "
                            "WHERE run_key = ? ORDER BY id DESC LIMIT ?",
                            (run_key, RECENT_CALLS)):
        if row["at"] < since:
            break
        if row["fingerprint"] == fingerprint:
            repeats += row["decision"] not in ("deny", "failed")
        elif row["changed"] and row["decision"] not in ("deny", "failed"):
            break
    return repeats


def _count(conn, run, call: dict, limits: dict, warned: set, at: str) -> list[str]:
    """Count an allowed call; the warnings for budgets that just reached 80 %."""
    counts = {"commands": int(call["kind"] in ("command", "test")), "test_runs": call["tests"],
              "web_requests": int(call["kind"] == "web"), "changes": int(call["changed"])}
    conn.execute("UPDATE budget_runs SET commands = commands + ?, test_runs = test_runs + ?, "
                 "web_requests = web_requests + ?, changes = changes + ? WHERE run_key = ?",
                 (*counts.values(), run["run_key"]))
    warnings = []
    for column, key, label in BUDGETS:
        used = run[column] + counts.get(column, 0)
        if limits[key] and used >= WARN_AT * limits[key] and column not in warned:
            warned.add(column)
            if used >= limits[key]:
                warnings.append(f"Clavain budget: {label} {amount(used)} of "
                                f"{amount(limits[key])} used: that was the last; the next is "
                                "denied. Finish or hand over now.")
            else:
                warnings.append(f"Clavain budget: {label} {amount(used)} of "
                                f"{amount(limits[key])} used (80 %); plan to finish or hand "
                                "over before it runs out.")
    return warnings
