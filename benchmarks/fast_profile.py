"""What `clavain run` costs per profile, measured on the real `claude -p` against the scripted
model (no API key): a fixed plan — one planner node that adds three tasks, each with a shell
verify command, as in tests/e2e/test_supervisor_e2e.py — run with `--workers 3`, once per
profile and repeat, each run in a fresh temporary HOME and project.

Profiles (measured):
  full+shell  `--packet-mode full`: executors get the plan context; checks by the shell verifier.
  thin+shell  `--packet-mode thin`: the plan context left out of executor packets (the
              recommended fast profile); checks by the shell verifier.

No "LLM verify" profile is run, because none can be: `routes.route_for` sends every verify and
final-verify node to the shell verifier whatever `supervisor.roles` says (only it may record a
verify node's result). Emulating one by having executors run the checks too would measure
something else (a longer executor session, not a verifier's), so the third row is a
counterfactual computed from a measured run, and marked so: full+shell's LLM calls plus one
per verify node that ran without an LLM (`verify_without_llm`: one per task and the final
verify). Its tokens and wall time are not shown (nothing was run); the size of the packet each
such verifier would start from (`clavain graph packet verify-task-one`, full mode) is.

Figures: nodes run (from the run's metrics), LLM calls (`llm_invocations`, by role), executor
calls per task, the scripted model's /v1/messages requests by the packet role they carry,
verify nodes run without an LLM, tokens (the run's metrics add up the usage claude reported;
the scripted model estimates that usage from request and reply sizes, so these are
"scripted-model tokens", not Claude's), the executor packet as the model received it (counted
with ctok 4.7 when a ctok is found on PATH or in the ctok venv benchmarks/context_cost.py
installs; else characters, said so), and the wall seconds of the `clavain run` process (median
of `--repeat N`; `--verbose` prints every run).

    python benchmarks/fast_profile.py [--repeat N] [--verbose] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "lib")]

from tests.e2e.conftest import ClaudeRunner  # noqa: E402
from tests.e2e.scripted_model import ScriptedModel, assistant_turns, bash, text  # noqa: E402
from tests.e2e.three_tasks import (  # noqa: E402
    PLAN_RESULT,
    TASKS,
    executor_reply,
    packet_block,
)

from clavain.claude_bin import find_claude  # noqa: E402

PROFILES = {"full+shell": "full", "thin+shell": "thin"}
COUNTERFACTUAL = "full+LLM verify*"
CTOK_VERSION = "4.7"
GIT_ENV = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.invalid",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@example.invalid"}
CONFIG = {"defaults": {"snapshotMaxLagSeconds": 0, "retryBackoffSeconds": 0},
          "supervisor": {"claude": {"maxTurns": 8,
                                    "allowedTools": ["Bash", "Read", "Write", "Edit"],
                                    "extraArgs": ["--plugin-dir", str(REPO)]}}}


# ------------------------------------------------------------------ the scripted model


# What a planner typically hands over: a design note of a few hundred words, shared by every
# task through `ctx.design` (full packets inline it; thin packets point to it).
DESIGN = ("Design: three plain-text files, one per task; each holds its own name on one line. "
          "No task reads the file of another, so they run in parallel; the checks are greps. " * 8)


class Script:
    """The planner adds three tasks; each executor writes its file with one Bash call."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: list[tuple[str, str, int]] = []
        self.packets: dict[str, str] = {}

    def __call__(self, request: dict[str, Any]):
        role, node, packet = packet_block(request)
        turn = assistant_turns(request)
        with self.lock:
            self.seen.append((role or "other", node, turn))
            if role and turn == 0:
                self.packets.setdefault(node, packet)
        if role == "planner":
            if turn == 0:  # the design goes to the run's shared context, as the template asks
                return [bash(f"clavain kv put --run --key ctx.design --value '{DESIGN}'",
                             "Record the design")]
            return [text(f"Three independent files.\n\n<result>{json.dumps(PLAN_RESULT)}"
                         "</result>")]
        if role == "executor" and node.startswith("task-"):
            return executor_reply(request, node, turn)
        return None


# ------------------------------------------------------------------ one run


def _clavain(env: dict[str, str], cwd: Path, *args: str, stdin: str | None = None,
             timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(REPO / "bin" / "clavain"), *args], cwd=cwd, env=env,
                          input=stdin, capture_output=True, text=True, timeout=timeout)


def _checked(done: subprocess.CompletedProcess[str], what: str) -> str:
    if done.returncode != 0:
        raise SystemExit(f"error: {what} exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    return done.stdout


def run_once(binary: Path, packet_mode: str) -> dict[str, Any]:
    """One `clavain run --workers 3` of the fixed plan in a fresh HOME and project."""
    with tempfile.TemporaryDirectory(prefix="clavain-fast-profile-") as tmp, \
            ScriptedModel() as model:
        runner = ClaudeRunner(binary, model, Path(tmp))
        project = runner.project
        env = runner.env({"CLAVAIN_CLAUDE_BIN": str(binary), "CLAVAIN_PYTHON": sys.executable,
                          "CLAVAIN_PROJECT_DIR": str(project)})
        _checked(_clavain(env, project, "init", "--json"), "clavain init")
        (project / ".clavain" / "config.json").write_text(json.dumps(CONFIG))
        git_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(runner.home),
                   **GIT_ENV}
        for argv in (["git", "add", "-A"], ["git", "commit", "-qm", "clavain init"]):
            subprocess.run(argv, cwd=project, env=git_env, check=True, capture_output=True)
        graph = json.dumps({"nodes": [{"id": "plan-greeter", "type": "plan",
                                       "title": "Plan a greeter"}]})
        _checked(_clavain(env, project, "graph", "import", "-", "--json", stdin=graph),
                 "clavain graph import")
        script = Script()
        model.script = script
        began = time.monotonic()
        done = _clavain(env, project, "run", "--workers", "3", "--packet-mode", packet_mode,
                        "--json")
        wall = time.monotonic() - began
        report = json.loads(done.stdout) if done.stdout.strip().startswith("{") else {}
        if done.returncode != 0 or report.get("status") != "complete" or model.errors:
            raise SystemExit(f"error: clavain run ({packet_mode}) did not complete: exit "
                             f"{done.returncode}, status {report.get('status')!r}, script "
                             f"errors {model.errors}\n{done.stderr.strip()[-2000:]}")
        verifier = json.loads(_checked(_clavain(env, project, "graph", "packet",
                                                "verify-task-one", "--json"),
                                       "clavain graph packet"))["packet"]
        requests = Counter(role for role, _node, _turn in script.seen)
        executor_packet = script.packets.get(f"task-{TASKS[0]}", "")
    metrics = report["metrics"]
    return {"metrics": metrics, "wall": wall, "requests": dict(requests),
            "executor_packet": executor_packet, "verifier_packet": verifier}


# ------------------------------------------------------------------ token counting


def ctok_python() -> str | None:
    """An interpreter that imports ctok: the one behind `ctok` on PATH, else the ctok venv
    benchmarks/context_cost.py installs; None when neither is there (nothing is installed)."""
    candidates = []
    on_path = shutil.which("ctok")
    if on_path:
        candidates.append(str(Path(on_path).resolve().parent / "python"))
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    candidates.append(str(cache / "clavain" / "ctok-venv" / "bin" / "python"))
    for python in candidates:
        if os.access(python, os.X_OK) and subprocess.run(
                [python, "-c", "import ctok"], capture_output=True).returncode == 0:
            return python
    return None


def count_tokens(texts: list[str]) -> tuple[list[int], str]:
    """Content tokens of each text (ctok's count less what it counts for ''), and the unit;
    characters when no ctok is usable."""
    python = ctok_python()
    if python is None:
        return [len(t) for t in texts], "chars (no ctok found)"
    code = ("import json, sys, ctok; texts = json.load(sys.stdin); "
            f"print(json.dumps([ctok.token_count(t, version={CTOK_VERSION!r}) for t in texts]))")
    done = subprocess.run([python, "-c", code], input=json.dumps(["", *texts]), text=True,
                          capture_output=True, check=True)
    empty, *counts = json.loads(done.stdout)
    return [max(0, c - empty) for c in counts], f"ctok {CTOK_VERSION} tokens"


# ------------------------------------------------------------------ the table


def row_for(name: str, runs: list[dict[str, Any]], packet_tokens: int) -> dict[str, Any]:
    first = runs[0]["metrics"]
    by_role = first["llm_invocations_by_role"]
    requests: Counter[str] = Counter()
    for run in runs:
        requests.update(run["requests"])
    return {
        "profile": name, "measured": True, "runs": len(runs),
        "nodes_run": sum(first["nodes"].values()),
        "llm_calls": first["llm_invocations"], "llm_calls_by_role": by_role,
        "executor_calls_per_task": round(by_role.get("executor", 0) / len(TASKS), 2),
        "model_requests_by_role": {role: count // len(runs) for role, count in requests.items()},
        "verify_without_llm": first["verify_without_llm"],
        "scripted_model_tokens": statistics.median(r["metrics"]["tokens"] for r in runs),
        "executor_packet": packet_tokens,
        "wall_seconds": round(statistics.median(r["wall"] for r in runs), 2),
        "wall_seconds_runs": [round(r["wall"], 2) for r in runs],
        "timelines": [r["metrics"]["timeline"] for r in runs],
    }


def counterfactual(base: dict[str, Any], verifier_packet: int) -> dict[str, Any]:
    extra = base["verify_without_llm"]
    by_role = {**base["llm_calls_by_role"], "verifier": extra - 1, "final-verifier": 1}
    return {"profile": COUNTERFACTUAL, "measured": False, "runs": 0,
            "nodes_run": base["nodes_run"], "llm_calls": base["llm_calls"] + extra,
            "llm_calls_by_role": by_role,
            "executor_calls_per_task": base["executor_calls_per_task"],
            "model_requests_by_role": None, "verify_without_llm": 0,
            "scripted_model_tokens": None, "executor_packet": base["executor_packet"],
            "verifier_packet": verifier_packet, "wall_seconds": None, "wall_seconds_runs": []}


def target_met(row: dict[str, Any]) -> bool:
    """≤ 1 LLM call per task node and per escalation node, none for verify nodes."""
    for timeline in row["timelines"]:
        calls = Counter(entry["node"] for entry in timeline if entry["llm"])
        roles = {entry["node"]: entry["role"] for entry in timeline}
        if any(count > 1 for node, count in calls.items()
               if roles.get(node) in ("executor", "escalation")):
            return False
        if any(roles.get(node) in ("verifier", "final-verifier") for node in calls):
            return False
    return row["verify_without_llm"] == len(TASKS) + 1


ROLE_LETTERS = {"planner": "P", "executor": "E", "escalation": "X", "verifier": "V",
                "final-verifier": "F", "integrator": "I", "final verifier": "F", "other": "?"}


def _fmt_roles(by_role: dict[str, int] | None) -> str:
    """`7 (P1 E6)`: the total, then by role letter in ROLE_LETTERS' order."""
    if not by_role:
        return "—"
    order = list(ROLE_LETTERS)
    parts = [f"{ROLE_LETTERS.get(role, role)}{count}" for role, count in
             sorted(by_role.items(), key=lambda item: order.index(item[0])
                    if item[0] in order else len(order))]
    return f"{sum(by_role.values())} ({' '.join(parts)})"


def print_table(rows: list[dict[str, Any]], unit: str, verbose: bool) -> None:
    print(f"{'profile':<17}{'nodes':>6}{'LLM calls':>18}{'LLM/task':>9}{'model requests':>16}"
          f"{'verify no-LLM':>14}{'tokens*':>9}{'packet':>8}{'wall s':>8}")
    for row in rows:
        calls = _fmt_roles(row["llm_calls_by_role"])
        tokens = "—" if row["scripted_model_tokens"] is None else \
            f"{row['scripted_model_tokens']:,.0f}"
        wall = "—" if row["wall_seconds"] is None else f"{row['wall_seconds']:.2f}"
        print(f"{row['profile']:<17}{row['nodes_run']:>6}{calls:>18}"
              f"{row['executor_calls_per_task']:>9.2f}"
              f"{_fmt_roles(row['model_requests_by_role']):>16}{row['verify_without_llm']:>14}"
              f"{tokens:>9}{row['executor_packet']:>8}{wall:>8}")
        if verbose and row["measured"]:
            print(f"{'':<17}runs: {', '.join(f'{w:.2f}s' for w in row['wall_seconds_runs'])}")
    cf = rows[-1]
    print("roles: P planner, E executor, V verifier, F final verifier; LLM/task = executor "
          "calls per task; model requests = /v1/messages the scripted model saw, per run.")
    word = "tokens" if unit.startswith("ctok") else "chars"
    print(f"tokens* = scripted-model tokens (the usage claude reported, which the scripted model "
          f"estimates from request sizes); packet = executor packet in {unit}; wall = the "
          f"`clavain run` process, median of {rows[0]['runs']}.")
    print(f"{COUNTERFACTUAL}: not run (verify nodes always go to the shell verifier); computed as "
          f"full+shell + 1 LLM call per verify node ({cf['llm_calls'] - rows[0]['llm_calls']}), "
          f"each starting from a verifier packet of {cf['verifier_packet']} {word}.")
    delta = rows[1]["executor_packet"] - rows[0]["executor_packet"]
    print(f"thin − full executor packet: {delta:+} {word}"
          " (thin drops only the plan context: the parents chain and the run's ctx.* keys).")
    measured = [row for row in rows if row["measured"]]
    met = all(target_met(row) for row in measured)
    print("Seed target: ≤ 1 LLM call per task (+ ≤ 1 per escalation), 0 for verify nodes: "
          f"{'met' if met else 'not met'} (" + ", ".join(
              f"{row['profile']} {'met' if target_met(row) else 'not met'}" for row in measured)
          + "; the planner's call is the plan node's, not a task's)")


def main(argv: list[str] | None = None) -> int:
    doc = __doc__ or ""
    parser = argparse.ArgumentParser(
        description="What `clavain run` costs per profile: a fixed 3-task plan on the real "
                    "`claude -p` against the scripted model (no API key).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=doc[doc.index("Profiles"):doc.index("Figures:")].rstrip())
    parser.add_argument("--repeat", type=int, default=3, metavar="N",
                        help="runs per profile; wall seconds are their median (default 3)")
    parser.add_argument("--verbose", action="store_true", help="print every run's wall time")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    binary = find_claude()
    if binary is None:
        raise SystemExit("error: no claude binary (set CLAVAIN_CLAUDE_BIN to the real `claude`, "
                         "e.g. ~/.cache/clavain/claude-code-2.1.330/node_modules/.bin/claude)")
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in PROFILES}
    for _ in range(args.repeat):  # interleaved, so drift hits every profile alike
        for name, mode in PROFILES.items():
            runs[name].append(run_once(binary, mode))
    texts = [runs[name][0]["executor_packet"] for name in PROFILES]
    texts.append(runs["full+shell"][0]["verifier_packet"])
    counts, unit = count_tokens(texts)
    rows = [row_for(name, runs[name], counts[i]) for i, name in enumerate(PROFILES)]
    rows.append(counterfactual(rows[0], counts[-1]))
    if args.json:
        met = all(target_met(row) for row in rows if row["measured"])
        for row in rows:
            row.pop("timelines", None)
        print(json.dumps({"packet_unit": unit, "tasks": len(TASKS), "rows": rows,
                          "target_met": met}, indent=2))
        return 0
    print_table(rows, unit, args.verbose)
    return 0


if __name__ == "__main__":
    sys.exit(main())
