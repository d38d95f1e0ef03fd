"""`clavain graph …`: the workgraph from the command line.

`GRAPH_SUBPARSERS` holds the `graph` subcommand action once `register` ran, so other modules
(loaded after this one, alphabetically) add their own `graph` subcommands to it.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from clavain.cli._input import read_input
from clavain.cli._output import add_command, add_json_flag, emit_json, print_table
from clavain.cli._state import open_existing, open_for_read, open_for_write

GRAPH_SUBPARSERS: argparse._SubParsersAction | None = None

EXIT_NOTHING_RUNNABLE = 3
LIST_COLUMNS = ["id", "type", "status", "attempts", "runner", "dependsOn", "title"]
STATUSES = ("open", "in_progress", "done", "failed", "needs_human")
TYPES = ("plan", "epic", "task", "verify", "integrate", "final_verify")


def register(commands: argparse._SubParsersAction) -> None:
    global GRAPH_SUBPARSERS
    graph = add_command(commands, "graph", "the workgraph: add, import, list, claim, apply",
                        _no_subcommand)
    sub = graph.add_subparsers(dest="graph_command", metavar="SUBCOMMAND")
    GRAPH_SUBPARSERS = sub

    p = add_command(sub, "add", "add one node", _add)
    p.add_argument("--id", required=True)
    p.add_argument("--type", required=True, choices=TYPES)
    p.add_argument("--title", default="")
    p.add_argument("--parent")
    p.add_argument("--dep", action="append", default=[], metavar="ID", help="repeatable")
    p.add_argument("--verify", action="append", default=[], metavar="CMD", help="repeatable")
    p.add_argument("--runner")
    add_json_flag(p)

    p = add_command(sub, "import", 'add nodes from {"nodes": [...]} in one transaction', _import)
    p.add_argument("file", metavar="FILE|-")
    add_json_flag(p)

    p = add_command(sub, "ls", "list nodes in selection order", _ls)
    p.add_argument("--status", choices=STATUSES)
    add_json_flag(p)

    p = add_command(sub, "show", "one node with its deps and checkpoint", _show)
    p.add_argument("id")
    add_json_flag(p)

    p = add_command(sub, "next", "the next runnable node (exit 3 when there is none)", _next)
    p.add_argument("--claim", action="store_true", help="lock it for this run")
    p.add_argument("--run-id", help="run that claims (default $CLAVAIN_RUN_ID or a new id)")
    p.add_argument("--pid", type=int, help="process holding the lock (default: lease only)")
    add_json_flag(p)

    p = add_command(sub, "apply", "record a runner's result for a node", _apply)
    p.add_argument("id")
    p.add_argument("--result", required=True, metavar="FILE|-",
                   help="text holding <result>…</result>, or raw JSON")
    p.add_argument("--run-id")
    p.add_argument("--stdout-path", help="runner log, recorded as out.last_stdout_path")
    p.add_argument("--result-path", help="parsed result file, recorded as out.last_result_path")
    add_json_flag(p)

    p = add_command(sub, "answer", "answer a checkpointed (needs_human) node", _answer)
    p.add_argument("id")
    p.add_argument("--answer", required=True)
    add_json_flag(p)

    p = add_command(sub, "scaffold", "add missing verify, integrate and final_verify nodes",
                    _scaffold)
    add_json_flag(p)

    p = add_command(sub, "reset", "reopen a node (attempts, backoff and lock cleared)", _reset)
    p.add_argument("id")
    add_json_flag(p)

    p = add_command(sub, "deadlock", "report open work that can never run", _deadlock)
    p.add_argument("--auto-reset", action="store_true",
                   help="reopen failed blockers (at most defaults.autoResetFailedMax times)")
    add_json_flag(p)

    p = add_command(sub, "export", "rewrite .clavain/workgraph.json", _export)
    add_json_flag(p)

    add_command(sub, "mermaid", "print the graph as a Mermaid flowchart", _mermaid)


def _no_subcommand(args: argparse.Namespace) -> int:
    from clavain.errors import ClavainError

    raise ClavainError("missing subcommand; `clavain graph --help` lists them")


def _print_node(node: dict[str, Any]) -> None:
    for key in ("id", "type", "status", "title", "parentId", "runner", "dependsOn", "attempts",
                "blockedUntil", "lockRunId"):
        value = node.get(key)
        if value not in (None, "", []):
            print(f"{key + ':':<14}{', '.join(value) if isinstance(value, list) else value}")
    for key in ("inputs", "acceptance", "verify", "ownership", "checkpoint"):
        if node.get(key):
            print(f"{key + ':':<14}{json.dumps(node[key])}")


def _add(args: argparse.Namespace) -> int:
    from clavain.workgraph import graph

    spec = {"id": args.id, "type": args.type, "title": args.title, "dependsOn": args.dep,
            "parent": args.parent, "runner": args.runner, "verify": args.verify}
    specs = [{k: v for k, v in spec.items() if v is not None}]
    graph.validate_specs(specs)  # bad input is refused before `.clavain/` is created
    state, conn = open_for_write()
    graph.add_nodes(conn, state, specs)
    node = graph.get_node(conn, args.id)
    emit_json(node) if args.json else print(f"added {args.id}")
    return 0


def _import(args: argparse.Namespace) -> int:
    from clavain.errors import ClavainError
    from clavain.workgraph import graph

    text = read_input(args.file)
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise ClavainError(f"{args.file}: not valid JSON ({exc})") from None
    graph.validate_specs(graph.import_specs(document))  # refused before `.clavain/` exists
    state, conn = open_for_write()
    added = graph.import_nodes(conn, state, document)
    emit_json({"added": added}) if args.json else print(f"added {len(added)} node(s)")
    return 0


def _ls(args: argparse.Namespace) -> int:
    from clavain.workgraph import graph

    _state, conn = open_for_read()
    nodes = graph.list_nodes(conn, args.status)
    emit_json(nodes) if args.json else print_table(nodes, LIST_COLUMNS)
    return 0


def _show(args: argparse.Namespace) -> int:
    from clavain.workgraph import graph

    _state, conn = open_for_read()
    node = graph.require_node(conn, args.id)
    emit_json(node) if args.json else _print_node(node)
    return 0


def _next(args: argparse.Namespace) -> int:
    from clavain import config
    from clavain.errors import ClavainError
    from clavain.workgraph import deadlock, graph
    from clavain.workgraph.runner_env import current_run_id

    if args.pid is not None and args.pid <= 0:
        raise ClavainError(f"--pid must be a positive process id, got {args.pid}")
    state, conn = open_for_read()  # nothing to claim without a database
    cfg = config.load(state.config)
    lease = float(config.get(cfg, "defaults.lockLeaseSeconds", 3600))
    released = graph.release_stale_locks(conn, lease_seconds=lease)
    run_id = current_run_id(args.run_id)

    def pick() -> dict[str, Any] | None:
        if args.claim:
            return graph.claim_next(conn, run_id=run_id, pid=args.pid)
        found = graph.select_next(conn)
        return graph.get_node(conn, found) if found else None

    node = pick()
    reset: list[str] = []
    if node is None and deadlock.detect(conn):
        reset = deadlock.auto_reset(conn, state, cfg)
        node = pick() if reset else None
    if released or (node and args.claim):
        from clavain.workgraph.export import write_snapshot

        write_snapshot(conn, state)
    if node is not None:
        emit_json(node) if args.json else _print_node(node)
        return 0
    report = deadlock.detect(conn)
    reason = deadlock.describe(report) if report else "nothing is runnable right now"
    if args.json:
        emit_json({"node": None, "reason": reason, "deadlock": report})
    else:
        print(reason, file=sys.stderr)
    return EXIT_NOTHING_RUNNABLE


def _apply(args: argparse.Namespace) -> int:
    from clavain.workgraph.results import apply_result

    text = read_input(args.result, lenient=True)
    state, conn = open_existing()
    summary = apply_result(conn, state, args.id, text, run_id=args.run_id,
                           stdout_path=args.stdout_path, result_path=args.result_path)
    if args.json:
        emit_json(summary)
        return 0
    line = f"{summary['node']}: {summary['from']} -> {summary['to']}"
    if summary["added"]:
        line += f"; added {', '.join(summary['added'])}"
    if summary["escalation"]:
        line += f"; escalated to {summary['escalation']}"
    if summary["blockedUntil"]:
        line += f"; retry after {summary['blockedUntil']}"
    print(line)
    return 0


def _answer(args: argparse.Namespace) -> int:
    from clavain.workgraph import graph
    state, conn = open_existing()
    node = graph.answer(conn, state, args.id, args.answer)
    emit_json(node) if args.json else print(f"{args.id}: needs_human -> open")
    return 0


def _scaffold(args: argparse.Namespace) -> int:
    from clavain.workgraph.scaffold import ensure_scaffolding

    state, conn = open_for_write()
    report = ensure_scaffolding(conn, state)
    if args.json:
        emit_json(report)
        return 0
    made = [*report["verify"], *(x for x in (report["integrate"], report["final"]) if x)]
    print(f"added {', '.join(made)}" if made else "scaffolding already complete")
    if report["reopened"]:
        print(f"reopened {', '.join(report['reopened'])} (new verify nodes)")
    return 0


def _reset(args: argparse.Namespace) -> int:
    from clavain.workgraph import graph
    state, conn = open_existing()
    node = graph.reset(conn, state, args.id)
    emit_json(node) if args.json else print(f"{args.id}: reopened")
    return 0


def _deadlock(args: argparse.Namespace) -> int:
    from clavain.workgraph import deadlock

    state, conn = open_for_write() if args.auto_reset else open_for_read()
    reset = deadlock.auto_reset(conn, state) if args.auto_reset else []
    report = deadlock.detect(conn)
    if args.json:
        emit_json({"deadlock": report, "reset": reset})
    else:
        if reset:
            print(f"reopened {', '.join(reset)}")
        print(deadlock.describe(report) if report else "no deadlock")
    return 0


def _export(args: argparse.Namespace) -> int:
    from clavain.workgraph.export import write_snapshot

    state, conn = open_for_write()
    write_snapshot(conn, state)
    count = conn.execute("SELECT count(*) FROM nodes").fetchone()[0]
    path = str(state.workgraph_json)
    emit_json({"path": path, "nodes": count}) if args.json else print(path)
    return 0


def _mermaid(args: argparse.Namespace) -> int:
    from clavain.workgraph.export import mermaid

    _state, conn = open_for_read()
    sys.stdout.write(mermaid(conn))
    return 0
