"""`clavain tokens --transcript PATH [--with-subagents]`: measured, deduplicated token usage."""

from __future__ import annotations

import argparse
from pathlib import Path

from clavain.cli._output import add_command, add_json_flag, emit_json, print_table
from clavain.errors import ClavainError

# People's table: short headers for the four usage fields (--json keeps the API's names).
COLUMNS = {"file": "file", "messages": "messages", "input_tokens": "input",
           "output_tokens": "output", "cache_creation_input_tokens": "cache_write",
           "cache_read_input_tokens": "cache_read", "total": "total"}


def register(commands: argparse._SubParsersAction) -> None:
    tokens = add_command(commands, "tokens",
                         "token usage measured from a Claude Code transcript (deduplicated)",
                         _tokens)
    tokens.add_argument("--transcript", required=True, metavar="PATH",
                        help="a session's .jsonl (or a subagent's agent-*.jsonl)")
    tokens.add_argument("--with-subagents", action="store_true",
                        help="add the session's subagents/agent-*.jsonl files")
    add_json_flag(tokens)


def _tokens(args: argparse.Namespace) -> int:
    from clavain.verdicts.transcript import holds_transcript, session_usage

    path = Path(args.transcript)
    if not path.is_file():
        what = "is a folder" if path.is_dir() else "not found"
        raise ClavainError(f"transcript {path} {what}; pass the session's .jsonl file "
                           "(~/.claude/projects/<project>/<session>.jsonl)")
    total, per_file = session_usage(path, with_subagents=args.with_subagents)
    if not total.usage_lines and not holds_transcript(path):
        raise ClavainError(f"{path} holds no Claude Code transcript (no line is a transcript "
                           "record); pass the session's .jsonl file "
                           "(~/.claude/projects/<project>/<session>.jsonl)")
    if args.json:
        emit_json({"transcript": str(path), **total.as_dict(),
                   "files": [{"file": str(p), **u.as_dict()} for p, u in per_file]})
        return 0
    rows = [{"file": p.name, **u.as_dict()} for p, u in per_file]
    if len(per_file) > 1:
        rows.append({"file": "TOTAL (deduplicated)", **total.as_dict()})
    print_table([{COLUMNS[k]: (f"{v:,}" if isinstance(v, int) else v)
                  for k, v in row.items() if k in COLUMNS} for row in rows],
                list(COLUMNS.values()))
    return 0
