"""What Clavain adds to a real session per tool call, with budgets on.

Runs `claude -p` against the scripted model on 127.0.0.1: a session of 20 Bash calls (one per
turn, each a different `echo`) without the plugin and with `--plugin-dir` this repo in a project
whose `.clavain/config.json` gives the budgets room, alternating the two (A B A B …) so machine
drift hits both. Prints the median session wall time of each, the difference per call, and the
PreToolUse hook's own p50/p95 as it recorded itself (from bin/clavain-hook's start to its
decision; every call is a spawned process). The whole
difference is charged to the tool calls, so SessionStart and Stop count against them too (an
upper bound).

    python benchmarks/tool_overhead.py [--runs 5] [--calls 20] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "lib")]

from tests.e2e.conftest import ClaudeRunner  # noqa: E402
from tests.e2e.scripted_model import ScriptedModel, assistant_turns, bash, text  # noqa: E402

from clavain.claude_bin import find_claude  # noqa: E402

TARGET_MS_PER_CALL = 25


def session(runner: ClaudeRunner, calls: int, plugin: bool, tag: str) -> float:
    def script(request: dict[str, Any]):
        turn = assistant_turns(request)
        return [bash(f"echo {tag}-{turn}")] if turn < calls else [text("done")]

    started = time.perf_counter()
    run = runner.run("echo things", script, plugin_dir=REPO if plugin else None,
                     allowed_tools=("Bash",), timeout=600)
    elapsed = time.perf_counter() - started
    if run.returncode != 0 or len(run.requests) < calls + 1:
        raise SystemExit(f"the session did not run its {calls} calls\n{run}")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="sessions of each kind")
    parser.add_argument("--calls", type=int, default=20, help="Bash calls per session")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    binary = find_claude()
    if binary is None:
        raise SystemExit("no claude binary (set CLAVAIN_CLAUDE_BIN)")
    bare, with_plugin = [], []
    with tempfile.TemporaryDirectory(prefix="clavain-overhead-") as tmp, \
            ScriptedModel() as model:
        runner = ClaudeRunner(binary, model, Path(tmp))
        state = runner.project / ".clavain"
        state.mkdir()
        (state / "config.json").write_text(json.dumps({"budgets": {
            "maxCommands": 1_000_000, "maxTestRuns": 1_000_000}}))
        session(runner, 2, True, "warm")  # first start: caches, venv checks
        for index in range(args.runs):
            bare.append(session(runner, args.calls, False, f"b{index}"))
            with_plugin.append(session(runner, args.calls, True, f"p{index}"))
        from clavain.store import db

        conn = db.connect(state / "state.sqlite")
        hook = sorted(row[0] for row in conn.execute(
            "SELECT hook_ms FROM budget_calls WHERE hook_ms IS NOT NULL"))
        counted = conn.execute("SELECT sum(commands) FROM budget_runs").fetchone()[0]
        conn.close()
    bare_ms, plugin_ms = statistics.median(bare) * 1000, statistics.median(with_plugin) * 1000
    per_call = (plugin_ms - bare_ms) / args.calls
    report = {"runs": args.runs, "calls": args.calls, "bare_session_ms": round(bare_ms, 1),
              "plugin_session_ms": round(plugin_ms, 1), "per_call_ms": round(per_call, 1),
              "target_per_call_ms": TARGET_MS_PER_CALL, "commands_counted": counted,
              "hook_p50_ms": hook[len(hook) // 2] if hook else None,
              "hook_p95_ms": hook[int(0.95 * (len(hook) - 1))] if hook else None}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{args.runs} sessions of {args.calls} Bash calls each (median wall):")
    print(f"  bare host          {bare_ms:8.1f} ms")
    print(f"  with Clavain       {plugin_ms:8.1f} ms  (budgets on; {counted} commands counted)")
    print(f"  per tool call      {per_call:+8.1f} ms  (target <= {TARGET_MS_PER_CALL} ms)")
    print(f"  PreToolUse as recorded (launcher start to decision): p50 "
          f"{report['hook_p50_ms']} ms, p95 {report['hook_p95_ms']} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
