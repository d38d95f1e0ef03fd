"""`clavain init` and `clavain doctor`."""

from __future__ import annotations

import argparse

from clavain.cli._output import add_command, add_json_flag, emit_json, print_table


def register(commands: argparse._SubParsersAction) -> None:
    init = add_command(commands, "init", "create .clavain/ here and git-ignore its volatile parts",
                       _init)
    add_json_flag(init)
    doctor = add_command(commands, "doctor",
                         "check python, venv, dependencies, claude, plugin root and state", _doctor)
    add_json_flag(doctor)


def _init(args: argparse.Namespace) -> int:
    from clavain.paths import StatePaths
    from clavain.project import init_state

    result = init_state(StatePaths.discover())
    if args.json:
        emit_json(result)
    else:
        verb = "created" if result["created"] else "already present:"
        print(f"{verb} {result['state_dir']}")
        if result["gitignore_updated"]:
            print(f"added Clavain's volatile paths to {result['gitignore']}")
    return 0


def _doctor(args: argparse.Namespace) -> int:
    from clavain import doctor

    report = doctor.run()
    if args.json:
        emit_json(report)
    else:
        print_table(report["checks"], ["check", "status", "detail"], unclipped=["detail"])
    return 0 if report["healthy"] else 1
