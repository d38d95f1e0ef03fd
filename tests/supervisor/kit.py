"""Helpers for the supervisor tests: a real git project with a `.clavain/` state folder, runners
written as small scripts, and `clavain run` driven in-process or as a real subprocess."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from clavain import locate
from clavain.paths import StatePaths
from clavain.store.graph_db import open_graph_db
from clavain.supervisor.supervise import RunOptions, supervise
from clavain.workgraph.edits import add_nodes
from clavain.workgraph.graphs import DEFAULT_GRAPH, Graph
from clavain.workgraph.nodes import get_node, list_nodes
from clavain.workgraph.scaffold import ensure_scaffolding
from tests.checks import PASSES

REPO = Path(__file__).resolve().parents[2]
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@localhost",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@localhost"}


def git(project: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=project, capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV}, check=True)
    return done.stdout


def make_project(root: Path, config: dict[str, Any] | None = None) -> StatePaths:
    """A git repository with one commit and a state folder; snapshots written at once."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    (root / "README.md").write_text("project\n")
    (root / ".gitignore").write_text(".clavain/\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "start")
    # The backend the test runs on: CLAVAIN_DB=postgresql://… (the `backend` fixture) or SQLite.
    state = StatePaths(root / ".clavain", project=root, store_url=locate.store_url())
    state.root.mkdir()
    settings = {"defaults": {"snapshotMaxLagSeconds": 0, "retryBackoffSeconds": 0}}
    _merge(settings, config or {})
    (state.root / "config.json").write_text(json.dumps(settings))
    return state


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> None:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value


def script(path: Path, body: str) -> Path:
    """An executable Python script (this interpreter)."""
    path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def rate_limited_once(folder: Path) -> Path:
    """A runner whose first call is refused with a 429 asking for a 2 s wait, then succeeds
    (its calls counted in `folder`/calls)."""
    counter = folder / "calls"
    return script(folder / "limited.py", f"""
        import sys
        sys.stdin.read()
        path = {str(counter)!r}
        try:
            calls = int(open(path).read())
        except OSError:
            calls = 0
        open(path, "w").write(str(calls + 1))
        if calls == 0:
            print("API Error: 429 rate limit exceeded. Please try again in 2 seconds.")
            sys.exit(1)
        print('<result>{{"status": "success", "summary": "after the wait"}}</result>')
    """)


def add(state: StatePaths, specs: list[dict[str, Any]], *, scaffold: bool = True) -> None:
    conn = open_graph_db(state)
    try:
        g = Graph(conn, DEFAULT_GRAPH, state)
        add_nodes(g, specs)
        if scaffold:
            ensure_scaffolding(g)
    finally:
        conn.close()


def nodes(state: StatePaths) -> dict[str, dict[str, Any]]:
    conn = open_graph_db(state)
    try:
        return {n["id"]: n for n in list_nodes(Graph(conn, DEFAULT_GRAPH, state))}
    finally:
        conn.close()


def node(state: StatePaths, node_id: str) -> dict[str, Any]:
    conn = open_graph_db(state)
    try:
        found = get_node(Graph(conn, DEFAULT_GRAPH, state), node_id)
        assert found is not None
        return found
    finally:
        conn.close()


def run(state: StatePaths, events: list[dict[str, Any]] | None = None,
        **options: Any) -> dict[str, Any]:
    options.setdefault("graph", DEFAULT_GRAPH)
    sink = events if events is not None else []
    return supervise(state, RunOptions(**options), sink.append)


def cli_env(state: StatePaths, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(CLAVAIN_PROJECT_DIR=str(state.project), CLAVAIN_PYTHON=sys.executable, **extra)
    return env


def loop_until_it_waits(args: list[str], *, cwd: Path, env: dict[str, str]) -> tuple[int, str]:
    """`clavain loop ARGS`, interrupted (SIGINT) once it says it waits for the project's
    calls-per-hour window, or left to end by itself: (exit code, stderr)."""
    import signal

    proc = subprocess.Popen([str(REPO / "bin" / "clavain"), "loop", *args], cwd=cwd, env=env,
                            text=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seen = []
    try:
        for line in proc.stderr or ():
            seen.append(line)
            if "waiting" in line and "calls per hour" in line:
                proc.send_signal(signal.SIGINT)
                break
        seen.append(proc.stderr.read() if proc.stderr else "")
        return proc.wait(timeout=60), "".join(seen)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def start_cli(state: StatePaths, *args: str, **extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen([str(REPO / "bin" / "clavain"), *args], cwd=state.project,
                            env=cli_env(state, **extra), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


FAKE_CLAUDE = """
import json, os, sys, time
packet = sys.stdin.read()
log = os.environ.get("FAKE_CLAUDE_LOG")
if log:
    with open(log, "a") as handle:
        handle.write(json.dumps({"node": os.environ.get("CLAVAIN_NODE_ID"),
                                 "argv": sys.argv[1:], "packet_chars": len(packet)}) + "\\n")
result = os.environ.get("FAKE_CLAUDE_RESULT",
                        '{"status": "success", "summary": "done by the fake model"}')
print(json.dumps({"type": "result", "subtype": "success", "is_error": False,
                  "num_turns": 2, "session_id": "fake-session",
                  "result": "Work done.\\n<result>" + result + "</result>",
                  "total_cost_usd": float(os.environ.get("FAKE_CLAUDE_COST", "0.25")),
                  "usage": {"input_tokens": 1000, "output_tokens": 200,
                            "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
                  "modelUsage": {"claude-test": {"inputTokens": 1000, "outputTokens": 200,
                                                 "cacheReadInputTokens": 0,
                                                 "cacheCreationInputTokens": 0}}}))
"""

# What the real binary prints when it is not logged in (tests/fixtures/claude_output has the
# JSON shapes): an API error, no result block, exit 1.
LOGGED_OUT_CLAUDE = """
import json, sys
sys.stdin.read()
print(json.dumps({"type": "result", "subtype": "success", "is_error": True,
                  "terminal_reason": "api_error", "num_turns": 1,
                  "result": "Not logged in · Please run /login"}))
sys.exit(1)
"""


# A node's work that proves it never ran twice at once: it holds an exclusive flock on a
# marker named for its node while it works (a second holder logs an overlap instead of
# waiting), and logs when it starts and ends (pid, time). argv: the log folder, the node,
# seconds of work. `benchmarks/chaos.py` runs it too.
FLOCK_WORK = """
import fcntl, os, sys, time
folder, node, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
def log(name, line):
    with open(os.path.join(folder, name), "a") as handle:
        handle.write(line + "\\n")
marker = open(os.path.join(folder, node + ".lock"), "a")
try:
    fcntl.flock(marker, fcntl.LOCK_EX | fcntl.LOCK_NB)
except BlockingIOError:
    log("overlaps.log", node)
log("executions.log", f"start {node} {os.getpid()} {time.time():.6f}")
time.sleep(seconds)
with open(node + ".txt", "w") as out:
    out.write(node + "\\n")
log("executions.log", f"end {node} {os.getpid()} {time.time():.6f}")
"""


def flock_tasks(tmp_path: Path, seconds: dict[str, float]) -> tuple[list[dict[str, Any]], Path]:
    """Tasks whose work is FLOCK_WORK for `seconds[node]`, and the folder of their logs."""
    folder = tmp_path / "work-logs"
    folder.mkdir(exist_ok=True)
    work = script(tmp_path / "work.py", FLOCK_WORK)
    specs = [{"id": node, "type": "task", "title": node, "verify": [PASSES],
              "commands": [f"{work} {folder} {node} {secs}"]}
             for node, secs in seconds.items()]
    return specs, folder


def executions(folder: Path) -> list[tuple[str, str, int]]:
    """(start|end, node, pid) lines of FLOCK_WORK's log."""
    path = folder / "executions.log"
    lines = path.read_text().split("\n") if path.exists() else []
    return [(kind, node, int(pid)) for kind, node, pid, _ in
            (line.split() for line in lines if line.strip())]


def overlaps(folder: Path) -> list[str]:
    path = folder / "overlaps.log"
    return path.read_text().split() if path.exists() else []


def wait_until(check: Any, seconds: float = 30.0, what: str = "the condition") -> Any:
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"{what} never came true")


def run_cli_json(state: StatePaths, *args: str, timeout: float = 120, **extra: str
                 ) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    done = subprocess.run([str(REPO / "bin" / "clavain"), *args, "--json"], cwd=state.project,
                          env=cli_env(state, **extra), capture_output=True, text=True,
                          timeout=timeout)
    try:
        report = json.loads(done.stdout)
    except ValueError:
        report = {}
    return done, report


def branches(state: StatePaths) -> list[str]:
    return git(state.project, "for-each-ref", "--format=%(refname:short)",
               "refs/heads/clavain/").split()


def worktree_folders(state: StatePaths) -> list[Path]:
    base = state.worktrees
    return sorted(p for p in base.glob("*/*") if p.is_dir()) if base.is_dir() else []


# A runner that spends known dollars per node and says so in claude's JSON report: as a
# configured runner (its share in CLAVAIN_BUDGET_SHARE_USD) or as `claude` (--max-budget-usd).
# FAKE_HONOUR=1 stops at its share as claude does (error_max_budget_usd, the share spent);
# FAKE_HONOUR=0 spends its full cost whatever its share. Costs: FAKE_COSTS (a JSON file of
# node → dollars), else node_cost(). FAKE_LOG: a line per call (node, argv, share).
# FAKE_SLEEP: seconds of work (FAKE_SLOW: the node that takes a minute). FAKE_HANG_FILE: write
# the pid there and hang. FAKE_SELF_KILL: the node whose runner kills itself (-9).
COST_RUNNER = """
import json, os, sys, time, zlib
sys.stdin.read()
node = os.environ.get("CLAVAIN_NODE_ID", "?")
args = sys.argv[1:]
share = None
if "--max-budget-usd" in args:
    share = float(args[args.index("--max-budget-usd") + 1])
elif os.environ.get("CLAVAIN_BUDGET_SHARE_USD"):
    share = float(os.environ["CLAVAIN_BUDGET_SHARE_USD"])
costs = os.environ.get("FAKE_COSTS")
crc = zlib.crc32(node.encode())
cost = json.load(open(costs)).get(node, 0.25) if costs else (
    2.5 if crc % 7 == 0 else 0.1 + (crc % 40) / 100)
log = os.environ.get("FAKE_LOG")
if log:
    with open(log, "a") as handle:
        handle.write(json.dumps({"node": node, "argv": args, "share": share,
                                 "share_env": os.environ.get("CLAVAIN_BUDGET_SHARE_USD"),
                                 "tokens_env": os.environ.get("CLAVAIN_BUDGET_SHARE_TOKENS"),
                                 "cwd": os.getcwd()}) + "\\n")
hang = os.environ.get("FAKE_HANG_FILE")
if hang:
    open(hang, "w").write(str(os.getpid()))
    time.sleep(600)
if os.environ.get("FAKE_SELF_KILL") == node:
    os.kill(os.getpid(), 9)
if os.environ.get("FAKE_SLOW") == node:
    time.sleep(60)
time.sleep(float(os.environ.get("FAKE_SLEEP", "0")))
over = os.environ.get("FAKE_HONOUR", "1") == "1" and share is not None and cost > share
spent = share if over else cost
report = {"type": "result", "subtype": "error_max_budget_usd" if over else "success",
          "is_error": over, "num_turns": 3, "session_id": "stand-in",
          "total_cost_usd": spent,
          "usage": {"input_tokens": int(spent * 100000), "output_tokens": 0,
                    "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}
if over:
    report.update(terminal_reason="budget_exhausted",
                  errors=[f"Reached maximum budget (${share})"])
else:
    report["result"] = 'Done.\\n<result>{"status": "success", "summary": "ok"}</result>'
print(json.dumps(report))
sys.exit(1 if over else 0)
"""


def node_cost(node: str) -> float:
    """What COST_RUNNER spends on `node` (no FAKE_COSTS): $0.10-0.49, one node in seven $2.50."""
    import zlib

    crc = zlib.crc32(node.encode())
    return 2.5 if crc % 7 == 0 else 0.1 + (crc % 40) / 100


def cost_tasks(count: int) -> list[dict[str, Any]]:
    """`count` independent tasks with no verify node (each is one runner call)."""
    return [{"id": f"task-{n:03d}", "type": "task", "title": f"task {n}", "verify": []}
            for n in range(count)]


def figures(state: StatePaths, report: dict[str, Any]) -> dict[str, float]:
    """The run's cost as every front door says it: the report, its metrics, metrics.json,
    the page's data, `clavain budget status --json` (its spend and its budgets table, which
    `clavain report` prints too) and the run's ledger."""
    from clavain.page.collect import choose, gather
    from clavain.supervisor.run_budget import run_key
    from clavain.supervisor.run_reserve import ledger_of

    run_id = report["run_id"]
    on_disk = json.loads((state.runs / run_id / "metrics.json").read_text())
    done, status = run_cli_json(state, "budget", "status", "--run", run_id)
    assert done.returncode == 0, done.stderr
    conn = open_graph_db(state)
    try:
        page = gather(state, conn, choose(state, conn, run=run_id))
    finally:
        conn.close()
    page_run = next(r for r in page["runs"] if r["run_id"] == run_id)
    return {"report": report["spend"]["cost_usd"], "metrics": report["metrics"]["cost_usd"],
            "metrics_json": on_disk["cost_usd"], "page": page_run["cost_usd"],
            "budget_status": status["reservations"]["spent"]["cost_usd"],
            "budget_table": next(b["used"] for b in status["budgets"]
                                 if b["budget"] == "Dollars"),
            "ledger": ledger_of(state, run_key(run_id))["cost_usd"]}
