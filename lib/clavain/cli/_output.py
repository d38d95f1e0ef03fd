"""Printing helpers shared by every command: JSON for tools, aligned tables for people."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from clavain.tables import render_table


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON for tools")


def emit_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, default=str) + "\n")


def print_table(rows: Iterable[Mapping[str, Any]], columns: Sequence[str],
                unclipped: Sequence[str] = ()) -> None:
    print(render_table(list(rows), columns, unclipped))


def add_command(
    commands: argparse._SubParsersAction, name: str, help_text: str, handler: Any
) -> argparse.ArgumentParser:
    """A subcommand with `help` shown in the parent's list and its handler attached."""
    parser = commands.add_parser(name, help=help_text, description=help_text)
    parser.set_defaults(handler=handler)
    return parser
