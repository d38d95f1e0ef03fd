"""`clavain plan lint FILE|-`: a plan checked on paper before it is recorded (plans.lint)."""

from __future__ import annotations

import argparse

from clavain.cli._input import read_input
from clavain.cli._output import add_command, add_json_flag, emit_json


def register(commands: argparse._SubParsersAction) -> None:
    plan = commands.add_parser("plan", help="check plans before they are recorded",
                               description="check plans before they are recorded")
    plan.set_defaults(handler=_no_action)
    actions = plan.add_subparsers(dest="plan_command", metavar="ACTION")
    lint = add_command(
        actions, "lint", "check a sprint plan (Markdown) or a graph import's JSON: errors "
        "refuse it when recorded, warnings print (exit 0 clean, 1 findings, 2 bad input)",
        _lint)
    lint.add_argument("file", metavar="FILE", help="the plan file, or - for stdin")
    add_json_flag(lint)


def _no_action(_args: argparse.Namespace) -> int:
    from clavain.errors import ClavainError

    raise ClavainError("missing action; `clavain plan --help` lists them")


def _lint(args: argparse.Namespace) -> int:
    from clavain import config as config_mod
    from clavain.paths import StatePaths
    from clavain.plans.lint import ERROR, lint_plan_text

    state = StatePaths.discover()
    text = read_input(args.file)
    findings = lint_plan_text(text, "stdin" if args.file == "-" else args.file,
                              project=state.project, config=config_mod.load(state.config))
    errors = sum(1 for finding in findings if finding.severity == ERROR)
    warnings = len(findings) - errors
    if args.json:
        emit_json({"findings": [finding.to_json() for finding in findings],
                   "errors": errors, "warnings": warnings})
    else:
        for finding in findings:
            print(finding.line())
        print(f"{errors} error(s), {warnings} warning(s)" if findings else "no findings")
    return 1 if findings else 0
