"""The `clavain` command: parse, call one library function, print.

Each module in this package that defines `register(subparsers)` adds its commands, so a new
concept adds a file here and touches nothing else. Library imports happen inside handlers so
`clavain --version` and `--help` stay fast.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sqlite3
import sys
from typing import Any, NoReturn

from clavain import __version__
from clavain.errors import ClavainError
from clavain.textio import BadText

# Imported lazily by handlers; a missing one means the plugin venv is not ready yet.
THIRD_PARTY = {"pydantic", "pydantic_core", "jsonschema", "filelock"}


class OneLineParser(argparse.ArgumentParser):
    """A bad argument is one line on stderr and exit 2, never the usage block: slash commands
    run `clavain … $ARGUMENTS` before the prompt, and the usage text would land in it. Options
    are never abbreviated: `--wai` must not pass for `--waive`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        line = f"{message} (see `{self.prog} --help`)"
        if "--json" in sys.argv[1:]:  # a tool asked for JSON: the error is JSON too
            from clavain.cli._output import emit_json

            emit_json({"error": line})
            self.exit(2)
        self.exit(2, f"clavain: error: {line}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
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


def _report(message: str, args: argparse.Namespace, exc: BaseException | None = None) -> None:
    """The error line; with --json an object, which also says when the workgraph store was at
    fault (`store`: unavailable or damaged), so a supervisor never charges a node for it."""
    from clavain.sandbox import sandboxed_hint

    message += sandboxed_hint()
    if getattr(args, "json", False):
        from clavain.cli._output import emit_json
        from clavain.store import faults

        fault = faults.kind(exc) if exc is not None else None
        emit_json({"error": message, **({"store": fault} if fault else {})})
    else:
        print(f"clavain: error: {message}", file=sys.stderr)


def _undecodable_argument(argv: list[str]) -> str | None:
    """The one decoding rule for arguments: Python hands over bytes that are not UTF-8 as lone
    surrogates, and one stored in the database breaks every later reader. The message names
    the option the bad value belongs to."""
    from clavain.textio import BadText, check

    for index, arg in enumerate(argv):
        option, equals, value = arg.partition("=")
        previous = argv[index - 1] if index else ""
        if arg.startswith("--"):
            where, text = f"argument {option}", value if equals else arg
        else:
            where = f"argument {previous}" if previous.startswith("-") else f"argument {index + 1}"
            text = arg
        try:
            check(text, where)
        except BadText as exc:
            return str(exc)
    return None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    problem = _undecodable_argument(argv)
    if problem is not None:
        print(f"clavain: error: {problem}", file=sys.stderr)
        return 2
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 0 if args.command is None else 2
    from clavain.store import db

    # A command, not a hook: its first open checks the file (bounded); put back after, for a
    # caller that runs commands in-process.
    checking, db.CHECK_ON_OPEN = db.CHECK_ON_OPEN, True
    try:
        return int(handler(args) or 0)
    except ClavainError as exc:
        _report(str(exc), args, exc)
        return exc.exit_code
    except BadText as exc:
        _report(str(exc), args)
        return 2
    except sqlite3.DatabaseError as exc:
        # The one judgement of the state (store.health): read-only, full, locked or damaged,
        # in the same words doctor, the supervisor and the hooks use.
        judged = _judge_state(exc)
        _report(judged.line if judged is not None else
                f"the state database {_database()}: {exc}", args, exc)
        return 1
    except OverflowError as exc:  # a number too large for SQLite or the calendar
        _report(f"a value is out of range ({exc})", args)
        return 2
    except ModuleNotFoundError as exc:
        if exc.name not in THIRD_PARTY:
            raise
        from clavain.bootstrap import install_fix
        from clavain.paths import claude_config_dir, install_kind

        _report(f"{sys.executable} lacks the {exc.name} package: "
                f"{install_fix(install_kind(), claude_config_dir())}", args)
        return 3
    except BrokenPipeError:
        return 0
    except OSError as exc:  # broken state: a file where a folder goes, no permission, a symlink
        judged = _judge_state(exc)
        if judged is not None:
            _report(judged.line, args, exc)
            return 1
        where = f"{exc.filename}: " if exc.filename else ""
        _report(f"{where}{exc.strerror or exc}", args)
        return 1
    except Exception as exc:
        if type(exc).__module__.split(".")[0] != "psycopg":
            raise
        # The shared workgraph server refused or lost a statement (psycopg loads only then).
        _report(f"the workgraph store: {' '.join(str(exc).split())[:400]}", args, exc)
        return 1
    finally:
        db.CHECK_ON_OPEN = checking
        _print_notices()


def _database() -> Any:
    from clavain.paths import StatePaths

    return StatePaths.discover().db


def _judge_state(exc: BaseException) -> Any:
    """store.health's judgement of the state database for a failure (None: not the state's).
    A damage is checked on the file itself (another file's, such as a copy's target, is not
    the state's) and remembered, so every later write is refused until it is recovered."""
    from clavain.store import health
    from clavain.store.faults import StoreDamaged

    try:
        database = _database()
        judged = health.judge(exc, database)
        if judged is not None and judged.kind == health.DAMAGED and \
                not isinstance(exc, StoreDamaged) and health.confirm_damage(database) is False:
            return None
    except Exception:  # the state cannot even be located: keep the failure's own words
        return None
    return judged


def _print_notices() -> None:
    """Warnings about work that did commit (a stale snapshot), after the command's output."""
    from clavain import notices

    for message in notices.take():
        print(f"clavain: warning: {message}", file=sys.stderr)
