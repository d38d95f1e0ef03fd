"""Whole-process latency of every hook registered in hooks/hooks.json, next to a bare interpreter.

Each hook command runs as Claude Code runs it (exec form: the command with its args, no shell;
shell form: through bash), with a realistic JSON payload on stdin and the env the host gives
hooks (CLAUDE_PLUGIN_ROOT, CLAUDE_PLUGIN_DATA, CLAUDE_PROJECT_DIR, CLAUDE_ENV_FILE for
SessionStart), in a throwaway git project and HOME. Times are spawn-to-exit wall clock, every
row once per round (interleaved, so the machine's drift reaches all alike), and each is also
printed as a ratio to the first row: the hook's own interpreter started bare with the hook's
own flags (`-I -S -c pass`), measured in the same run (issue 37: PreToolUse <= 1.5x). Every
hook is a spawned process (there is no resident server); the tool-call hooks are also timed in
a project without `.clavain/`, where bin/clavain-hook decides in bash and starts no interpreter.

    python benchmarks/hook_latency.py [--runs 30] [--python PATH] [--baseline-ref REF] [--json]

Besides the hooks it times what every database-using hook pays: importing the store, opening
`.clavain/state.sqlite` and one short write transaction, for this checkout and (to print the
old figure next to the new) for the library as of `--baseline-ref` (a git ref; default: the
commit before the fast-open change). And the floor no hook that records a call in SQLite can
go below: the C driver, an open, one write and the close with no Clavain code, alone and
started by bash; and what one without SQLite could: the payload read, one line appended to a
file, the process ended at once.

By default it measures what an installed user gets: a throwaway venv (no packages: the hot path
is stdlib-only) in CLAUDE_PLUGIN_DATA, marked ready the way the bootstrap marks it, so the
launcher picks it and SessionStart only checks the stamp. `--python PATH` instead sets
CLAVAIN_PYTHON (the launcher's explicit override) and skips the venv. A hook that
failed (non-zero exit, or a new line in .clavain/logs/hooks.log) is flagged in the table: a
failing hook can look fast.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "lib"))

HOOKS_JSON = REPO / "hooks" / "hooks.json"
TOOL_EVENTS = ("PreToolUse", "PostToolUse", "PostToolUseFailure", "PermissionRequest")
# The last commit whose store imported importlib.resources and read every migration on open.
BEFORE_FAST_OPEN = "7de9fa4"
# Open the state database and run one short write transaction, as a budget hook will.
OPEN_AND_WRITE = """import sys
sys.path.insert(0, sys.argv[1])
from clavain.store.db import connect, transaction
conn = connect(sys.argv[2])
with transaction(conn):
    conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('bench', 'x')")
"""
# The floor of any hook that records a call in SQLite from a fresh process: the C driver, an
# open, one write transaction and the close (the WAL checkpointed), no Clavain code at all.
FLOOR_WRITE = """import _sqlite3, sys
conn = _sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA synchronous = NORMAL")
conn.execute("BEGIN IMMEDIATE")
conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('floor', 'x')")
conn.execute("COMMIT")
conn.close()
"""
# What a hot path without SQLite could go down to: read the payload, append one record to a
# file, end at once; no check at all.
FLOOR_APPEND = """import sys
sys.path.insert(0, sys.argv[1])
import posix
from clavain import fastjson
payload = fastjson.loads(sys.stdin.buffer.read().decode("utf-8"))
fd = posix.open(sys.argv[2], posix.O_WRONLY | posix.O_APPEND | posix.O_CREAT, 0o600)
posix.write(fd, (str(payload.get("tool_name")) + "\\n").encode())
posix._exit(0)
"""


REVIEW_MESSAGE = (
    "Findings:\n- `http.py:42` the retry loop has no cap\n- `http.py:57` no test for 429\n\n"
    + "Details... " * 80 + "\n\n**TYPE:** verdict\n**STATUS:** NEEDS_ATTENTION\n"
    "**FINDINGS_COUNT:** 2\n**SUMMARY:** the retry loop has no cap and 429 is untested\n")


def write_agent_transcript(path: Path, turns: int = 40) -> None:
    """A subagent transcript as the host writes it: one line per content block, each repeating
    the response's usage; the last response carries the final message."""
    lines = []
    for turn in range(turns):
        usage = {"input_tokens": 1200 + turn, "output_tokens": 180,
                 "cache_read_input_tokens": 9000, "cache_creation_input_tokens": 300}
        last = turn == turns - 1
        for block in ("text", "tool_use"):
            content = {"type": "text", "text": REVIEW_MESSAGE if last else "Reading files."} \
                if block == "text" else {"type": "tool_use", "name": "Read", "input": {}}
            lines.append(json.dumps({
                "type": "assistant", "isSidechain": True, "agentId": "a1b2c3d4e5",
                "requestId": f"req_{turn}", "message": {
                    "id": f"msg_{turn}", "model": "claude-sonnet-4-5", "role": "assistant",
                    "content": [content], "usage": usage}}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _base(event: str, ctx: dict[str, str]) -> dict[str, Any]:
    return {"session_id": "5e5510n0-bench-4000-8000-000000000001",
            "transcript_path": ctx["transcript"], "cwd": ctx["project"],
            "hook_event_name": event, "permission_mode": "default"}


def _tool_input(tool: str, ctx: dict[str, str]) -> dict[str, Any]:
    if tool == "Bash":
        return {"command": "git status --short && pytest -q tests/unit",
                "description": "Check the work tree and run the unit tests"}
    if tool in ("Edit", "MultiEdit"):
        return {"file_path": f"{ctx['project']}/src/app.py", "old_string": "return 1\n",
                "new_string": "return 2\n", "replace_all": False}
    if tool == "Write":
        return {"file_path": f"{ctx['project']}/src/new.py", "content": "x = 1\n" * 40}
    if tool == "Agent":
        return {"description": "Review the plan", "prompt": "Review docs/plan.md. " * 20,
                "subagent_type": "clavain:reviewer"}
    return {"file_path": f"{ctx['project']}/README.md"}


def _tool_response(tool: str) -> dict[str, Any]:
    if tool == "Bash":
        return {"stdout": "M src/app.py\n" + "." * 60 + "\n60 passed in 1.2s\n", "stderr": "",
                "interrupted": False, "isImage": False}
    if tool in ("Edit", "MultiEdit", "Write"):
        return {"filePath": "src/app.py", "structuredPatch": [
            {"oldStart": 10, "oldLines": 1, "newStart": 10, "newLines": 1,
             "lines": ["-    return 1", "+    return 2"]}], "userModified": False}
    return {"type": "text", "file": {"content": "# project\n" * 50, "numLines": 50}}


def _matcher_pick(matcher: str | None, default: str) -> str:
    """A name the hook's matcher fires for: the default if it matches, else the first option."""
    if not matcher or matcher == "*":
        return default
    if re.fullmatch(r"[\w:.-]+(\|[\w:.-]+)*", matcher):
        options = matcher.split("|")
        return default if default in options else options[0]
    if re.search(matcher, default):
        return default
    first = re.split(r"\|", matcher)[0]
    return re.sub(r"[\^$()\\]", "", first) or default


def payload(event: str, matcher: str | None, ctx: dict[str, str]) -> dict[str, Any]:
    """A realistic stdin payload for one event, shaped like the 2.1.330 binary's."""
    data = _base(event, ctx)
    if event in TOOL_EVENTS:
        tool = _matcher_pick(matcher, "Bash")
        data.update(tool_name=tool, tool_input=_tool_input(tool, ctx),
                    tool_use_id="toolu_01BenchBenchBenchBench0001")
        if event == "PostToolUse":
            data.update(tool_response=_tool_response(tool), duration_ms=1234)
        if event == "PostToolUseFailure":
            data.update(error="Exit code 1\nFAILED tests/unit/test_app.py::test_x",
                        is_interrupt=False)
    elif event == "SessionStart":
        data["source"] = _matcher_pick(matcher, "startup")
    elif event == "UserPromptSubmit":
        data.update(prompt="/clavain:sprint --complexity 3 add retries to the HTTP client",
                    prompt_id="prompt_bench_0001")
    elif event in ("SubagentStart", "SubagentStop"):
        data.update(agent_id="a1b2c3d4e5",
                    agent_type=_matcher_pick(matcher, "clavain:reviewer"))
        if event == "SubagentStop":
            data.update(agent_transcript_path=ctx["agent_transcript"], stop_hook_active=False,
                        last_assistant_message=REVIEW_MESSAGE)
    elif event == "Stop":
        data.update(stop_hook_active=False, background_tasks=[],
                    last_assistant_message="Done: retries added and tested.")
    elif event == "SessionEnd":
        data["reason"] = _matcher_pick(matcher, "other")
    elif event == "PreCompact":
        data.update(trigger=_matcher_pick(matcher, "auto"), custom_instructions="")
    elif event == "Notification":
        data.update(message="Claude needs your permission", notification_type="permission_prompt")
    return data


def make_bench_project(work: Path) -> tuple[Path, Path, Path, Path]:
    """(project, HOME, plugin data folder, session transcript) under `work`: a git project with
    Clavain state whose budgets have room, so PreToolUse counts each call in the database (the
    repeat guard still warns on the same command after a few runs: the same work)."""
    project, home, data = work / "project", work / "home", work / "plugin-data"
    for folder in (project, home, data):
        folder.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    (project / ".clavain").mkdir()
    (project / ".clavain" / "config.json").write_text(json.dumps(
        {"budgets": {"maxCommands": 1_000_000, "maxTestRuns": 1_000_000}}), encoding="utf-8")
    transcript = home / ".claude" / "projects" / "bench" / "session.jsonl"
    transcript.parent.mkdir(parents=True)
    transcript.write_text("", encoding="utf-8")
    return project, home, data, transcript


def make_ready_venv(data: Path) -> str:
    """A venv in the plugin data folder, stamped ready as the bootstrap would; its python."""
    base = getattr(sys, "_base_executable", None) or sys.executable
    venv = data / "venv"
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    key = subprocess.run(
        [str(python), "-c", "from clavain.bootstrap import wanted_key; print(wanted_key())"],
        env={"PYTHONPATH": str(REPO / "lib"), "PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        capture_output=True, text=True, check=True).stdout.strip()
    (venv / ".clavain-ready").write_text(key, encoding="utf-8")
    return str(python)


def registered_hooks() -> list[dict[str, Any]]:
    """(event, matcher, command, args) of every command hook in hooks/hooks.json."""
    config = json.loads(HOOKS_JSON.read_text(encoding="utf-8"))
    found = []
    for event, groups in config.get("hooks", {}).items():
        for group in groups:
            for hook in group.get("hooks", ()):
                if hook.get("type") == "command":
                    found.append({"event": event, "matcher": group.get("matcher"),
                                  "command": hook["command"], "args": hook.get("args")})
    return found


def argv_for(hook: dict[str, Any]) -> list[str]:
    command = hook["command"].replace("${CLAUDE_PLUGIN_ROOT}", str(REPO))
    if hook["args"] is not None:  # exec form: the host puts the plugin's folder in args too
        return [command, *(arg.replace("${CLAUDE_PLUGIN_ROOT}", str(REPO))
                           for arg in hook["args"])]
    return ["bash", "-c", command]


def time_interleaved(cases: list[dict[str, Any]], runs: int, warmup: int) -> None:
    """Time every case once per round, `warmup + runs` rounds, so the machine's drift reaches
    all of them alike: each case gets `samples`, `codes` and its first `stderr`."""
    for case in cases:
        case.update(samples=[], codes=[], stderr="")
    for round_ in range(warmup + runs):
        for case in cases:
            if case.get("before_each"):
                case["before_each"]()
            started = time.perf_counter()
            done = subprocess.run(case["argv"], input=case.get("stdin", ""), capture_output=True,
                                  text=True, env=case["env"], cwd=case["cwd"], timeout=120)
            elapsed = (time.perf_counter() - started) * 1000
            if round_ >= warmup:
                case["samples"].append(elapsed)
                case["codes"].append(done.returncode)
            case["stderr"] = case["stderr"] or done.stderr.strip()


def traced_run(argv: list[str], stdin: str, env: dict[str, str], cwd: Path, work: Path,
               before=None) -> str:
    """One untimed run with CLAVAIN_HOOK_TRACE: which interpreter the launcher really picked
    (or that no interpreter ran)."""
    trace = work / "trace.jsonl"
    trace.unlink(missing_ok=True)
    if before:
        before()
    subprocess.run(argv, input=stdin, capture_output=True, text=True, cwd=cwd, timeout=120,
                   env={**env, "CLAVAIN_HOOK_TRACE": str(trace)})
    try:
        record = json.loads(trace.read_text(encoding="utf-8").splitlines()[-1])
        return record["python"]
    except (OSError, IndexError, ValueError, KeyError):
        return "none"


def _export_lib(ref: str, into: Path) -> Path | None:
    """`lib/` as of `ref` (git archive), or None when git or the ref is not there."""
    into.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", ref, "lib"],
                             capture_output=True)
    if archive.returncode != 0:
        return None
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into / "lib"


def _short(matcher: str) -> str:
    """A matcher for a table cell: its first two alternatives."""
    alternatives = matcher.split("|")
    return "|".join(alternatives[:2]) + ("|…" if len(alternatives) > 2 else "")


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    rank = (len(ordered) - 1) * pct / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--python", default=None,
                        help="set CLAVAIN_PYTHON to this interpreter instead of using a ready "
                             "plugin venv")
    parser.add_argument("--baseline-ref", default=BEFORE_FAST_OPEN,
                        help="git ref whose lib/ is timed for the old open figure ('' skips)")
    parser.add_argument("--json", action="store_true", help="print rows as JSON")
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="clavain-hook-bench-"))
    try:
        project, home, data, transcript = make_bench_project(work)
        env_file = work / "env-file.sh"
        agent_transcript = transcript.parent / "session" / "subagents" / "agent-a1b2c3d4e5.jsonl"
        agent_transcript.parent.mkdir(parents=True)
        write_agent_transcript(agent_transcript)
        ctx = {"project": str(project), "transcript": str(transcript),
               "agent_transcript": str(agent_transcript)}
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
               "LANG": os.environ.get("LANG", "C.UTF-8"),
               "CLAUDE_PLUGIN_ROOT": str(REPO), "CLAUDE_PLUGIN_DATA": str(data),
               "CLAUDE_PROJECT_DIR": str(project)}
        if args.python:
            python = env["CLAVAIN_PYTHON"] = args.python
            setup = "CLAVAIN_PYTHON"
        else:
            python = make_ready_venv(data)
            setup = "ready plugin venv"
        hooks_log = project / ".clavain" / "logs" / "hooks.log"

        cases: list[dict[str, Any]] = []
        # The baseline every ratio is taken against: the hook's own interpreter with the
        # hook's own flags (bin/clavain-hook runs `-I -S`).
        for label, base_argv in (("bare interpreter (-I -S -c pass)",
                                  [python, "-I", "-S", "-c", "pass"]),
                                 ("bare interpreter, site (-c pass)", [python, "-c", "pass"]),
                                 ("bare bash -c :", ["bash", "-c", ":"])):
            if shutil.which(base_argv[0]) or os.path.exists(base_argv[0]):
                cases.append({"name": label, "argv": base_argv, "env": env,
                              "cwd": str(project)})

        database = project / ".clavain" / "state.sqlite"
        libs = [("this checkout", REPO / "lib")]
        old_lib = _export_lib(args.baseline_ref, work / "baseline") if args.baseline_ref else None
        if old_lib is not None:
            libs.append((args.baseline_ref, old_lib))
        for name, lib in libs:
            # A database per library: the old one must not see the newer schema version.
            path = database.with_name(f"state-{len(cases)}.sqlite")
            argv_open = [python, "-I", "-S", "-c", OPEN_AND_WRITE, str(lib), str(path)]
            subprocess.run(argv_open, check=True, env=env)  # create + migrate outside timing
            cases.append({"name": f"open db + 1 write transaction ({name})", "argv": argv_open,
                          "env": env, "cwd": str(project)})

        # What no hook that records a call in SQLite can go below: the interpreter, the driver,
        # the open, one write, the close; alone and launched through bash as hooks are.
        floor_db = str(database.with_name("state-floor.sqlite"))
        subprocess.run([python, "-I", "-S", "-c", OPEN_AND_WRITE, str(REPO / "lib"), floor_db],
                       check=True, env=env)
        floor_argv = [python, "-I", "-S", "-c", FLOOR_WRITE, floor_db]
        cases.append({"name": "floor: 1 SQLite write, no Clavain code", "argv": floor_argv,
                      "env": env, "cwd": str(project)})
        cases.append({"name": "floor, started by bash (bash -c exec)",
                      "argv": ["bash", "-c", 'exec "$@"', "-", *floor_argv], "env": env,
                      "cwd": str(project)})
        cases.append({"name": "floor without SQLite: payload read, 1 line appended",
                      "argv": [python, "-I", "-S", "-c", FLOOR_APPEND, str(REPO / "lib"),
                               str(work / "appended.log")], "env": env, "cwd": str(project),
                      "stdin": json.dumps(payload("PreToolUse", None, ctx))})

        hook_cases = []
        for hook in registered_hooks():
            event = hook["event"]
            body = json.dumps(payload(event, hook["matcher"], ctx))
            hook_env = dict(env)
            reset = None
            if event == "SessionStart":
                hook_env["CLAUDE_ENV_FILE"] = str(env_file)

                def reset(path: Path = env_file) -> None:
                    path.write_text("", encoding="utf-8")
            # Tool-call hooks also where Clavain keeps no state: decided in bash.
            plain = work / "plain"
            plain.mkdir(exist_ok=True)
            modes = [("", project), ("no .clavain", plain)] \
                if event in ("PreToolUse", "PostToolUseFailure") else [("", project)]
            for mode, where in modes:
                label = event + (f" ({mode})" if mode else "") + \
                    (f" [{_short(hook['matcher'])}]" if hook["matcher"] else "")
                case = {"name": label, "argv": argv_for(hook), "cwd": str(where),
                        "stdin": body.replace(str(project), str(where)),
                        "env": {**hook_env, "CLAUDE_PROJECT_DIR": str(where)},
                        "before_each": reset, "expected": "none" if mode else python}
                cases.append(case)
                hook_cases.append(case)

        log_before = hooks_log.stat().st_size if hooks_log.exists() else 0
        time_interleaved(cases, args.runs, args.warmup)
        log_after = hooks_log.stat().st_size if hooks_log.exists() else 0
        for case in hook_cases:
            notes = []
            ran_with = traced_run(case["argv"], case["stdin"], case["env"], Path(case["cwd"]),
                                  work, case["before_each"])
            if ran_with != case["expected"]:
                notes.append(f"ran with {ran_with}, not {case['expected']}")
            if case["stderr"]:
                notes.append(f"stderr: {case['stderr'].splitlines()[-1][:120]}")
            case["note"] = "; ".join(notes)
        if log_after > log_before:
            tail = hooks_log.read_text(encoding="utf-8").splitlines()[-1]
            hook_cases[0]["note"] += f" hooks.log grew during the runs: {tail[:120]}"
        rows = [{"name": case["name"], "runs": len(case["samples"]),
                 "p50_ms": round(percentile(case["samples"], 50), 1),
                 "p95_ms": round(percentile(case["samples"], 95), 1),
                 "min_ms": round(min(case["samples"]), 1),
                 "failures": sum(1 for c in case["codes"] if c != 0),
                 "note": case.get("note", "")} for case in cases]
        bare_ms = percentile(cases[0]["samples"], 50)
        for row, case in zip(rows, cases, strict=True):
            row["ratio_to_bare"] = round(percentile(case["samples"], 50) / bare_ms, 2)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    if args.json:
        print(json.dumps({"python": python, "setup": setup, "runs": args.runs,
                          "baseline": rows[0]["name"], "rows": rows}, indent=2))
        return 0
    baseline = rows[0]["p50_ms"]
    headers = ["hook / baseline", "runs", "p50 ms", "p95 ms", "min ms", "+p50 vs bare",
               "x bare", "failed"]
    table = [[r["name"], str(r["runs"]), f"{r['p50_ms']:.1f}", f"{r['p95_ms']:.1f}",
              f"{r['min_ms']:.1f}", f"{r['p50_ms'] - baseline:+.1f}",
              f"{r['ratio_to_bare']:.2f}", str(r["failures"])] for r in rows]
    widths = [max(len(h), *(len(row[i]) for row in table)) for i, h in enumerate(headers)]
    print(f"python: {python} ({setup})  runs: {args.runs} (+{args.warmup} warm-up), every row "
          f"once per round  cpus: {os.cpu_count()}")
    print(f"ratios against the first row, {rows[0]['name']}: {baseline:.1f} ms on this machine")
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for row in table:
        print("  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                        for i, (cell, w) in enumerate(zip(row, widths, strict=True))))
    for r in rows:
        if r["note"]:
            print(f"note: {r['name']}: {r['note']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
