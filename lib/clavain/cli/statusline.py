"""`clavain statusline`: the line Claude Code shows in its status bar (JSON on stdin).
bin/clavain runs it without this parser (`python -I -S`, as the hooks); this entry serves
`python -m clavain` and `--help`."""

from __future__ import annotations

import argparse

from clavain.cli._output import add_command


def register(commands: argparse._SubParsersAction) -> None:
    p = add_command(commands, "statusline",
                    "one line for Claude Code's status bar from its JSON on stdin: sprint step, "
                    "budget, session cost, loop iteration, a headless run, questions waiting "
                    "(`clavain init --statusline` sets it up)", _statusline)
    p.add_argument("--with", dest="own", metavar="CMD",
                   help="a status line command of your own, run first (`clavain init "
                        "--statusline --combine` writes it)")


def _statusline(args: argparse.Namespace) -> int:
    from clavain.statusline import main

    return main(argv=["--with", args.own] if args.own else [])
