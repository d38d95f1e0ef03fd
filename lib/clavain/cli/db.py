"""`clavain db`: the workgraph store itself (schema, and moving graphs between stores)."""

from __future__ import annotations

import argparse

from clavain.cli._output import add_command, add_json_flag, emit_json, print_table


def register(commands: argparse._SubParsersAction) -> None:
    db = add_command(commands, "db", "the workgraph store: schema, and moving graphs between a "
                     "project's SQLite file and a team's PostgreSQL server",
                     lambda args: _usage(db))
    sub = db.add_subparsers(dest="db_command", metavar="SUBCOMMAND")
    migrate = add_command(sub, "migrate", "bring the store's schema up to date; with --to, copy "
                          "this project's graphs into another store (checked by counts and "
                          "checksums; safe to run again)", _migrate)
    migrate.add_argument("--to", metavar="URL|PATH",
                         help="postgresql://user@host:port/db, or an SQLite file path")
    migrate.add_argument("--graph", action="append", metavar="ID",
                         help="copy only this graph (repeatable; default: every graph)")
    migrate.add_argument("--replace", action="store_true",
                         help="overwrite a graph the target holds with other content")
    add_json_flag(migrate)
    recover = add_command(sub, "recover", "rebuild a damaged state database: every row SQLite "
                          "can still read goes into a new file put in its place; the damaged "
                          "file is kept beside it", _recover)
    add_json_flag(recover)


def _recover(args: argparse.Namespace) -> int:
    from clavain.paths import StatePaths
    from clavain.store.recover import recover

    report = recover(str(StatePaths.discover().db))
    if args.json:
        emit_json(report)
        return 0
    print_table([{"table": name, "rows": counts["copied"], "unreadable": counts["lost"]}
                 for name, counts in report["tables"].items()], ["table", "rows", "unreadable"])
    lost = sum(counts["lost"] for counts in report["tables"].values())
    print(f"recovered into {report['path']} (integrity ok"
          + (f"; {lost} row place(s) could not be read" if lost else "") + ")")
    print(f"the damaged file is kept as {report['kept']}")
    return 0


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _migrate(args: argparse.Namespace) -> int:
    from clavain.errors import ClavainError
    from clavain.paths import StatePaths
    from clavain.project import ensure_state
    from clavain.store.transfer import GraphConflict, migrate

    try:
        report = migrate(ensure_state(StatePaths.discover()), args.to, only=args.graph,
                         replace=args.replace)
    except GraphConflict as exc:
        raise ClavainError(f"{exc}. Copy the other graphs with --graph ID, or overwrite it "
                           "with --replace") from None
    if args.json:
        emit_json(report)
        return 0
    if args.to is None:
        store = report["store"]
        version = (f", schema version {store['schema_version']}" if "schema_version" in store
                   else "")
        print(f"{store['backend']}: {store['where']}{version} (up to date)")
        return 0
    print(f"{report['from']} -> {report['to']}")
    print_table([{"graph": g["graph_id"], "action": g["action"], **g["counts"]}
                 for g in report["graphs"]],
                ["graph", "action", "nodes", "deps", "kv_latest", "kv_history", "events"])
    if all(g["action"] in ("unchanged", "skipped") for g in report["graphs"]):
        print("nothing to copy: the target already holds these graphs as they are here")
    else:
        print("every copied table matches the source (row counts and sha256)")
    return 0
