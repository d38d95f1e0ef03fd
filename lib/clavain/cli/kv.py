"""`clavain kv get|put|ls`: node-scoped context for agents and people.

Inside a runner `CLAVAIN_NODE_ID` names the agent's node: it is the default target and the writer
whose permissions `put` checks. Outside a runner (no such variable) a person may write any node.
"""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import closing
from typing import Any

from clavain.cli._input import read_input
from clavain.cli._output import add_command, add_json_flag, emit_json, print_table
from clavain.cli._state import add_graph_flag, existing_graph

PREVIEW_CHARS = 60


def register(commands: argparse._SubParsersAction) -> None:
    kv = commands.add_parser("kv", help="read and write node-scoped context (KV)",
                             description="read and write node-scoped context (KV)")
    kv.set_defaults(handler=_no_action)
    actions = kv.add_subparsers(dest="kv_command", metavar="ACTION")

    get = add_command(actions, "get", "print the newest value of a key", _get)
    _add_target(get)
    get.add_argument("--key", required=True, help="the key, e.g. out.summary")
    add_json_flag(get)

    put = add_command(actions, "put", "write a key (your own node or the run namespace)", _put)
    _add_target(put)
    put.add_argument("--key", required=True, help="the key, e.g. out.notes or ctx.decisions")
    source = put.add_mutually_exclusive_group(required=True)
    source.add_argument("--value", help="the value, as text")
    source.add_argument("--value-file", metavar="PATH",
                        help="read the value from a file (- = stdin)")
    add_json_flag(put)

    ls = add_command(actions, "ls", "list keys (all nodes unless --node/--run or in a runner)",
                     _ls)
    _add_target(ls)
    ls.add_argument("--prefix", help="only keys starting with this, e.g. ctx.")
    add_json_flag(ls)


def _no_action(_args: argparse.Namespace) -> int:
    from clavain.errors import ClavainError

    raise ClavainError("missing action; `clavain kv --help` lists them")


def _add_target(parser: argparse.ArgumentParser) -> None:
    add_graph_flag(parser)
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--node", metavar="ID", help="the node (default: $CLAVAIN_NODE_ID)")
    target.add_argument("--run", action="store_true", help="the shared run namespace (__run__)")


def _env(name: str) -> str | None:
    return os.environ.get(name) or None


def _target(args: argparse.Namespace, *, required: bool) -> str | None:
    from clavain.errors import ClavainError
    from clavain.workgraph.kv import RUN_NAMESPACE

    if args.run:
        return RUN_NAMESPACE
    node = args.node or _env("CLAVAIN_NODE_ID")
    if node is None and required:
        raise ClavainError("no node given: pass --node ID or --run (or run inside a runner)")
    return node


def _get(args: argparse.Namespace) -> int:
    from clavain.errors import ClavainError
    from clavain.workgraph import kv

    node_id = _target(args, required=True)
    g = existing_graph(args.graph)
    with closing(g.conn):
        kv.check_key(args.key)
        kv.require_owner(g, node_id)
        entry = kv.get(g, node_id, args.key)
    if entry is None:
        raise ClavainError(f"node {node_id!r} has no key {args.key!r}", exit_code=1)
    if args.json:
        emit_json(entry)
    else:
        value = entry["value"]
        sys.stdout.write(value if value.endswith("\n") else value + "\n")
    return 0


def _read_value(args: argparse.Namespace) -> str:
    return args.value if args.value is not None else read_input(args.value_file)


def _put(args: argparse.Namespace) -> int:
    from clavain.workgraph import kv
    from clavain.workgraph.runner_env import fence_from_env

    node_id = _target(args, required=True)
    writer = _env("CLAVAIN_NODE_ID")
    # Check before reading stdin or touching the database: a refused write changes nothing.
    kv.check_write_allowed(node_id, writer)
    kv.check_key(args.key)
    value = _read_value(args)
    g = existing_graph(args.graph)
    with closing(g.conn):
        entry = kv.put(g, node_id, args.key, value, writer_node=writer,
                       run_id=_env("CLAVAIN_RUN_ID"), fence=fence_from_env(node_id))
    if args.json:
        emit_json({k: v for k, v in entry.items() if k != "value"})
    else:
        sha = entry["artifact_sha256"]
        where = f" (artifact {g.state.artifacts / sha})" if sha else ""
        print(f"wrote {node_id} / {args.key}: {entry['bytes']} bytes{where}")
    return 0


def _preview(entry: dict[str, Any]) -> str:
    if entry["value"] is None:
        return f"→ {entry['artifact_path']}"
    text = " ".join(entry["value"].split())
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"


def _ls(args: argparse.Namespace) -> int:
    from clavain.workgraph import kv

    node_id = _target(args, required=False)
    g = existing_graph(args.graph)
    with closing(g.conn):
        if node_id is not None:
            kv.require_owner(g, node_id)
        entries = kv.ls(g, node_id, args.prefix)
    if args.json:
        emit_json(entries)
    else:
        print_table([{**e, "node": e["node_id"], "value": _preview(e), "updated": e["updated_at"]}
                     for e in entries], ["node", "key", "value", "updated"])
    return 0
