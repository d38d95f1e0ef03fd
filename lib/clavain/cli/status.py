"""`clavain status [--json]`: where the work stands, on one screen."""

from __future__ import annotations

import argparse

from clavain.cli._output import add_command, add_json_flag, emit_json
from clavain.cli._state import add_graph_flag, graph_for_read


def register(commands: argparse._SubParsersAction) -> None:
    status = add_command(commands, "status",
                         "one screen: the active sprint (step, gate), node counts, running, "
                         "waiting, needs you, blocked, next, verdicts needing attention", _status)
    add_graph_flag(status)
    add_json_flag(status)


def _status(args: argparse.Namespace) -> int:
    from clavain import status
    from clavain.sprint import checkpoint

    try:
        g = graph_for_read(args.graph)
        active, problem = checkpoint.read(g.state), None
    except checkpoint.DamagedCheckpoint as exc:
        # A damaged checkpoint names itself; the rest of the screen still shows (default
        # graph, or the one asked for).
        g = graph_for_read(args.graph or "default")
        active, problem = None, str(exc)
    report = status.collect(g, active, problem)
    emit_json(report) if args.json else print(status.render(report))
    return 0
