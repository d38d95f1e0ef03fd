"""`clavain budget status|reset` and `clavain report`: what a run spent of its budgets."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from clavain.cli._output import add_command, add_json_flag, emit_json, print_table
from clavain.cli.page import add_report_flags, check_report_flags, write_report_page

if TYPE_CHECKING:
    from clavain.paths import StatePaths


def register(commands: argparse._SubParsersAction) -> None:
    budget = add_command(commands, "budget", "budgets of the current run (status, reset)",
                         lambda args: (budget.print_help(), 0)[1])
    sub = budget.add_subparsers(dest="budget_command", metavar="COMMAND")
    status = add_command(sub, "status", "each budget used of its limit, for the current run "
                         "(this session's, else the active sprint's, else the last one)",
                         _status)
    status.add_argument("--run", metavar="RUN", help="another run: `sprint:<id>`, "
                        "`session:<id>`, a `clavain run` or `clavain loop` id, or the bare id")
    add_json_flag(status)
    reset = add_command(sub, "reset", "forget the current run's counts (a person's decision "
                        "to give it more room)", _reset)
    reset.add_argument("--run", metavar="RUN", help="another run: `sprint:<id>`, "
                       "`session:<id>` or the bare id")
    reset.add_argument("--from-prompt", action="store_true",
                       help="what the person typed after /clavain:budget (recorded by the "
                            "UserPromptSubmit hook): how a person resets inside Claude Code")
    add_json_flag(reset)
    report = add_command(commands, "report", "what a run spent: budgets, top commands, denied "
                         "calls, repeated patches, tokens and cost; --html: the page of a "
                         "sprint or run", _report)
    report.add_argument("--run", metavar="RUN", help="another run: `sprint:<id>`, "
                        "`session:<id>`, a `clavain run` or `clavain loop` id, or the bare id "
                        "(default: the current run); a `clavain run` adds its metrics, a "
                        "`clavain loop` its summary")
    report.add_argument("--routing", action="store_true",
                        help="the routing of every recorded sprint start instead: agreement "
                             "with the classifier, overrides by who and which way, classifier "
                             "x used, the cues behind the misses")
    add_report_flags(report)
    add_json_flag(report)


def _readable_settings(state: StatePaths) -> None:
    """A config file that is not JSON text at all is refused by the one decoding rule, as every
    other command refuses it; a wrong setting in a readable one is a problem shown beside the
    limits (the hook applies the defaults meanwhile)."""
    from clavain.errors import ClavainError
    from clavain.fsutil import UnsafePathError, read_state_file
    from clavain.textio import BadText, decode, load_json

    path = state.config
    try:
        raw = read_state_file(path)
        if raw is not None:
            load_json(decode(raw, str(path)), str(path))
    except UnsafePathError as exc:
        raise ClavainError(str(exc)) from None
    except BadText as exc:
        raise ClavainError(f"{exc}; fix or remove the file") from None
    except OSError as exc:
        raise ClavainError(f"{path}: unreadable ({exc.strerror or exc})") from None


def _settings_error(state: StatePaths) -> str | None:
    """Every wrong key or value of a readable config file, in words (`config.load`'s message),
    or None: shown beside the limits, whose own problems are named too."""
    from clavain import config
    from clavain.errors import ClavainError

    _readable_settings(state)
    try:
        config.load(state.config)
    except ClavainError as exc:
        return str(exc)
    return None


def _status(args: argparse.Namespace) -> int:
    from clavain.authority import session_id
    from clavain.guards.budget import amount
    from clavain.paths import StatePaths
    from clavain.supervisor.run_report import report_for

    state = StatePaths.discover()
    settings_error = _settings_error(state)
    # report_for: a `clavain run` or `clavain loop` id names its budget run `run:<id>`.
    report = report_for(state, args.run, session_id=session_id())
    windows = _windows(state)
    # A wrong setting is an error (the exit says so), shown beside the limits the hook
    # applies meanwhile (its defaults).
    failed = 2 if report["problems"] or settings_error else 0
    if settings_error:
        print(f"clavain: error: {settings_error}", file=sys.stderr)
    if args.json:
        emit_json({**{key: report[key] for key in ("run", "profile", "scope", "budgets",
                                                    "problems", "reservations") if key in report},
                   "windows": windows})
        return failed
    for problem in report["problems"]:
        print(f"clavain: error: budget settings: {problem}", file=sys.stderr)
    print(f"Run {report['run']} ({report['profile']}/{report['scope']})")
    print_table([{"budget": b["budget"], "used": amount(b["used"]),
                  "limit": amount(b["limit"]),
                  "left": amount(max(b["limit"] - b["used"], 0))} for b in report["budgets"]],
                ["budget", "used", "limit", "left"])
    if report.get("reservations"):
        _print_reservations(report["reservations"])
    _print_windows(windows)
    return failed


def _windows(state: StatePaths) -> dict:
    import time

    from clavain.guards.window import status

    return status(str(state.root), time.time())


def _print_windows(windows: dict) -> None:
    """The subscription's windows against budgets.windowShareMax (the host's last figures)."""
    from clavain.guards.window import NAMES, percent

    share = "off" if windows["share_max"] is None else percent(windows["share_max"])
    if windows["windows"]:
        print(f"Subscription windows (budgets.windowShareMax: {share})")
        print_table([{"window": NAMES.get(w["window"], w["window"]),
                      "used": percent(w["used_percent"]) + (" (over)" if w["over"] else ""),
                      "share": share, "resets": w["resets"]} for w in windows["windows"]],
                    ["window", "used", "share", "resets"])
    elif windows["share_max"] is not None:
        print(f"Subscription windows: none reported yet (budgets.windowShareMax: {share})")


def _print_reservations(found: dict) -> None:
    """Spent (measured + charged), reserved and headroom of the run's dollars and tokens."""
    reserved, charged, headroom = found["reserved"], found["reserved"]["charged"], \
        found["headroom"]
    print(f"Reserved: {reserved['count']} (${reserved['cost_usd']:.4f}, "
          f"{reserved['tokens']:,} tokens), of which charged {charged['count']} "
          f"(${charged['cost_usd']:.4f}, {charged['tokens']:,} tokens)")
    print(f"Spent: ${found['spent']['cost_usd']:.4f}, {found['spent']['tokens']:,} tokens "
          "(measured + charged)")
    if headroom["cost_usd"] is not None:
        print(f"Headroom: ${headroom['cost_usd']:.4f}, {headroom['tokens']:,.0f} tokens")


def _reset(args: argparse.Namespace) -> int:
    from clavain.authority import require_person
    from clavain.guards.report import project_reset
    from clavain.paths import StatePaths

    state = StatePaths.discover()
    record = None
    session = None
    if args.from_prompt:
        from clavain.errors import ClavainError
        from clavain.sprint import typed_request

        record = typed_request.take_record(state, kind="budget")
        words = record["arguments"].replace("--run=", "--run ", 1).split()
        if words[:1] != ["reset"] or len(words) not in (1, 3) or (
                len(words) == 3 and words[1] != "--run"):
            raise ClavainError("/clavain:budget takes `reset` or `reset --run RUN`, got "
                               f"{record['arguments']!r}")
        args.run = words[2] if len(words) == 3 else None
        session = record.get("session_id")
    decided_by = require_person("resetting a run's budget", typed=record,
                                in_claude_code="/clavain:budget reset",
                                in_terminal="clavain budget reset")
    done = project_reset(state, args.run, decided_by, session)
    if args.json:
        emit_json(done)
    else:
        print(f"Reset {done['run']}: {done['calls_removed']} call(s) forgotten")
    return 0


def _report(args: argparse.Namespace) -> int:
    from clavain.authority import session_id
    from clavain.guards.report import render
    from clavain.page.subjects import report_shown
    from clavain.paths import StatePaths
    from clavain.supervisor.run_report import render_supervised

    if args.routing:
        return _routing(args)
    check_report_flags(args)
    if args.html is not None:
        return write_report_page(args)
    state = StatePaths.discover()
    settings_error = _settings_error(state)
    if settings_error:
        print(f"clavain: error: {settings_error}", file=sys.stderr)
    report = report_shown(state, args.run, session_id=session_id())
    if args.json:
        emit_json(report)
    else:
        print(render(report), end="")
        for supervised in [report.get("supervised_run"), *report.get("graph_runs", [])]:
            if supervised:
                print(render_supervised(supervised), end="")
        if report.get("loop_run"):
            from clavain.loop.records import render_summary

            print("\n" + render_summary(report["loop_run"]), end="")
    # The report is shown whole; a wrong setting in it still makes the exit say so.
    return 2 if settings_error or report.get("problems") else 0


def _routing(args: argparse.Namespace) -> int:
    """`clavain report --routing`: across sprints, so it names no run, sprint, graph or page."""
    from clavain.errors import ClavainError
    from clavain.paths import StatePaths
    from clavain.sprint.routing_log import render, report

    named = [flag for flag, value in (("--run", args.run), ("--sprint", args.sprint),
                                      ("--graph", args.graph), ("--html", args.html),
                                      ("--watch", args.watch),
                                      ("--interval", args.interval))
             if value not in (None, False)]
    if named:
        raise ClavainError(f"--routing reads every recorded sprint start; it takes --json, "
                           f"not {named[0]}")
    found = report(StatePaths.discover())
    if args.json:
        emit_json(found)
    else:
        print(render(found), end="")
    return 0
