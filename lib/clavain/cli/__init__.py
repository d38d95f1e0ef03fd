"""The `clavain` command: parse, call one library function, print.

Each module in this package that defines `register(subparsers)` adds its commands, so a new
concept adds a file here and touches nothing else. Library imports happen inside handlers so
`clavain --version` and `--help` stay fast.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from clavain import __version__
from clavain.errors import ClavainError

# Imported lazily by handlers; a missing one means the plugin venv is not ready yet.
THIRD_PARTY = {"pydantic", "pydantic_core", "jsonschema", "filelock"}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="clavain",
        description="Clavain: checkpointed, verifiable agent work for Claude Code.",
    )
    parser.add_argument("--version", action="version", version=f"clavain {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    package = importlib.import_module(__name__)
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(commands)
    return parser


def _report(message: str, args: argparse.Namespace) -> None:
    if getattr(args, "json", False):
        from clavain.cli._output import emit_json

        emit_json({"error": message})
    else:
        print(f"clavain: error: {message}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 0 if args.command is None else 2
    try:
        return int(handler(args) or 0)
    except ClavainError as exc:
        _report(str(exc), args)
        return exc.exit_code
    except ModuleNotFoundError as exc:
        if exc.name not in THIRD_PARTY:
            raise
        _report(
            f"missing dependency {exc.name!r}: the plugin venv is not ready yet "
            "(it is installed by the first session; `clavain doctor` shows its state)",
            args,
        )
        return 3
    except BrokenPipeError:
        return 0
    finally:
        _print_notices()


def _print_notices() -> None:
    """Warnings about work that did commit (a stale snapshot), after the command's output."""
    from clavain import notices

    for message in notices.take():
        print(f"clavain: warning: {message}", file=sys.stderr)
