"""`clavain verify ID`: the shell verifier (no LLM) for a verify node."""

from __future__ import annotations

import argparse
import sys
from contextlib import closing

from clavain.cli._output import add_command, add_json_flag, emit_json
from clavain.cli._state import add_graph_flag, existing_graph


def register(commands: argparse._SubParsersAction) -> None:
    verify = add_command(commands, "verify",
                         "run a verify node's commands and record the result (no LLM)", _verify)
    verify.add_argument("node_id", metavar="ID", help="the verify node")
    verify.add_argument("--no-apply", dest="apply", action="store_false",
                        help="only run and print the <result>; leave the graph unchanged")
    verify.add_argument("--timeout", type=float, metavar="SECONDS",
                        help="per-command limit (default: defaults.verifyTimeoutSeconds)")
    verify.add_argument("--run-id", help="the run claiming the node (default: $CLAVAIN_RUN_ID, "
                        "else a new id; a node claimed by another run is refused)")
    add_graph_flag(verify)
    add_json_flag(verify)


def _verify(args: argparse.Namespace) -> int:
    from clavain.workgraph.runner_env import refuse_other_node
    from clavain.workgraph.shell import Interrupted
    from clavain.workgraph.verifier import result_line, run_verify

    if args.apply:  # a check run without recording it is anyone's to run
        refuse_other_node(args.node_id, "record the check of")
    g = existing_graph(args.graph)
    with closing(g.conn):
        try:
            report = run_verify(g, args.node_id, apply=args.apply, timeout=args.timeout,
                                run_id=args.run_id)
        except Interrupted as exc:
            what = ("the result was recorded first" if exc.recorded else
                    "the command's processes were stopped and the node released")
            print(f"clavain: {exc}; {what}", file=sys.stderr)
            return 128 + exc.signum
    result = report["result"]
    for warning in report["budget"]["warnings"]:  # the budget's 80 % and last-run notes
        print(f"clavain: {warning}", file=sys.stderr)
    if args.json:
        emit_json(report)
    else:
        for command in report["commands"]:
            mark = "ok  " if command["exit_code"] == 0 else "FAIL"
            print(f"{mark} {command['index']}: {command['command']}  ({command['log']})")
        # Last line, so a supervisor running this as a runner command finds it in stdout.
        print(result_line(result))
    return 0 if result["status"] == "success" else 1
