"""Chaos rounds against `clavain run`: what a long unattended run meets, made to happen, and the
figures that say whether anything was lost, held or run twice. Prints a table; asserts nothing
(exit 1 when a figure that must be 0 is not, so CI can run `--short`).

    .venv/bin/python benchmarks/chaos.py                      # SQLite and a throwaway PostgreSQL
    .venv/bin/python benchmarks/chaos.py --backend sqlite --rounds 40
    .venv/bin/python benchmarks/chaos.py --db postgresql://user@host:port/db --backend postgresql
    .venv/bin/python benchmarks/chaos.py --short --json       # the version CI runs

Per backend, in real git projects with real `clavain run --workers 2` subprocesses (the shell
runner), each task's work holding an exclusive flock named for its node while it works:
- kill -9 rounds: the supervisor is killed at a random moment (its runners live on, orphaned)
  and started again — on PostgreSQL from another project folder on the same host every other
  round, as a second machine would, with a server restart in some rounds instead of a kill;
- a holder that never comes back: a node claimed by a run on another host with a short lease;
- a damaged page (SQLite): an index page of the KV history overwritten before a run;
- a NUL result: a runner whose summary holds NUL and a lone surrogate.

Figures (all 0 is the goal): nodes redone (work started after its node was recorded done),
concurrent executions (the flock found held), attempts spent by crashes (every task succeeds
when it runs, so any attempt is a crash's), nodes failed by crashes, hangs (a run that did not
end in time, or a graph not finished after the last run), leftover run branches and worktrees,
claims after the first damage, NUL results lost.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "lib"))
sys.path.insert(0, str(REPO))

from tests.supervisor.kit import FLOCK_WORK  # noqa: E402

from clavain.paths import StatePaths  # noqa: E402
from clavain.store.graph_db import open_graph_db  # noqa: E402
from clavain.workgraph import edits  # noqa: E402
from clavain.workgraph.graphs import DEFAULT_GRAPH, Graph  # noqa: E402
from clavain.workgraph.scaffold import ensure_scaffolding  # noqa: E402

RUN_TIMEOUT = 180.0  # a run that has not ended by then hangs (--run-timeout)
_limits = {"run_timeout": RUN_TIMEOUT}
GIT_ENV = {"GIT_AUTHOR_NAME": "chaos", "GIT_AUTHOR_EMAIL": "chaos@localhost",
           "GIT_COMMITTER_NAME": "chaos", "GIT_COMMITTER_EMAIL": "chaos@localhost"}

NUL_RUNNER = """
import json, sys
sys.stdin.read()
result = {"status": "success", "summary": "nul" + chr(0) + "here",
          "errors": ["lone " + chr(0xD800)]}
print("<result>" + json.dumps(result) + "</result>")
"""


def git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=folder, capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV}, check=True).stdout


def make_folder(root: Path, url: str | None, config: dict[str, Any] | None = None
                ) -> StatePaths:
    """A git project with a state folder (the workgraph on `url` when given)."""
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    (root / ".gitignore").write_text(".clavain/\n")
    (root / "README.md").write_text("chaos\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "start")
    state = StatePaths(root / ".clavain", project=root, store_url=url)
    state.root.mkdir()
    settings = {"defaults": {"retryBackoffSeconds": 0}}
    settings.update(config or {})
    (state.root / "config.json").write_text(json.dumps(settings))
    return state


def add_tasks(state: StatePaths, specs: list[dict[str, Any]]) -> None:
    conn = open_graph_db(state)
    try:
        g = Graph(conn, DEFAULT_GRAPH, state)
        edits.add_nodes(g, specs)
        ensure_scaffolding(g)
    finally:
        conn.close()


def env_for(state: StatePaths, url: str | None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAVAIN_", "CLAUDE"))}
    env.update(CLAVAIN_PROJECT_DIR=str(state.project), CLAVAIN_PYTHON=sys.executable, **extra)
    if url:
        env["CLAVAIN_DB"] = url
    return env


def start_run(state: StatePaths, url: str | None, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(REPO / "bin" / "clavain"), "run", "--runner", "shell", "--graph", DEFAULT_GRAPH,
         "--json", *args], cwd=state.project, env=env_for(state, url), text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def finish(proc: subprocess.Popen[str], timeout: float | None = None
           ) -> tuple[dict[str, Any] | None, bool]:
    """(its JSON report, hung)."""
    timeout = timeout or _limits["run_timeout"]
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return None, True
    try:
        return json.loads(out), False
    except ValueError:
        return None, False


def _sql(conn: Any, statement: str, params: Any = ()) -> Any:
    """A measuring statement of this script's own, in the store's placeholders (the library's
    own statements are named queries)."""
    from clavain.store.placeholders import to_psycopg

    if getattr(conn, "dialect", "sqlite") != "sqlite":
        statement = to_psycopg(statement)
    return conn.execute(statement, params)


def graph_rows(state: StatePaths) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """Every node, and every (node, time) it was recorded done."""
    from clavain.workgraph.nodes import list_nodes

    conn = open_graph_db(state)
    try:
        nodes = list_nodes(Graph(conn, DEFAULT_GRAPH, state))
        done = [(row[0], row[1]) for row in _sql(
            conn, "SELECT node_id, at FROM events WHERE graph_id = ? AND to_status = 'done' "
            "ORDER BY id", (DEFAULT_GRAPH,))]
    finally:
        conn.close()
    return nodes, done


def redone(logs: Path, done: list[tuple[str, str]]) -> int:
    """Nodes whose work started again after they were recorded done (or were recorded done
    twice)."""
    from datetime import datetime

    first: dict[str, float] = {}
    twice = set()
    for node, at in done:
        moment = datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp()
        if node in first:
            twice.add(node)
        first.setdefault(node, moment)
    path = logs / "executions.log"
    for line in path.read_text().splitlines() if path.exists() else []:
        kind, node, _pid, moment = line.split()
        if kind == "start" and node in first and float(moment) > first[node] + 0.5:
            twice.add(node)
    return len(twice)


def leftovers(state: StatePaths) -> int:
    branches = git(state.project, "for-each-ref", "--format=%(refname)",
                   "refs/heads/clavain/").split()
    base = state.root / "worktrees"
    folders = [p for p in base.glob("*/*") if p.is_dir()] if base.is_dir() else []
    return len(branches) + len(folders)


def ghost_claim(state: StatePaths, node_id: str, lease_ms: int) -> None:
    """`node_id` held by a run on another host that never comes back."""
    from clavain.clock import now_iso
    from clavain.store.db import transaction
    from clavain.store.graph_db import store_now

    conn = open_graph_db(state)
    # Before leases were recorded with claims (to compare with an older checkout), the
    # reader's own lease judges the ghost.
    columns = [column[0] for column in conn.execute("SELECT * FROM nodes LIMIT 0").description]
    lease = ", lock_lease_ms = :lease" if "lock_lease_ms" in columns else ""
    try:
        with transaction(conn):
            at = now_iso(store_now(conn))
            _sql(
                conn, "UPDATE nodes SET status = 'in_progress', lock_run_id = 'ghost-run', "
                "lock_started_at = :at, lock_renewed_at = :at, lock_pid = 1, "
                f"lock_host = 'ghost-host'{lease}, lock_generation = lock_generation + 1 "
                "WHERE graph_id = :graph AND id = :id",
                {"at": at, "lease": lease_ms, "graph": DEFAULT_GRAPH, "id": node_id})
    finally:
        conn.close()


def kill_rounds(base: Path, url: str | None, args: argparse.Namespace,
                cluster: Any) -> dict[str, int]:
    """The kill -9 rounds (and server restarts) on one graph until it is finished."""
    rng = random.Random(args.seed)
    logs = base / "logs"
    logs.mkdir(parents=True)
    work = base / "work.py"
    work.write_text(FLOCK_WORK)
    folders = [make_folder(base / "a", url)]
    if url:  # a second machine's folder on the same host and server
        folders.append(make_folder(base / "b", url))
    specs = [{"id": f"task-{n:02d}", "type": "task", "title": f"t{n}", "verify": ["true"],
              "commands": [f"{sys.executable} {work} {logs} task-{n:02d} "
                           f"{rng.uniform(0.2, 1.2):.2f}"]} for n in range(args.tasks)]
    specs.append({"id": "ghost", "type": "task", "title": "held elsewhere", "verify": ["true"],
                  "commands": [f"{sys.executable} {work} {logs} ghost 0.2"]})
    if args.no_ghost:
        specs.pop()
    add_tasks(folders[0], specs)
    if not args.no_ghost:
        ghost_claim(folders[0], "ghost", lease_ms=3000)
    figures = {"kill_rounds": 0, "restarts": 0, "hangs": 0}
    for number in range(args.rounds):
        state = folders[number % len(folders)]
        proc = start_run(state, url, "--workers", str(args.workers))
        # Long enough for a node to finish now and then: a node whose every run is cut short
        # is the crash loop `defaults.maxCrashes` exists to stop, not a fault to survive.
        time.sleep(rng.uniform(0.5, 2.0))
        if cluster is not None and rng.random() < 0.3:
            cluster.restart()  # the run waits it out and goes on
            figures["restarts"] += 1
        time.sleep(rng.uniform(0.5, 2.5))
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            figures["kill_rounds"] += 1
        report, hung = finish(proc)
        figures["hangs"] += int(hung)
        if report and report.get("status") == "complete":
            break
    for state in folders:  # the last run, unharmed, finishes the graph and cleans up
        report, hung = finish(start_run(state, url, "--workers", str(args.workers)))
        figures["hangs"] += int(hung)
    nodes, done = graph_rows(folders[0])
    figures["hangs"] += sum(1 for n in nodes if n["status"] != "done")
    figures["nodes_redone"] = redone(logs, done)
    path = logs / "overlaps.log"
    figures["concurrent_executions"] = len(path.read_text().split()) if path.exists() else 0
    figures["attempts_spent_by_crashes"] = sum(n["attempts"] for n in nodes)
    figures["nodes_failed_by_crashes"] = sum(1 for n in nodes if n["status"] == "failed")
    figures["crashes_counted"] = sum(n.get("crashes", 0) for n in nodes)
    figures["leftover_branches_and_worktrees"] = sum(leftovers(s) for s in folders)
    return figures


def damaged_page(base: Path, args: argparse.Namespace) -> dict[str, int]:
    """An index page of the KV history overwritten: the run stops at once, claiming nothing
    after the first damage."""
    state = make_folder(base / "damaged", None)
    add_tasks(state, [{"id": f"task-{n:02d}", "type": "task", "title": f"t{n}",
                       "verify": ["true"], "commands": ["true"]} for n in range(25)])
    conn = sqlite3.connect(state.db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE type = 'index' "
                        "AND tbl_name = 'kv_history' AND sql IS NOT NULL").fetchone()[0]
    conn.close()
    with open(state.db, "r+b") as handle:
        handle.seek((root - 1) * page_size)
        handle.write(bytes([0x0D]) + b"\xff" * (page_size - 1))
    report, hung = finish(start_run(state, None, "--workers", str(args.workers)))
    conn = sqlite3.connect(state.db)
    claims = _sql(conn, "SELECT count(*) FROM events WHERE note = 'claimed'").fetchone()[0]
    conn.close()
    stopped = bool(report) and report.get("reason") == "store_damaged"
    return {"hangs": int(hung) + int(not stopped),
            "claims_after_the_first_damage": max(0, claims - args.workers)}


def nul_result(base: Path, url: str | None) -> dict[str, int]:
    base.mkdir(parents=True)
    runner = base / "nul.py"
    runner.write_text(NUL_RUNNER)
    state = make_folder(base / "nul", url, {"runners": {"nul": {
        "command": [sys.executable, str(runner)]}}})
    add_tasks(state, [{"id": "task-nul", "type": "task", "title": "nul", "verify": ["true"]}])
    proc = subprocess.Popen([str(REPO / "bin" / "clavain"), "run", "--runner", "nul", "--graph",
                             DEFAULT_GRAPH, "--json"], cwd=state.project, text=True,
                            env=env_for(state, url), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    _, hung = finish(proc)
    nodes, _ = graph_rows(state)
    lost = sum(1 for n in nodes if n["status"] != "done")
    return {"hangs": int(hung), "nul_results_lost": lost}


def one_backend(name: str, url: str | None, args: argparse.Namespace, cluster: Any
                ) -> dict[str, int]:
    with tempfile.TemporaryDirectory(prefix=f"clavain-chaos-{name}-") as tmp:
        base = Path(tmp)
        figures = kill_rounds(base / "kills", url, args, cluster)
        extra = [nul_result(base / "nul", url)]
        if url is None:
            extra.append(damaged_page(base / "damage", args))
        for found in extra:
            for key, value in found.items():
                figures[key] = figures.get(key, 0) + value
        return figures


ROWS = (("rounds (kill -9 / server restarts)", None),
        ("nodes redone", "nodes_redone"),
        ("concurrent executions", "concurrent_executions"),
        ("attempts spent by crashes", "attempts_spent_by_crashes"),
        ("nodes failed by crashes", "nodes_failed_by_crashes"),
        ("hangs", "hangs"),
        ("leftover branches/worktrees", "leftover_branches_and_worktrees"),
        ("claims after the first damage", "claims_after_the_first_damage"),
        ("NUL results lost", "nul_results_lost"))
MUST_BE_ZERO = [key for _, key in ROWS if key]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument("--db", metavar="URL", help="a PostgreSQL URL (default: a throwaway "
                        "local server, restarted in some rounds)")
    parser.add_argument("--rounds", type=int, default=24, help="kill -9 rounds per backend")
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--short", action="store_true", help="the CI version: 4 rounds, 4 tasks")
    parser.add_argument("--run-timeout", type=float, default=RUN_TIMEOUT, metavar="SECONDS",
                        help="a run that has not ended by then counts as a hang")
    parser.add_argument("--no-ghost", action="store_true", help="leave out the claim of a "
                        "host that never comes back (to compare with a version that waits on "
                        "it for its whole lease)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    _limits["run_timeout"] = args.run_timeout
    if args.short:
        args.rounds, args.tasks = 4, 4
    results: dict[str, dict[str, int]] = {}
    if args.backend in ("sqlite", "both"):
        results["sqlite"] = one_backend("sqlite", None, args, None)
    if args.backend in ("postgresql", "both"):
        cluster = None
        url = args.db
        if url is None:
            from tests.pgserver import Cluster, missing_reason

            if missing_reason():
                print(f"postgresql skipped: {missing_reason()}", file=sys.stderr)
            else:
                cluster = Cluster().start()
                url = cluster.url()
        if url:
            try:
                results["postgresql"] = one_backend("postgresql", url, args, cluster)
            finally:
                if cluster is not None:
                    cluster.destroy()
    failing = {name: [key for key in MUST_BE_ZERO if figures.get(key)]
               for name, figures in results.items()}
    if args.json:
        print(json.dumps({"results": results, "failing": failing}, indent=2))
    else:
        names = list(results)
        print(f"{'figure':<38}" + "".join(f"{name:>14}" for name in names))
        for label, key in ROWS:
            cells = []
            for name in names:
                figures = results[name]
                if key is None:
                    cells.append(f"{figures['kill_rounds']} / {figures['restarts']}")
                else:
                    cells.append(str(figures[key]) if key in figures else "—")
            print(f"{label:<38}" + "".join(f"{cell:>14}" for cell in cells))
        crashes = ", ".join(f"{name} {figures['crashes_counted']}"
                            for name, figures in results.items())
        print(f"(crashes counted, no attempt spent: {crashes})")
    return 1 if any(failing.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
