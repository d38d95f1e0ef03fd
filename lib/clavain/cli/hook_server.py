"""`clavain hook-server status|stop`: the resident process that serves the per-tool-call hooks."""

from __future__ import annotations

import argparse

from clavain.cli._output import add_command, add_json_flag, emit_json


def register(commands: argparse._SubParsersAction) -> None:
    server = add_command(commands, "hook-server", "the resident process serving the tool-call "
                         "hooks (status, stop)", lambda args: (server.print_help(), 0)[1])
    sub = server.add_subparsers(dest="hook_server_command", metavar="COMMAND")
    status = add_command(sub, "status", "whether it runs (in each Clavain plugin data folder), "
                         "its pid and port, whether it runs the installed code", _status)
    add_json_flag(status)
    stop = add_command(sub, "stop", "stop it (the next session or tool call starts a new "
                       "one; CLAVAIN_RESIDENT_HOOKS=0 keeps it off)", _stop)
    add_json_flag(stop)


def _status(args: argparse.Namespace) -> int:
    from clavain.hooks import resident

    shown = resident.overview()
    if args.json:
        emit_json(shown)
    else:
        print("\n".join(resident.describe(shown)))
    return 0


def _stop(args: argparse.Namespace) -> int:
    from clavain.hooks import resident

    stopped = [{"data_dir": data, "pid": pid} for data in resident.data_dirs()
               if (pid := resident.stop(data)) is not None]
    if args.json:
        emit_json({"stopped": stopped})
    elif stopped:
        for server in stopped:
            print(f"Stopped the hook server of {server['data_dir']} (pid {server['pid']})")
    else:
        print(f"No hook server was running (looked in {resident.overview()['looked_in']})")
    return 0
