"""Printing helpers shared by every command: JSON for tools, aligned tables for people."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON for tools")


def emit_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, default=str) + "\n")


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return str(value).replace("\n", " ")


def render_table(rows: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """Left-aligned columns under upper-case headers; empty input gives just the header."""
    cells = [[_cell(row.get(col)) for col in columns] for row in rows]
    headers = [col.upper() for col in columns]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines)


def print_table(rows: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> None:
    print(render_table(list(rows), columns))


def add_command(
    commands: argparse._SubParsersAction, name: str, help_text: str, handler: Any
) -> argparse.ArgumentParser:
    """A subcommand with `help` shown in the parent's list and its handler attached."""
    parser = commands.add_parser(name, help=help_text, description=help_text)
    parser.set_defaults(handler=handler)
    return parser
