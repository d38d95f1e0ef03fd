"""Whole-process latency of `bin/clavain statusline`, as Claude Code runs it after every assistant
message (at most every 300 ms): a throwaway project with a sprint started, a budget row for the
session (one real PreToolUse call) and a loop state file, then with 300 runs behind it (the latest
blocked), next to a bare interpreter and to a folder outside any Clavain project.

    python benchmarks/statusline.py [--runs 20] [--python PATH]

Prints the median wall-clock time of `--runs` runs of each.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = REPO / "bin"
SESSION = "bench-session"


def median_ms(argv: list[str], payload: str, cwd: Path, env: dict, runs: int) -> tuple[float, str]:
    times, out = [], ""
    for _ in range(runs):
        started = time.perf_counter()
        done = subprocess.run(argv, input=payload, capture_output=True, text=True, cwd=cwd,
                              env=env, check=True)
        times.append((time.perf_counter() - started) * 1000)
        out = done.stdout.strip()
    return statistics.median(times), out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        project, outside = Path(tmp) / "project", Path(tmp) / "outside"
        project.mkdir()
        outside.mkdir()
        subprocess.run(["git", "init", "-q", str(project)], check=True)
        env = {**os.environ, "CLAVAIN_PYTHON": args.python, "HOME": tmp}
        for name in ("CLAVAIN_PROJECT_DIR", "CLAUDE_PROJECT_DIR", "CLAVAIN_STATE_DIR",
                     "CLAVAIN_DB"):
            env.pop(name, None)
        subprocess.run([str(BIN / "clavain"), "sprint", "start", "--complexity", "3",
                        "benchmark the status line"], cwd=project, env=env, check=True,
                       capture_output=True)
        hook = {"session_id": SESSION, "hook_event_name": "PreToolUse", "tool_name": "Bash",
                "tool_input": {"command": "ls"}, "cwd": str(project)}
        subprocess.run([str(BIN / "clavain-hook"), "PreToolUse"], input=json.dumps(hook),
                       cwd=project, env=env, check=True, capture_output=True, text=True)
        (project / ".clavain" / "loops").mkdir(exist_ok=True)
        (project / ".clavain" / "loops" / f"{SESSION}.json").write_text(
            json.dumps({"iteration": 2, "max_iterations": 10}))
        rows = []
        for label, cwd in (("project", project), ("outside", outside)):
            # The subscription's windows as 2.1.330 sends them (recorded in window.json).
            payload = json.dumps({"session_id": SESSION, "workspace": {"current_dir": str(cwd)},
                                  "cost": {"total_cost_usd": 0.5}, "rate_limits": {
                                      "five_hour": {"used_percentage": 42,
                                                    "resets_at": int(time.time()) + 7200},
                                      "seven_day": {"used_percentage": 17,
                                                    "resets_at": int(time.time()) + 86400}}})
            rows.append((f"statusline ({label})", *median_ms(
                [str(BIN / "clavain"), "statusline"], payload, cwd, env, args.runs)))
            if cwd == project:
                in_project = payload
        # A project with a history: 300 runs, the latest blocked (its metrics.json read for
        # the reason), as the line finds the newest `supervisor.json` on every refresh.
        runs = project / ".clavain" / "runs"
        for n in range(300):
            folder = runs / f"run-{n:03d}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "supervisor.json").write_text(json.dumps(
                {"run_id": folder.name, "status": "complete" if n < 299 else "blocked"}))
        (runs / "run-299" / "metrics.json").write_text(json.dumps(
            {"status": "blocked", "reason": "deadlock",
             "timeline": [{"node": f"task-{i}", "seconds": 1.0} for i in range(200)]}))
        rows.append(("statusline (300 runs)", *median_ms(
            [str(BIN / "clavain"), "statusline"], in_project, project, env, args.runs)))
        rows.append(("bare interpreter", *median_ms([args.python, "-I", "-S", "-c", "pass"], "",
                                                    outside, env, args.runs)))
    for label, ms, out in rows:
        print(f"{label:<22} median {ms:6.1f} ms of {args.runs}  {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
