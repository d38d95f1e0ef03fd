"""Where a budgeted PreToolUse call's time goes, phase by phase, each call a fresh process.

In a throwaway project with budgets on, `--runs` processes each go through the steps
`guards.gate.pre_tool_use` takes (the dispatcher's import, the payload, the guards' imports,
the run context, the call's description, the SQLite driver's import and the unsafe-file check,
the open, the counting transaction, the close) and time each with `perf_counter`; the launch
(bash's EPOCHREALTIME to the interpreter's first line) is timed as bin/clavain-hook times it.
Then the SQLite part alone two ways: closed as the hook does (the last connection checkpoints
the WAL into the database and deletes it) and left open at exit (the WAL stays), to show what
the checkpoint costs each call (why the hook closes anyway: docs/ARCHITECTURE.md, "What a
spawned hook cannot go below"). Medians; the machine's load shows in them.

    python benchmarks/hook_phases.py [--runs 25] [--python PATH] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

PHASES = r"""
import os, sys, time
sys.path.insert(0, sys.argv.pop(1))
marks = [("start", time.perf_counter())]
def mark(name):
    marks.append((name, time.perf_counter()))
from clavain import hooks
mark("import_dispatcher")
payload = hooks.read_payload(sys.stdin.buffer.read())
mark("payload")
from clavain.guards import budget, counting, gate
mark("import_guards")
project, root, database, context = counting.counting_here(payload)
mark("run_context")
call = budget.describe("Bash", payload["tool_input"], context["patterns"],
                       os.path.join(root, "config.json"))
mark("describe")
from clavain.store.db import sqlite3
mark("import_sqlite")
conn = gate._open_database(database)  # checks the files without blocking, then opens
mark("check_and_open")
budget.check(conn, run_key=context["run_key"], session_id="bench", call=call,
             limits=context["limits"], problems=context["problems"], tool_use_id="t")
mark("transaction")
conn.close()
mark("close")
launched = float(os.environ["LAUNCHED"].replace(",", "."))
first = time.time() - (time.perf_counter() - marks[0][1])
result = {"launch": (first - launched) * 1000}
for (_, before), (name, after) in zip(marks, marks[1:]):
    result[name] = (after - before) * 1000
result["python_total"] = (marks[-1][1] - marks[0][1]) * 1000
print(__import__("json").dumps(result))
"""

# One write as the hook makes it, then either a close (checkpoint) or an exit with the WAL kept.
WAL = r"""
import os, sys, time
sys.path.insert(0, sys.argv[1])
from clavain.store import db
begun = time.perf_counter()
conn = db.connect(sys.argv[2], busy_timeout_ms=3000)
opened = time.perf_counter()
with db.transaction(conn):
    conn.execute("INSERT INTO budget_calls (run_key, at, tool, kind, decision) "
                 "VALUES ('bench', 'x', 'Bash', 'command', 'allow')")
written = time.perf_counter()
keep = sys.argv[3] == "keep"
if not keep:
    conn.close()
closed = time.perf_counter()
print(__import__("json").dumps({"open": (opened - begun) * 1000,
                                "transaction": (written - opened) * 1000,
                                "close": (closed - written) * 1000}), flush=True)
if keep:
    os._exit(0)
"""


def spawn(argv: list[str], payload: bytes = b"", env: dict[str, str] | None = None) -> dict:
    done = subprocess.run(["bash", "-c", 'LAUNCHED=$EPOCHREALTIME exec "$@"', "-", *argv],
                          input=payload, capture_output=True, env=env, check=True)
    return json.loads(done.stdout)


def medians(rows: list[dict]) -> dict[str, float]:
    return {key: round(statistics.median(row[key] for row in rows), 2) for key in rows[0]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=25, help="processes per measurement")
    parser.add_argument("--python", default=sys.executable, help="the hook's interpreter")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    lib = str(REPO / "lib")
    with tempfile.TemporaryDirectory(prefix="clavain-phases-") as tmp:
        project = Path(tmp) / "project"
        (project / ".clavain").mkdir(parents=True)
        (project / ".clavain" / "config.json").write_text(json.dumps({"budgets": {
            "maxCommands": 1_000_000, "maxTestRuns": 1_000_000}}))
        env = {**os.environ, "CLAUDE_PROJECT_DIR": str(project)}
        phases = []
        for index in range(args.runs + 1):
            payload = json.dumps({"session_id": "bench", "cwd": str(project),
                                  "hook_event_name": "PreToolUse", "tool_name": "Bash",
                                  "tool_input": {"command": f"echo {index}"}}).encode()
            row = spawn([args.python, "-I", "-S", "-c", PHASES, lib], payload, env)
            if index:  # the first one creates and migrates the database
                phases.append(row)
        wal = {}
        for mode in ("close", "keep"):
            database = Path(tmp) / f"{mode}.sqlite"
            spawn([args.python, "-I", "-S", "-c", WAL, lib, str(database), "close"])
            wal[mode] = medians([spawn([args.python, "-I", "-S", "-c", WAL, lib,
                                        str(database), mode]) for _ in range(args.runs)])
    report = {"runs": args.runs, "python": args.python, "phases_ms": medians(phases),
              "sqlite_closed_ms": wal["close"], "sqlite_wal_kept_ms": wal["keep"]}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"PreToolUse phases, {args.runs} processes (median ms):")
    for name, value in report["phases_ms"].items():
        print(f"  {name:24s} {value:7.2f}")
    print("SQLite per call (median ms): open / transaction / close")
    for mode, label in (("close", "closed (checkpoint, WAL deleted)"),
                        ("keep", "WAL kept (exit without close)")):
        row = wal[mode]
        print(f"  {label:34s} {row['open']:6.2f} / {row['transaction']:6.2f} / "
              f"{row['close']:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
