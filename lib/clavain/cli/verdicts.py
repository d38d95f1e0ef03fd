"""`clavain verdicts ls|summary|attention|clean|show AGENT [--dispatch ID]|parse FILE|-|resolve ID
--note TEXT`.

Every dispatch of an agent keeps its own verdict: `ls` lists them all, `summary`, `attention`
and `show AGENT` use the latest of each agent (`clavain.verdicts.summary`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from clavain.cli._input import read_input
from clavain.cli._output import add_command, add_json_flag, emit_json, print_table
from clavain.errors import ClavainError


def register(commands: argparse._SubParsersAction) -> None:
    parent = add_command(commands, "verdicts",
                         "agents' verdicts in .clavain/verdicts/ (default: summary)", _summary)
    add_json_flag(parent)
    sub = parent.add_subparsers(dest="verdicts_command", metavar="SUBCOMMAND")
    for name, help_text, handler in (
        ("ls", "every dispatch's verdict: STATUS, AGENT, DISPATCH, TOKENS, SUMMARY", _ls),
        ("summary", "the compact summary a sprint reads (latest verdict per agent, one line "
                    "each)", _summary),
        ("attention", "latest verdicts that need a look, with their detail paths", _attention),
        ("clean", "remove every verdict and detail file", _clean),
    ):
        _sub_json_flag(add_command(sub, name, help_text, handler))
    show = add_command(sub, "show", "an agent's latest verdict (clavain:reviewer/safety "
                       "or reviewer/safety), or the one of --dispatch ID", _show)
    show.add_argument("agent", metavar="AGENT", help="clavain:reviewer/safety or reviewer/safety")
    show.add_argument("--dispatch", metavar="ID", help="the dispatch id `verdicts ls` shows")
    _sub_json_flag(show)
    resolve = add_command(sub, "resolve", "answer a NEEDS_ATTENTION / BLOCKED verdict without a "
                          "new review (recorded; the sprint's resolve gate accepts it)", _resolve)
    resolve.add_argument("dispatch", metavar="ID", help="the dispatch id `verdicts ls` shows")
    resolve.add_argument("--note", metavar="TEXT", required=True,
                         help="how the finding was answered (kept with the verdict)")
    _sub_json_flag(resolve)
    parse = add_command(sub, "parse", "parse the verdict header at the end of FILE (- = stdin)",
                        _parse)
    parse.add_argument("file", metavar="FILE", help="text ending in a verdict header (- = stdin)")
    _sub_json_flag(parse)


def _sub_json_flag(parser: argparse.ArgumentParser) -> None:
    """`--json` after the subcommand too. Its default is left unset: argparse copies a
    subparser's defaults over the parent's values, which would turn `verdicts --json ls` back
    into a table."""
    parser.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="print JSON for tools")


def _folder() -> Path:
    from clavain.paths import StatePaths

    return StatePaths.discover().verdicts


def _all() -> list[dict[str, Any]]:
    from clavain.paths import StatePaths
    from clavain.verdicts import files as verdict_files
    from clavain.verdicts.backfill import measure_pending

    state = StatePaths.discover()
    measure_pending(state)
    return verdict_files.parse_all(state.verdicts)


def _ls(args: argparse.Namespace) -> int:
    from clavain.verdicts.summary import ls_rows

    found = _all()
    if args.json:
        emit_json(found)
    elif found:
        print_table(ls_rows(found), ["status", "agent", "dispatch", "tokens", "summary"])
    else:
        print("no verdicts yet")
    return 0


def _summary(args: argparse.Namespace) -> int:
    from clavain.verdicts import summary

    found = _all()
    if args.json:
        emit_json(summary.summary_json(found))
    else:
        print(summary.render_summary(found))
    return 0


def _attention(args: argparse.Namespace) -> int:
    from clavain.verdicts.summary import get_attention, older_attention

    found = _all()
    rows, older = get_attention(found), older_attention(found)
    if args.json:
        emit_json({"attention": rows, "older_attention": older})
        return 0
    if rows:
        print_table(rows, ["status", "agent", "detail_path", "dispatch", "summary"])
    else:
        print("nothing needs attention")
    if older:
        print(f"(+{older} earlier attention verdict{'s' if older != 1 else ''} of agents "
              "dispatched again since; `clavain verdicts ls` lists every dispatch)")
    return 0


def _clean(args: argparse.Namespace) -> int:
    from clavain.verdicts import files as verdict_files

    try:
        removed = verdict_files.clean(_folder())
    except ValueError as exc:
        raise ClavainError(str(exc)) from exc
    if args.json:
        emit_json({"removed": removed})
    else:
        print(f"removed {removed} verdict file{'s' if removed != 1 else ''}")
    return 0


def _resolve(args: argparse.Namespace) -> int:
    from clavain.paths import StatePaths
    from clavain.sprint.checkpoint import read
    from clavain.verdicts.resolutions import resolve

    state = StatePaths.discover()
    active = read(state)
    record = resolve(state.verdicts, args.dispatch, args.note, inside=state.root,
                     sprint_id=active["sprint_id"] if active else None)
    if args.json:
        emit_json(record)
    else:
        print(f"resolved {record['status']} {record['agent']} ({args.dispatch}): "
              f"{record['note']}")
    return 0


def _show(args: argparse.Namespace) -> int:
    from clavain.models.verdict import Verdict
    from clavain.verdicts import files as verdict_files

    try:
        verdict_files.safe_agent_name(args.agent)
        if args.dispatch is not None:
            verdict_files.safe_dispatch(args.dispatch)
    except ValueError as exc:
        raise ClavainError(f"{exc}; `clavain verdicts ls` lists the agents and dispatches") \
            from exc
    try:
        found = verdict_files.read(_folder(), args.agent, args.dispatch)
    except LookupError as exc:
        raise ClavainError(f"{exc}; `clavain verdicts ls` lists the agents and dispatches") \
            from exc
    except ValueError as exc:
        raise ClavainError(f"invalid verdict file {exc}; rerun the agent or "
                           "`clavain verdicts clean`") from exc
    dispatch = found.pop(verdict_files.DISPATCH)
    verdict = Verdict.model_validate(found).model_dump() | {verdict_files.DISPATCH: dispatch}
    if args.json:
        emit_json(verdict)
    else:
        width = max(len(key) for key in verdict)
        for key, value in verdict.items():
            shown = ", ".join(value) if isinstance(value, list) else value
            print(f"{key.upper().ljust(width)}  {'' if shown is None else shown}")
    return 0


def _parse(args: argparse.Namespace) -> int:
    from clavain.verdicts.parser import VerdictParseError, parse_header

    text = read_input(args.file)  # the one decoding rule: bytes that are not UTF-8 refused
    try:
        fields = parse_header(text)
    except VerdictParseError as exc:
        raise ClavainError(f"bad verdict header: {exc}") from exc
    fields["tokens_source"] = "reported"
    if args.json:
        emit_json(fields)
    else:
        for key, value in fields.items():
            shown = ", ".join(value) if isinstance(value, list) else value
            print(f"{key.upper():<15} {'' if shown is None else shown}")
    return 0
