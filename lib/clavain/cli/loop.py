"""`clavain iterate` (one loop prompt) and `clavain loop` (the fresh-context loop, headless; its
status-block parser, summary and circuit breaker)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from clavain.cli._input import positive_int
from clavain.cli._output import add_command, add_json_flag, emit_json
from clavain.cli._state import add_graph_flag
from clavain.cli.run import add_wait_on_limit_flag

AUTOMATION = ("auto", "ask", "plan")


def register(commands: argparse._SubParsersAction) -> None:
    it = add_command(commands, "iterate", "print the next loop prompt: every actionable item "
                     "(runnable nodes, failing checks), pick ONE, the status block", _iterate)
    it.add_argument("--automation", choices=AUTOMATION,
                    help="what the agent may do unasked (default: loop.automation, auto)")
    add_graph_flag(it)
    add_json_flag(it)

    loop = add_command(commands, "loop", "run the fresh-context loop headless until the dual "
                       "exit gate, the breaker, a budget or --max-iterations stops it", _loop)
    loop.add_argument("--runner", metavar="R", help="claude (default) or a configured runner")
    loop.add_argument("--max-iterations", type=positive_int, metavar="N",
                      help="at most N iterations (default: loop.maxIterations, 100)")
    loop.add_argument("--rate", type=positive_int, metavar="N",
                      help="runner calls per hour (default: loop.callsPerHour, 100)")
    loop.add_argument("--automation", choices=AUTOMATION,
                      help="what the agent may do unasked (default: loop.automation, auto)")
    loop.add_argument("--run-id", metavar="ID", help="name this loop run (default: new)")
    add_wait_on_limit_flag(loop)
    loop.add_argument("--reset-circuit", action="store_true",
                      help="close the circuit breaker of --run RUN's task, kept across runs "
                      "(a person's decision)")
    loop.add_argument("--circuit-status", action="store_true",
                      help="print the circuit breaker of --run RUN's task (default: the latest "
                      "run)")
    loop.add_argument("--run", metavar="RUN", help="the loop run --reset-circuit and "
                      "--circuit-status act on")
    loop.add_argument("--reset-rate", action="store_true",
                      help="empty the project's calls-per-hour window, shared by every loop "
                      "(a person's decision)")
    loop.add_argument("--rate-status", action="store_true",
                      help="print the project's calls-per-hour window")
    add_graph_flag(loop)
    add_json_flag(loop)
    sub = loop.add_subparsers(dest="loop_command", metavar="COMMAND")
    parse = add_command(sub, "parse-status", "parse a ---CLAVAIN_STATUS--- block (exit 2 "
                        "with {\"error\": …} on a bad one)", _parse_status)
    parse.add_argument("source", metavar="FILE|-", help="a reply holding the block (- = stdin)")
    add_json_flag(parse)
    summary = add_command(sub, "summary", "a loop run for a person: iterations, items done, "
                          "blocked, breaker trips, tokens, cost, wall", _summary)
    summary.add_argument("run", nargs="?", metavar="RUN", help="default: the latest run")
    add_json_flag(summary)
    _register_session_loop(sub)


def _register_session_loop(sub: argparse._SubParsersAction) -> None:
    """`/clavain:loop` in a Claude Code session (clavain.loop.session_loop)."""
    start = add_command(sub, "session-start", "register /clavain:loop for this Claude Code "
                        "session and print iteration 1 (the command's ! line)", _session_start)
    start.add_argument("--from-prompt", action="store_true", help="take what the "
                       "UserPromptSubmit hook recorded after /clavain:loop for the session")
    start.add_argument("--session", metavar="ID", help="default: $CLAUDE_CODE_SESSION_ID")
    start.add_argument("--max-iterations", type=positive_int, metavar="N",
                       help="at most N iterations (default: loop.maxIterations)")
    start.add_argument("--automation", choices=AUTOMATION,
                       help="what the agent may do unasked (default: loop.automation, auto)")
    start.add_argument("task", nargs="*", metavar="TASK", help="what the loop works toward")
    add_graph_flag(start)
    add_json_flag(start)
    cancel = add_command(sub, "cancel", "end a session's /clavain:loop (state removed, summary "
                         "written)", _session_cancel)
    cancel.add_argument("--session", metavar="ID", help="default: $CLAUDE_CODE_SESSION_ID")
    add_json_flag(cancel)


def _iterate(args: argparse.Namespace) -> int:
    from clavain import config as config_mod
    from clavain.loop.iterate import iterate
    from clavain.paths import StatePaths

    state = StatePaths.discover()
    automation = args.automation or config_mod.get(config_mod.load(state.config),
                                                   "loop.automation")
    from clavain.loop.decide import current_graph

    found = iterate(state, graph_id=current_graph(state, args.graph), automation=automation)
    if args.json:
        emit_json({key: found[key] for key in ("actionable", "items", "checks", "automation",
                                                "prompt", "prompt_tokens_estimate")})
    else:
        print(found["prompt"], end="")
    return 0


def _loop(args: argparse.Namespace) -> int:
    from clavain.loop import controls
    from clavain.paths import StatePaths

    state = StatePaths.discover()
    if args.reset_rate or args.rate_status:
        return _rate(state, args)
    if args.reset_circuit and not args.run:
        from clavain.errors import ClavainError

        raise ClavainError("--reset-circuit needs --run RUN: say which run a person looked at")
    if args.reset_circuit or args.circuit_status:
        reset_by = None
        if args.reset_circuit:
            from clavain.authority import require_person

            reset_by = require_person(
                "closing a loop's circuit breaker", typed=None,
                in_claude_code=f"/clavain:loop --reset-circuit {args.run}",
                in_terminal=f"clavain loop --reset-circuit --run {args.run}")
        status = controls.circuit(state, args.run, reset_by=reset_by)
        if args.json:
            emit_json(status)
        else:
            print(controls.render_circuit(status), end="")
        return 0
    if args.rate is not None:
        _require_rate(state, args.rate)
    from clavain.loop.driver import LoopOptions, run_loop
    from clavain.loop.progress_lines import Printer

    result = run_loop(state, LoopOptions(runner=args.runner, max_iterations=args.max_iterations,
                                         rate=args.rate, automation=args.automation,
                                         graph=args.graph, run_id=args.run_id,
                                         wait_on_limit=args.wait_on_limit),
                      Printer(sys.stderr))
    if args.json:
        emit_json(result)
    else:
        from clavain.loop.records import render_summary

        print(render_summary(result["summary"]), end="")
    return int(result["exit_code"])


def _require_rate(state: Any, rate: int) -> None:
    """A rate above the configured `loop.callsPerHour` is a person's decision (a lower one
    only slows the loop down)."""
    from clavain import config as config_mod

    configured = int(config_mod.get(config_mod.load(state.config), "loop.callsPerHour"))
    if rate <= configured:
        return
    from clavain.authority import who_asks

    asker = who_asks()
    if not asker.is_person:  # no slash command runs a headless loop: only a terminal
        from clavain.errors import ClavainError

        raise ClavainError(f"--rate {rate} above loop.callsPerHour ({configured}) is a "
                           f"person's decision, not an agent's ({asker.detail}): the user runs "
                           f"`clavain loop --rate {rate}` in a terminal, or keeps --rate at "
                           f"{configured} or below")


RATE_ACTION = "emptying the loop's calls-per-hour window"
RATE_IN_CLAUDE_CODE = "/clavain:loop --reset-rate"
RATE_IN_TERMINAL = "clavain loop --reset-rate"


def _rate(state: Any, args: argparse.Namespace) -> int:
    from clavain.loop import controls

    reset_by = None
    if args.reset_rate:
        from clavain.authority import require_person

        reset_by = require_person(RATE_ACTION, typed=None, in_claude_code=RATE_IN_CLAUDE_CODE,
                                  in_terminal=RATE_IN_TERMINAL)
    status = controls.rate(state, reset_by=reset_by)
    emit_json(status) if args.json else print(controls.render_rate(status), end="")
    return 0


def _parse_status(args: argparse.Namespace) -> int:
    from clavain.cli._input import read_input
    from clavain.errors import ClavainError
    from clavain.loop.status_block import parse

    try:
        parsed = parse(read_input(args.source))  # not UTF-8: refused, as everywhere
    except ClavainError as exc:
        if args.json:
            emit_json({"error": str(exc)})
            return 2
        raise
    if args.json:
        emit_json(parsed)
    else:
        import json

        for key, value in parsed.items():
            print(f"{key}: {json.dumps(value) if isinstance(value, bool) else value}")
    return 0


def _summary(args: argparse.Namespace) -> int:
    from clavain.loop.records import render_summary, summary
    from clavain.paths import StatePaths

    data = summary(StatePaths.discover(), args.run)
    emit_json(data) if args.json else print(render_summary(data), end="")
    return 0


def parse_loop_arguments(text: str) -> dict[str, Any]:
    """`[--max-iterations N] [--automation M] TASK | --cancel | --reset-circuit RUN |
    --reset-rate`: options lead, the rest is the task verbatim (no shell ever parses it); `--`
    ends the options."""
    from clavain.errors import ClavainError

    found: dict[str, Any] = {"cancel": False, "max_iterations": None, "automation": None,
                             "reset_circuit": None, "reset_rate": False}
    rest = text.strip()
    while rest.startswith("--"):
        word, rest = [*rest.split(None, 1), ""][:2]
        name, equals, value = word.partition("=")
        if name == "--":
            break
        if name in ("--cancel", "--reset-rate") and not equals:
            found[name[2:].replace("-", "_")] = True
            continue
        if name not in ("--max-iterations", "--automation", "--reset-circuit"):
            raise ClavainError(f"unknown option {name!r} (/clavain:loop [--max-iterations N] "
                               "[--automation auto|ask|plan] TASK | --cancel | "
                               "--reset-circuit RUN | --reset-rate)")
        if not equals:
            value, rest = [*rest.split(None, 1), "", ""][:2]
        found[name[2:].replace("-", "_")] = value
    limit = found["max_iterations"]
    if limit is not None:
        if not limit.isascii() or not limit.isdigit() or int(limit) < 1:
            raise ClavainError(f"--max-iterations {limit!r} is not a whole number ≥ 1")
        found["max_iterations"] = int(limit)
    if found["cancel"] and (rest or limit or found["automation"]):
        raise ClavainError("--cancel takes nothing else")
    if found["reset_circuit"] is not None and (rest or limit or found["automation"]
                                               or found["cancel"]
                                               or not found["reset_circuit"]):
        raise ClavainError("--reset-circuit RUN names the loop run and takes nothing else")
    if found["reset_rate"] and (rest or limit or found["automation"] or found["cancel"]
                                or found["reset_circuit"] is not None):
        raise ClavainError("--reset-rate takes nothing else")
    return {**found, "task": rest}


def _session_id(explicit: str | None) -> str:
    """The session a `loop session-start`/`cancel` acts on. Inside Claude Code: the host's own
    (what it gave the command, not what `X=… clavain` says), and `--session` may only repeat it:
    one session's agent never reaches another's loop. Elsewhere: `--session` or the variable
    (what then acts is a person's decision, asked of `clavain.authority` by the caller)."""
    import os

    from clavain import authority
    from clavain.errors import ClavainError
    from clavain.sprint.typed_request import SESSION_VARIABLE

    try:
        inside = authority.host_chain() is not None
    except Exception:  # cannot be told: take only what a host would give
        inside = True
    if inside:
        own = authority.session_id()
        if not own:
            raise ClavainError(f"no session: Claude Code runs this command but gave it no "
                               f"${SESSION_VARIABLE}")
        if explicit is not None and explicit != own:
            raise ClavainError(f"--session {explicit[:60]!r} is not this Claude Code session "
                               f"({own}): a session acts only on its own loop; the person "
                               f"runs `clavain loop … --session {explicit[:60]}` in a terminal")
        return own
    session = explicit or os.environ.get(SESSION_VARIABLE)
    if not session:
        raise ClavainError(f"no session: ${SESSION_VARIABLE} is not set (outside Claude Code "
                           "pass --session ID)")
    return session


def _session_start(args: argparse.Namespace) -> int:

    from clavain.loop import session_loop
    from clavain.paths import StatePaths
    from clavain.project import ensure_state

    state = ensure_state(StatePaths.discover())
    session = _session_id(args.session)
    record = None
    if args.from_prompt:
        from clavain.sprint.typed_request import take_record

        record = take_record(state, session, kind="loop")
        options = parse_loop_arguments(record["arguments"])
    else:
        options = {"cancel": False, "max_iterations": args.max_iterations,
                   "automation": args.automation, "task": " ".join(args.task),
                   "reset_circuit": None, "reset_rate": False}
    resetting = options["reset_circuit"] is not None
    if options["cancel"]:
        _require_cancel(record)
        return _print_cancelled(session_loop.cancel(state, session), args.json)
    if options["reset_rate"]:
        from clavain.authority import require_person
        from clavain.loop import controls

        status = controls.rate(state, reset_by=require_person(
            RATE_ACTION, typed=record, in_claude_code=RATE_IN_CLAUDE_CODE,
            in_terminal=RATE_IN_TERMINAL))
        emit_json(status) if args.json else print(controls.render_rate(status), end="")
        return 0
    # A loop of a session, and its breaker, start and close only when a person says so: the
    # agent's own Bash call must not loop a session its person never asked to loop.
    from clavain.authority import require_person

    decided_by = require_person(
        "closing a loop's circuit breaker" if resetting else "looping a session",
        typed=record, in_claude_code="/clavain:loop --reset-circuit RUN"
        if resetting else "/clavain:loop TASK",
        in_terminal="clavain loop --reset-circuit --run RUN" if resetting
        else "clavain loop session-start --session ID TASK")
    if resetting:
        from clavain.loop import controls

        status = controls.circuit(state, options["reset_circuit"], reset_by=decided_by)
        emit_json(status) if args.json else print(controls.render_circuit(status), end="")
        return 0
    started = session_loop.start(state, session, options["task"],
                                 max_iterations=options["max_iterations"],
                                 automation=options["automation"], graph=args.graph)
    emit_json(started) if args.json else print(started["prompt"].rstrip("\n"))
    return 0


def _session_cancel(args: argparse.Namespace) -> int:
    from clavain.loop import session_loop
    from clavain.paths import StatePaths

    session = _session_id(args.session)
    _require_cancel(None)
    return _print_cancelled(session_loop.cancel(StatePaths.discover(), session), args.json)


def _require_cancel(record: dict[str, Any] | None) -> dict[str, Any]:
    """Ending a running `/clavain:loop` is its person's call: the agent it loops must not end
    it from its Bash tool to escape the loop's checks."""
    from clavain.authority import require_person

    return require_person("ending a session's /clavain:loop", typed=record,
                          in_claude_code="/clavain:loop --cancel",
                          in_terminal="clavain loop cancel --session ID")


def _print_cancelled(summary: dict, as_json: bool) -> int:
    from clavain.loop.records import render_summary

    if as_json:
        emit_json(summary)
    else:
        print(render_summary(summary), end="")
        print("The Clavain loop of this session is cancelled: reply with one line saying so and "
              "start no work.")
    return 0
