"""`clavain graph …`: the workgraph from the command line. Each handler parses, calls one library
function in `clavain.workgraph`, prints.

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
from clavain.cli._state import add_graph_flag, existing_graph, graph_for_read, graph_for_write
from clavain.workgraph.statuses import NodeStatus

GRAPH_SUBPARSERS: argparse._SubParsersAction | None = None

EXIT_NOTHING_RUNNABLE = 3
LIST_COLUMNS = ["id", "type", "status", "attempts", "runner", "depends_on", "title"]
STATUSES = tuple(status.value for status in NodeStatus)  # plain words: argparse shows them
TYPES = ("plan", "epic", "task", "verify", "integrate", "final_verify")
RUN_ID_HELP = "the run (default: $CLAVAIN_RUN_ID, else a new id)"
FENCE_HELP = ("the claim generation the node was claimed under (default: $CLAVAIN_FENCE for "
              "$CLAVAIN_NODE_ID); refused once the node was claimed again")


def register(commands: argparse._SubParsersAction) -> None:
    global GRAPH_SUBPARSERS
    graph = add_command(commands, "graph", "the workgraph: add, import, list, claim, apply "
                        "(the active sprint's graph unless --graph)", _no_subcommand)
    sub = graph.add_subparsers(dest="graph_command", metavar="SUBCOMMAND")
    GRAPH_SUBPARSERS = sub

    p = add_command(sub, "add", "add one node", _add)
    p.add_argument("--id", required=True, help="unique node id (letters, digits, ._:-)")
    p.add_argument("--type", required=True, choices=TYPES, help="the node's role")
    p.add_argument("--title", default="", help="one line for people")
    p.add_argument("--parent", help="parent node id")
    p.add_argument("--dep", action="append", default=[], metavar="ID",
                   help="a node that must be done first (repeatable)")
    p.add_argument("--verify", action="append", default=[], metavar="CMD",
                   help="a shell command that verifies it (repeatable)")
    p.add_argument("--runner", help="a configured runner (default by type)")
    add_graph_flag(p)
    add_json_flag(p)

    p = add_command(sub, "import",
                    'add nodes from {"nodes": [...]} (schemas/node.schema.json), or --from a '
                    "tracker's file, in one transaction, linted first; importing again updates "
                    "what has not started", _import)
    p.add_argument("file", metavar="FILE|-", help="the file, or - for stdin")
    p.add_argument("--from", dest="fmt", metavar="FORMAT",
                   help="the file's format: github (gh issue list --json number,title,body,"
                        "labels), markdown, beads (.beads/issues.jsonl), taskmaster "
                        "(.taskmaster/tasks/tasks.json)")
    p.add_argument("--accept-lint", metavar="REASON",
                   help="import despite lint errors: a person's decision, recorded on the graph")
    add_graph_flag(p)
    add_json_flag(p)

    p = add_command(sub, "ls", "list nodes in selection order (long cells cut; --json has all)",
                    _ls)
    p.add_argument("--status", choices=STATUSES, help="only nodes with this status")
    p.add_argument("--all", action="store_true",
                   help="every graph's nodes (finished sprints' too), with a graph column")
    add_graph_flag(p)
    add_json_flag(p)

    p = add_command(sub, "show", "one node with its deps and question", _show)
    p.add_argument("id", help="the node")
    add_graph_flag(p)
    add_json_flag(p)

    p = add_command(sub, "next", "the next runnable node, or why there is none (exit 3)", _next)
    p.add_argument("--claim", action="store_true", help="lock it for this run")
    p.add_argument("--run-id", help=RUN_ID_HELP)
    p.add_argument("--pid", type=int,
                   help="process holding the lock; its death releases it (default: lease only)")
    add_graph_flag(p)
    add_json_flag(p)

    p = add_command(sub, "claim", "claim one node by name for a run (refused, saying why, when "
                    "another run holds it, it is not ready, or its files are in use)", _claim)
    p.add_argument("id", help="the node")
    p.add_argument("--run-id", help=RUN_ID_HELP)
    add_graph_flag(p)
    add_json_flag(p)

    p = add_command(sub, "heartbeat", "renew the lease of a node this run holds", _heartbeat)
    p.add_argument("id", help="the claimed node")
    p.add_argument("--run-id", help=RUN_ID_HELP)
    p.add_argument("--fence", type=int, metavar="N", help=FENCE_HELP)
    add_graph_flag(p)
    add_json_flag(p)

    p = add_command(sub, "apply", "record a runner's result for a node", _apply)
    p.add_argument("id", help="the node")
    p.add_argument("--result", required=True, metavar="FILE|-",
                   help="text holding <result>…</result>, or raw JSON (- = stdin)")
    p.add_argument("--run-id", help=RUN_ID_HELP + "; must be the run holding the node")
    p.add_argument("--stdout-path", help="runner log, recorded as out.last_stdout_path")
    p.add_argument("--result-path", help="parsed result file, recorded as out.last_result_path")
    p.add_argument("--fence", type=int, metavar="N", help=FENCE_HELP)
    add_graph_flag(p)
    add_json_flag(p)

    p = add_command(sub, "answer", "answer a node waiting for a person (needs_human)", _answer)
    p.add_argument("id", help="the node")
    p.add_argument("--answer", required=True, help="the answer its next runner sees")
    add_graph_flag(p)
    add_json_flag(p)

    p = add_command(sub, "scaffold", "add missing verify, integrate and final_verify nodes",
                    _scaffold)
    add_graph_flag(p)
    add_json_flag(p)

    p = add_command(sub, "reset", "reopen a node (attempts, backoff and lock cleared)", _reset)
    p.add_argument("id", help="the node")
    add_graph_flag(p)
    add_json_flag(p)

    p = add_command(sub, "deadlock", "report work that can never finish on its own "
                    "(exit 3 when there is some)", _deadlock)
    p.add_argument("--auto-reset", action="store_true",
                   help="reopen failed blockers (at most defaults.autoResetFailedMax times)")
    add_graph_flag(p)
    add_json_flag(p)

    p = add_command(sub, "export", "rewrite .clavain/workgraph.json (every active graph) now",
                    _export)
    add_json_flag(p)

    p = add_command(sub, "mermaid", "print the graph as a Mermaid flowchart", _mermaid)
    add_graph_flag(p)

    p = add_command(sub, "graphs", "every workgraph: the sprints', the default one; status and "
                    "node counts", _graphs)
    add_json_flag(p)


def _named(g: Any, explicit: str | None) -> Any:
    """The graph a command reads or changes; a mistyped `--graph` is refused, not read as empty
    (`current_graph.require_known`)."""
    from clavain.current_graph import require_known

    return require_known(g, explicit)


def _read(explicit: str | None) -> Any:
    return _named(graph_for_read(explicit), explicit)


def _existing(explicit: str | None) -> Any:
    return _named(existing_graph(explicit), explicit)


def _no_subcommand(args: argparse.Namespace) -> int:
    from clavain.errors import ClavainError

    raise ClavainError("missing subcommand; `clavain graph --help` lists them")


def _print_node(node: dict[str, Any]) -> None:
    for key in ("id", "type", "status", "title", "parent_id", "runner", "depends_on",
                "attempts", "crashes", "escalations", "superseded_by", "blocked_until",
                "lock_run_id"):
        value = node.get(key)
        if value not in (None, "", [], 0) or (key == "attempts" and value == 0):
            print(f"{key + ':':<16}{', '.join(value) if isinstance(value, list) else value}")
    for key in ("inputs", "acceptance", "verify", "ownership", "human_question", "origin"):
        if node.get(key):
            print(f"{key + ':':<16}{json.dumps(node[key])}")


def _add(args: argparse.Namespace) -> int:
    from clavain.paths import StatePaths
    from clavain.workgraph import edits, nodes

    spec = {"id": args.id, "type": args.type, "title": args.title, "dependsOn": args.dep,
            "parent": args.parent, "runner": args.runner, "verify": args.verify}
    specs = [{k: v for k, v in spec.items() if v is not None}]
    edits.check_specs(StatePaths.discover(), specs)  # refused before `.clavain/` is created
    g = graph_for_write(args.graph)
    edits.add_nodes(g, specs)
    node = nodes.get_node(g, args.id)
    emit_json(node) if args.json else print(f"added {args.id} to graph {g.id}")
    return 0


def _import(args: argparse.Namespace) -> int:
    from clavain.paths import StatePaths
    from clavain.workgraph import imports

    specs = imports.read_specs(read_input(args.file), args.file, args.fmt)
    peek = graph_for_read(args.graph)  # creates nothing: a refused import writes nothing
    try:
        known = imports.node_ids(peek)
    finally:
        peek.conn.close()
    decided_by = None
    if args.accept_lint is not None:
        from clavain.authority import who_asks

        asker = who_asks()
        decided_by = asker.provenance if asker.is_person else None
    checked = imports.check(StatePaths.discover(), specs, source=args.file, known_ids=known,
                            fmt=args.fmt, accept_lint=args.accept_lint, decided_by=decided_by)
    for finding in checked.findings:
        print(finding.line(), file=sys.stderr)
    report = imports.record(graph_for_write(args.graph), checked)
    if args.json:
        emit_json(report)
        return 0
    print(f"added {len(report['added'])} node(s) to graph {report['graph_id']}")
    for kind, ids in (("updated", list(report["updated"])), ("unchanged", report["unchanged"]),
                      ("done at its source", report["done"])):
        if ids:
            print(f"{kind}: {len(ids)} node(s): {', '.join(ids[:10])}"
                  f"{' …' if len(ids) > 10 else ''}")
    if report["lint_accepted"]:
        print(f"lint findings accepted: {report['lint_accepted']['reason']}")
    return 0


def _ls(args: argparse.Namespace) -> int:
    from clavain.workgraph import nodes

    g = graph_for_read(args.graph, every=args.all)
    if not args.all:
        _named(g, args.graph)
    if args.all:
        if args.graph:
            from clavain.errors import ClavainError

            raise ClavainError("--all lists every graph; leave out --graph")
        found = nodes.list_all_nodes(g.conn, args.status)
        emit_json(found) if args.json else print_table(
            [{**n, "graph": n["graph_id"]} for n in found], ["graph", *LIST_COLUMNS])
        return 0
    found = nodes.list_nodes(g, args.status)
    emit_json(found) if args.json else print_table(found, LIST_COLUMNS)
    return 0


def _show(args: argparse.Namespace) -> int:
    from clavain.workgraph import nodes

    node = nodes.require_node(_read(args.graph), args.id)
    emit_json(node) if args.json else _print_node(node)
    return 0


def _next(args: argparse.Namespace) -> int:
    from clavain.errors import ClavainError
    from clavain.workgraph.schedule import next_node

    if args.pid is not None and not 0 < args.pid < 2**31:
        raise ClavainError(f"--pid must be a positive process id, got {args.pid}")
    if args.claim:
        from clavain.workgraph.runner_env import refuse_other_node

        refuse_other_node(None, "claim")
    g = _read(args.graph)  # nothing to claim without a database
    envelope = next_node(g, claim=args.claim, run_id=args.run_id, pid=args.pid)
    if not args.json:
        for node_id in envelope["released"]:
            print(f"gave back the stale claim of {node_id} (its holder is gone: a crash, no "
                  "attempt spent)", file=sys.stderr)
        for node_id in envelope["reset"]:
            print(f"reopened {node_id} to break a deadlock (defaults.autoResetFailedMax)",
                  file=sys.stderr)
    if args.json:
        emit_json(envelope)
    elif envelope["node"] is not None:
        _print_node(envelope["node"])
        if envelope["claimed"]:
            print(f"{'run_id:':<16}{envelope['run_id']}")
    else:
        print(envelope["message"], file=sys.stderr)
    return 0 if envelope["node"] is not None else EXIT_NOTHING_RUNNABLE


def _claim(args: argparse.Namespace) -> int:
    from clavain.workgraph.claims import claim_named
    from clavain.workgraph.runner_env import current_run_id, refuse_other_node

    refuse_other_node(args.id, "claim")
    run_id = current_run_id(args.run_id)
    node = claim_named(_existing(args.graph), args.id, run_id=run_id).node
    if args.json:
        emit_json({"node": node, "run_id": run_id})
    else:
        print(f"claimed {node['id']} for run {run_id}")
    return 0


def _fence(args: argparse.Namespace, action: str) -> int | None:
    """The claim generation a write for node `args.id` carries; a runner's write for another
    node than its own is refused here."""
    from clavain.workgraph.runner_env import fence_from_env, refuse_other_node

    refuse_other_node(args.id, action)
    return args.fence if args.fence is not None else fence_from_env(args.id)


def _heartbeat(args: argparse.Namespace) -> int:
    from clavain.workgraph.claims import renew
    from clavain.workgraph.runner_env import current_run_id

    node = renew(_existing(args.graph), args.id, run_id=current_run_id(args.run_id),
                 snapshot=True, fence=_fence(args, "renew the lease of"))
    if args.json:
        emit_json(node)
    else:
        print(f"{args.id}: lease renewed at {node['lock_renewed_at']}")
    return 0


def _apply(args: argparse.Namespace) -> int:
    from clavain.workgraph.results import apply_result

    text = read_input(args.result, lenient=True)
    summary = apply_result(_existing(args.graph), args.id, text, run_id=args.run_id,
                           stdout_path=args.stdout_path, result_path=args.result_path,
                           fence=_fence(args, "apply a result to"))
    if args.json:
        emit_json(summary)
        return 0
    line = f"{summary['node']}: {summary['from']} -> {summary['to']}"
    if summary["added"]:
        line += f"; added {', '.join(summary['added'])}"
    if summary["replaced"]:
        replaced = summary["replaced"]
        line += (f"; {replaced['node']} replaced by {', '.join(replaced['nodes'])}"
                 if replaced["action"] == "replaced"
                 else f"; {replaced['node']} runs again after {', '.join(replaced['nodes'])}")
    if summary["escalation"]:
        line += f"; escalation {summary['escalation']} {summary['escalation_action']}"
    elif summary["escalation_action"] == "limit":
        line += "; not escalated again (defaults.maxEscalations reached): it now blocks"
    if summary["blocked_until"]:
        line += f"; retry after {summary['blocked_until']}"
    print(line)
    return 0


def _answer(args: argparse.Namespace) -> int:
    from clavain.workgraph import edits

    node = edits.answer(_existing(args.graph), args.id, args.answer)
    emit_json(node) if args.json else print(f"{args.id}: needs_human -> open")
    return 0


SCAFFOLD_NAMED = 20  # verify nodes named one by one in `graph scaffold`'s line


def _scaffold(args: argparse.Namespace) -> int:
    from clavain.workgraph.scaffold import ensure_scaffolding

    report = ensure_scaffolding(_named(graph_for_write(args.graph), args.graph),
                                progress=lambda line: print(line, file=sys.stderr, flush=True))
    if args.json:
        emit_json(report)
        return 0
    verify = report["verify"]
    if len(verify) > SCAFFOLD_NAMED:  # 40,000 ids on one line tell a person nothing
        verify = [f"{len(verify):,} verify nodes"]
    made = [*verify, *(x for x in (report["integrate"], report["final"]) if x)]
    print(f"added {', '.join(made)}" if made else "scaffolding already complete")
    if report["reopened"]:
        print(f"reopened {', '.join(report['reopened'])} (new verify nodes)")
    return 0


def _reset(args: argparse.Namespace) -> int:
    from clavain.workgraph import edits

    node = edits.reset(_existing(args.graph), args.id)
    emit_json(node) if args.json else print(f"{args.id}: reopened")
    return 0


def _deadlock(args: argparse.Namespace) -> int:
    from clavain import config
    from clavain.workgraph import deadlock

    g = _named(graph_for_write(args.graph), args.graph) if args.auto_reset else _read(args.graph)
    cfg = config.load(g.state.config)
    reset = deadlock.auto_reset(g, cfg) if args.auto_reset else []
    report = deadlock.detect(g, cfg)
    if args.json:
        emit_json({"deadlock": report, "reset": reset})
    else:
        if reset:
            print(f"reopened {', '.join(reset)}")
        elif args.auto_reset and report:
            limit = config.get(cfg, "defaults.autoResetFailedMax", 0)
            why = ("auto-reset is off (defaults.autoResetFailedMax is 0)" if not limit else
                   f"each failed blocker was reopened {limit} time(s) already "
                   "(defaults.autoResetFailedMax)")
            print(f"nothing reopened: {why}")
        print(deadlock.describe(report) if report else "no deadlock")
    return EXIT_NOTHING_RUNNABLE if report else 0


def _export(args: argparse.Namespace) -> int:
    from clavain.store import queries
    from clavain.workgraph.export import write_snapshot

    g = graph_for_write(every=True)
    write_snapshot(g.conn, g.state)
    count = queries.run(g.conn, "status.active_node_count").fetchone()[0]
    path = str(g.state.workgraph_json)
    emit_json({"path": path, "nodes": count}) if args.json else print(path)
    return 0


def _mermaid(args: argparse.Namespace) -> int:
    from clavain.workgraph.export import mermaid

    sys.stdout.write(mermaid(_read(args.graph)))
    return 0


def _graphs(args: argparse.Namespace) -> int:
    from clavain.workgraph.graphs import list_graphs

    found = list_graphs(graph_for_read(every=True).conn)
    emit_json(found) if args.json else print_table(
        found, ["id", "kind", "status", "nodes", "done", "created_at", "title"])
    return 0
