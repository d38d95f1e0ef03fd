"""`clavain run` (the headless supervisor) and `clavain microcall` (one cheap runner call)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clavain.cli._input import positive_int
from clavain.cli._output import add_command, add_json_flag, emit_json
from clavain.cli._state import add_graph_flag

if TYPE_CHECKING:
    from clavain.paths import StatePaths
    from clavain.supervisor.supervise import RunOptions


def register(commands: argparse._SubParsersAction) -> None:
    run = add_command(commands, "run", "drive the workgraph headless: a fresh runner per node, "
                      "checks with no LLM, until done, blocked or out of budget", _run)
    run.add_argument("--workers", type=positive_int, metavar="N",
                     help="nodes run at once (default: supervisor.workers, 1); more than one "
                          "gives each LLM runner its own git worktree")
    run.add_argument("--max-iterations", type=positive_int, metavar="N",
                     help="start at most N runner calls, then stop cleanly")
    run.add_argument("--once", action="store_true", help="run one node, then stop")
    run.add_argument("--dry-run", action="store_true",
                     help="print the nodes, their runner and model, and the projected calls, "
                          "tokens and cost against the budget, and how many fit it in "
                          "dispatch order (the reservation plan); run nothing")
    run.add_argument("--runner", metavar="R", help="the runner of planner, escalation and "
                     "executor nodes for this run (claude, shell or a configured runner)")
    which = run.add_mutually_exclusive_group()
    which.add_argument("--resume", metavar="RUN", help="continue run RUN (after a crash or a "
                       "stop): its graph, its runner and workers unless given, its metrics")
    which.add_argument("--run-id", metavar="ID", help="name this run (default: a new "
                       "run-<time>-<hex>); an id already used is refused (use --resume)")
    run.add_argument("--packet-mode", choices=("full", "thin"),
                     help="override supervisor.packetMode")
    add_wait_on_limit_flag(run)
    run.add_argument("--html", metavar="FILE", type=Path,
                     help="keep an HTML page of the run in FILE: rewritten every few seconds "
                          "while it runs (the page reloads itself), and once it ends")
    add_graph_flag(run)
    add_json_flag(run)

    micro = add_command(commands, "microcall", "one runner call with the microcall template; "
                        "prints the JSON it answers", _microcall)
    micro.add_argument("--prompt", required=True, help="the question")
    who = micro.add_mutually_exclusive_group()
    who.add_argument("--runner", metavar="R", help="claude or a configured runner")
    who.add_argument("--role", choices=("microcall", "researcher"), default="microcall",
                     help="whose route (supervisor.roles) to take (default: microcall)")
    micro.add_argument("--store-key", metavar="K", help="store the answer under KV key K "
                       "(of the current node, $CLAVAIN_NODE_ID)")
    micro.add_argument("--run", action="store_true",
                       help="store in the run namespace (__run__) instead")
    add_graph_flag(micro)
    add_json_flag(micro)


def add_wait_on_limit_flag(parser: argparse.ArgumentParser) -> None:
    """`--wait-on-limit` / `--no-wait-on-limit` (`clavain run` and `clavain loop`)."""
    parser.add_argument("--wait-on-limit", action=argparse.BooleanOptionalAction, default=None,
                        help="past budgets.windowShareMax of the subscription's 5-hour or "
                             "weekly window: wait for its reset with a countdown, then go on "
                             "(the default: supervisor.waitOnLimit), or end saying when it "
                             "would resume")


def _run(args: argparse.Namespace) -> int:
    from clavain.paths import StatePaths
    from clavain.supervisor import progress
    from clavain.supervisor.supervise import RunOptions, run_to_start, supervise

    if args.resume and args.graph:
        from clavain.errors import ClavainError

        raise ClavainError("--resume continues on the run's own graph; drop --graph")
    state = StatePaths.discover()
    options = RunOptions(workers=args.workers, runner=args.runner, resume=args.resume,
                         run_id=args.run_id,
                         graph=args.graph, packet_mode=args.packet_mode,
                         max_iterations=1 if args.once else args.max_iterations,
                         wait_on_limit=args.wait_on_limit)
    if args.dry_run:
        from clavain.supervisor.projection import project

        if args.html is not None:
            from clavain.errors import ClavainError

            raise ClavainError("--dry-run runs nothing, so there is no run for --html to show")

        options, graph_id = run_to_start(state, options)  # a resumed run's own runner
        plan = project(state, graph_id, runner_override=options.runner,
                       run_id=args.resume or "dry-run")
        if args.json:
            emit_json(plan)
        else:
            progress.print_plan(plan)
        return 0
    from clavain.store.faults import StoreDamaged

    try:
        if args.html is None:
            report = supervise(state, options, progress.Printer(sys.stderr))
        else:
            report = _supervise_with_page(state, options, args.html)
    except StoreDamaged as exc:
        if not args.json:
            raise  # one line, as every command says it
        # Found damaged as the run started (its first open checks the file): the run's
        # ending, as when a worker finds it, with nothing claimed.
        emit_json({"status": "blocked", "reason": "store_damaged", "message": str(exc),
                   "error": str(exc), "store": "damaged", "exit_code": 1})
        return 1
    if args.json:
        emit_json(report)
    else:
        progress.print_final(report)
    return int(report["exit_code"])


def _supervise_with_page(state: StatePaths, options: RunOptions, html: Path) -> dict[str, Any]:
    """The run, with its page kept by a thread of this process (no server, no daemon)."""
    from dataclasses import replace

    from clavain.page.writer import LivePage, check_target
    from clavain.supervisor import progress
    from clavain.supervisor.supervise import supervise
    from clavain.workgraph.runner_env import new_run_id

    target = check_target(state, html)
    if options.resume is None and options.run_id is None:
        options = replace(options, run_id=new_run_id())  # the page must know it beforehand
    run_id = options.resume or options.run_id
    with LivePage(state, str(run_id), target) as page:
        report = supervise(state, options, progress.Printer(sys.stderr))
    if page.problem:
        print(f"clavain: warning: the page {target}: {page.problem}", file=sys.stderr)
    else:
        print(f"clavain: the run's page: {target.as_uri()}", file=sys.stderr)
    return report


def _microcall(args: argparse.Namespace) -> int:
    from clavain.paths import StatePaths
    from clavain.supervisor.microcall import microcall

    answer = microcall(StatePaths.discover(), args.prompt, runner=args.runner, role=args.role,
                       store_key=args.store_key, store_in_run=args.run, graph=args.graph)
    if args.json:
        emit_json(answer)
    else:
        import json

        print(json.dumps(answer["value"], indent=2))
    return 0
