"""`clavain report --html FILE [--watch]` and `clavain run --html FILE`: the HTML page of a
sprint, a run, a loop run or a graph (`clavain.page`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from clavain.cli._output import emit_json


def seconds(text: str) -> float:
    """An argparse type: a number of seconds, at least 0.2 (a browser reloads no faster)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0.2 <= value <= 3600:
        raise argparse.ArgumentTypeError("must be between 0.2 and 3600 seconds")
    return value


def add_report_flags(report: argparse.ArgumentParser) -> None:
    report.add_argument("--html", metavar="FILE", type=Path,
                        help="write one self-contained HTML page (graph, timeline, budgets, "
                             "verdicts, route and gates, loop runs) for the active sprint, else "
                             "what ran last, or the --run/--sprint/--graph named; FILE ends in "
                             ".html, in a folder that exists outside .clavain/, and is new or "
                             "a page Clavain wrote (any other file is left alone)")
    report.add_argument("--sprint", metavar="ID", help="the page of sprint ID (with --html)")
    report.add_argument("--graph", metavar="ID", help="the page of workgraph ID (with --html)")
    report.add_argument("--watch", action="store_true",
                        help="with --html: rewrite the page every few seconds while the run or "
                             "sprint is live (the page reloads itself), then stop")
    report.add_argument("--interval", type=seconds, metavar="S",
                        help="seconds between rewrites with --watch (default: 3)")


def check_report_flags(args: argparse.Namespace) -> None:
    from clavain.errors import ClavainError

    named = [flag for flag, value in (("--run", args.run), ("--sprint", args.sprint),
                                      ("--graph", args.graph)) if value is not None]
    if len(named) > 1:
        raise ClavainError(f"{' and '.join(named)} each name what the page shows; give one")
    if args.html is None:
        needs = [flag for flag, value in (("--sprint", args.sprint), ("--graph", args.graph),
                                          ("--watch", args.watch),
                                          ("--interval", args.interval)) if value]
        if needs:
            raise ClavainError(f"{needs[0]} is for the HTML page; add --html FILE")
    elif args.interval is not None and not args.watch:
        raise ClavainError("--interval sets how often --watch rewrites the page; add --watch")


def _watch(state: Any, subject: Any, target: Path, interval: float | None,
           progress: Any) -> tuple[dict[str, Any], str | None]:
    """`writer.watch` until the subject is finished or a signal (Ctrl-C, a `kill`, the
    terminal closing) stops it: either way the last page written is a still one."""
    import signal

    from clavain.page import writer
    from clavain.stop_flag import StopFlag

    stop = StopFlag()  # set by a signal handler: no lock
    stopped_by: list[str] = []

    def on_signal(signum: int, _frame: object) -> None:
        stopped_by.append(signal.Signals(signum).name)
        stop.set()

    previous = {sig: signal.signal(sig, on_signal)
                for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        written = writer.watch(state, subject, target, stop=stop, on_write=progress,
                               interval=interval or writer.DEFAULT_INTERVAL)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return written, (stopped_by[0] if stopped_by else None)


def write_report_page(args: argparse.Namespace) -> int:
    from clavain.page import writer
    from clavain.paths import StatePaths

    state = StatePaths.discover()
    target = writer.check_target(state, args.html)
    subject = writer.subject_for(state, run=args.run, sprint=args.sprint, graph=args.graph)
    if not args.watch:
        written = writer.write_page(state, subject, target)
    else:
        announced: list[bool] = []

        def progress(event: dict[str, Any]) -> None:
            if not announced:
                announced.append(True)
                print(f"clavain: watching; open {target.as_uri()}", file=sys.stderr)
            print(f"clavain: page written {event['generated_at']} "
                  f"({'live' if event['live'] else 'finished'})", file=sys.stderr, flush=True)

        written, stopped_by = _watch(state, subject, target, args.interval, progress)
        if stopped_by is not None:
            print(f"clavain: stopped watching ({stopped_by}); {target} is a still page now",
                  file=sys.stderr)
            return 130
    if args.json:
        emit_json(written)
        return 0
    subject_text = f"{written['subject']['kind']} {written['subject']['id']}"
    print(f"Wrote {written['path']} ({subject_text}, {written['nodes']} nodes, "
          f"{'live' if written['live'] else 'finished'}); open it in a browser: "
          f"{Path(written['path']).as_uri()}")
    for problem in written["problems"]:
        print(f"clavain: warning: {problem}", file=sys.stderr)
    return 0
