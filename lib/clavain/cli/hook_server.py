"""`clavain hook-server status|stop`: the resident process that serves the per-tool-call hooks."""

from __future__ import annotations

import argparse

from clavain.cli._output import add_command, add_json_flag, emit_json


def register(commands: argparse._SubParsersAction) -> None:
    server = add_command(commands, "hook-server", "the resident process serving the tool-call "
                         "hooks (status, stop)", lambda args: (server.print_help(), 0)[1])
    sub = server.add_subparsers(dest="hook_server_command", metavar="COMMAND")
    status = add_command(sub, "status", "whether it runs, its pid and port, whether it runs "
                         "the installed code", _status)
    add_json_flag(status)
    stop = add_command(sub, "stop", "stop it (the next session or tool call starts a new "
                       "one; CLAVAIN_RESIDENT_HOOKS=0 keeps it off)", _stop)
    add_json_flag(stop)


def _status(args: argparse.Namespace) -> int:
    from clavain.hooks import resident

    shown = resident.status()
    emit_json(shown) if args.json else print(f"Hook server {resident.describe(shown)}")
    return 0


def _stop(args: argparse.Namespace) -> int:
    from clavain.hooks import resident

    data = resident.data_dir()
    pid = resident.stop(data) if data else None
    if args.json:
        emit_json({"stopped_pid": pid})
    else:
        print(f"Stopped the hook server (pid {pid})" if pid else "No hook server was running")
    return 0
