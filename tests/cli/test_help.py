"""Every command and every option explains itself in `--help`."""

from __future__ import annotations

import argparse

from clavain.cli import build_parser


def _undocumented(parser: argparse.ArgumentParser, path: str) -> list[str]:
    missing = [] if parser.description else [f"{path}: no description"]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                missing += _undocumented(sub, f"{path} {name}")
        elif not isinstance(action, argparse._HelpAction) and not action.help:
            missing.append(f"{path}: {'/'.join(action.option_strings) or action.dest}")
    return missing


def test_every_command_and_option_has_help_text() -> None:
    assert _undocumented(build_parser(), "clavain") == []
