"""`clavain graph packet ID [--thin]`: the prompt a runner would get for a node.

Added to the `graph` command group that cli/graph.py registers first (modules register in
alphabetical order) and exposes as `GRAPH_SUBPARSERS`.
"""

from __future__ import annotations

import argparse
import importlib
from contextlib import closing

from clavain.cli._output import add_command, add_json_flag, emit_json
from clavain.cli._state import add_graph_flag, existing_graph


def register(commands: argparse._SubParsersAction) -> None:
    try:
        graph_cli = importlib.import_module("clavain.cli.graph")
    except ModuleNotFoundError as exc:
        if exc.name != "clavain.cli.graph":
            raise
        return
    graph_actions = getattr(graph_cli, "GRAPH_SUBPARSERS", None)
    if graph_actions is None:  # the graph group is not registered: nothing to attach to
        return
    packet = add_command(graph_actions, "packet", "render the runner packet for a node", _packet)
    packet.add_argument("node_id", metavar="ID", help="the node")
    packet.add_argument("--thin", action="store_true",
                        help="leave out plan context for executor, verifier and integrator nodes")
    add_graph_flag(packet)
    add_json_flag(packet)


def _packet(args: argparse.Namespace) -> int:
    from clavain.workgraph.packets import render_packet

    g = existing_graph(args.graph)
    with closing(g.conn):
        rendered = render_packet(g, args.node_id, thin=args.thin)
    if args.json:
        emit_json(rendered)
    else:
        print(rendered["packet"].rstrip())
    return 0
