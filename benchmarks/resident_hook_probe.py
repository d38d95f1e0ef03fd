"""What a resident-process PreToolUse would cost: a probe to decide on, not a design that ships.

Issue 37 asks PreToolUse, as a whole process, to cost at most 1.5x a bare `python -I -S -c
pass` of the same interpreter. Today every tool call starts bin/clavain-hook (bash), which
execs Python, which imports the guards and counts the call in SQLite. This probe times, in one
run, every row once per round (interleaved, as benchmarks/hook_latency.py does):

1. the bare interpreter (`-I -S -c pass`): the baseline every ratio is taken against;
2. what the client rows import (`import _socket, os, sys` / `import socket`), nothing else;
3. PreToolUse today: `bash bin/clavain-hook PreToolUse` as hooks/hooks.json runs it (exec
   form), in a project with `.clavain/` and budgets on, a Bash `ls` payload: counted in SQLite;
4. a resident server (started once, outside the timed part: this checkout's library already
   imported, listening on an AF_UNIX socket) that runs each payload through the same in-process
   path (`clavain.hooks.run` -> `guards.gate.pre_tool_use`, same project, same env, so the same
   counting), reached by a tiny Python client (`-I -S`, only `socket`/`_socket`, `os`, `sys`);
5. the lean client launched through bash the way the launcher would (a bash file that sources
   lib/clavain/launcher.sh, then execs the client): what the launcher hop adds;
6. `socat` as the client (no Python at all), directly and through bash, when it is installed.

Each row has its own session id, so each counts its own calls; the table is followed by what
the database recorded per row (calls, the decision sequence compared with today's hook's, the
median `hook_ms` the gate recorded): the server did the real work, not a no-op. A row whose
process exited non-zero is flagged in the `failed` column.

    python benchmarks/resident_hook_probe.py [--runs 30] [--warmup 3] [--json]

Nothing here is wired into hooks/hooks.json or lib/: the server is a throwaway written below.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

# Run as a script, this folder is sys.path[0]: reuse the hook benchmark's helpers.
from hook_latency import (
    REPO,
    make_bench_project,
    make_ready_venv,
    payload,
    percentile,
    time_interleaved,
)

# The resident process: the library imported once, then one connection per tool call. The
# payload is read until the client shuts its write side; the answer (the hook's stdout, maybe
# empty) is written back and the connection closed.
SERVER = """import sys
sys.path.insert(0, sys.argv[1])
import socket
from clavain import hooks
import clavain.hooks.pre_tool_use  # what a resident process keeps warm
from clavain.guards import budget, gate  # noqa: F401
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(sys.argv[2])
server.listen(16)
sys.stdout.write("ready\\n")
sys.stdout.flush()
while True:
    conn, _ = server.accept()
    with conn:
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
        text, _ok = hooks.run("PreToolUse", b"".join(chunks))
        if text:
            conn.sendall(text.encode("utf-8"))
"""

# The client with the `socket` module (it imports enum, selectors and more: measured apart).
CLIENT_SOCKET = """import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
s.sendall(sys.stdin.buffer.read())
s.shutdown(socket.SHUT_WR)
out = b""
while chunk := s.recv(65536):
    out += chunk
sys.stdout.buffer.write(out)
sys.stdout.flush()
os._exit(0)
"""

# The same with the C module alone and raw fds: the least a Python client can import.
CLIENT_LEAN = """import _socket, os, sys
s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
s.connect(sys.argv[1])
data = b""
while chunk := os.read(0, 65536):
    data += chunk
s.sendall(data)
s.shutdown(_socket.SHUT_WR)
out = b""
while chunk := s.recv(65536):
    out += chunk
while out:
    out = out[os.write(1, out):]
os._exit(0)
"""

# The launcher hop: pick the interpreter as bin/clavain-hook does, then exec the lean client.
LAUNCH_CLIENT = """#!/usr/bin/env bash
CLAVAIN_ROOT={root}
. "$CLAVAIN_ROOT/lib/clavain/launcher.sh" || exit 0
exec "$CLAVAIN_PY" -I -S -c {client} {socket} || exit 0
"""


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def start_server(python: str, sock: Path, env: dict[str, str], cwd: Path) -> subprocess.Popen:
    """The resident process, ready to accept (its start is not timed)."""
    proc = subprocess.Popen([python, "-I", "-S", "-c", SERVER, str(REPO / "lib"), str(sock)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=cwd)
    line = proc.stdout.readline() if proc.stdout else ""
    if line.strip() != "ready":
        proc.kill()
        _, err = proc.communicate(timeout=10)
        raise RuntimeError(f"resident server did not start: {err.strip()[-400:]}")
    return proc


def recorded(database: Path, sessions: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Per row name: the calls the gate recorded for its session, their decisions, hook_ms."""
    conn = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        found = {}
        for name, session in sessions.items():
            rows = conn.execute("SELECT decision, hook_ms FROM budget_calls WHERE session_id = ? "
                                "ORDER BY id", (session,)).fetchall()
            found[name] = {"calls": len(rows), "decisions": [r[0] for r in rows],
                           "hook_ms_p50": round(percentile([r[1] or 0.0 for r in rows], 50), 2)
                           if rows else None}
        return found
    finally:
        conn.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print rows as JSON")
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="clavain-resident-"))
    server = None
    try:
        project, home, data, transcript = make_bench_project(work)
        ctx = {"project": str(project), "transcript": str(transcript), "agent_transcript": ""}
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
               "LANG": os.environ.get("LANG", "C.UTF-8"),
               "CLAUDE_PLUGIN_ROOT": str(REPO), "CLAUDE_PLUGIN_DATA": str(data),
               "CLAUDE_PROJECT_DIR": str(project)}
        python = make_ready_venv(data)
        sock = work / "gate.sock"
        launch = work / "launch-client.sh"
        launch.write_text(LAUNCH_CLIENT.format(root=_quote(str(REPO)), client=_quote(CLIENT_LEAN),
                                               socket=_quote(str(sock))), encoding="utf-8")

        def body(n: int) -> str:
            data = payload("PreToolUse", "Bash", ctx)
            data["tool_input"] = {"command": "ls", "description": "List files"}
            data["session_id"] = f"5e5510n0-probe-4000-8000-{n:012d}"
            return json.dumps(data)

        def case(name: str, argv: list[str], stdin: str = "") -> dict[str, Any]:
            return {"name": name, "argv": argv, "stdin": stdin, "env": env, "cwd": str(project)}

        cases = [
            case("bare interpreter (-I -S -c pass)", [python, "-I", "-S", "-c", "pass"]),
            case("imports only: _socket, os, sys",
                 [python, "-I", "-S", "-c", "import _socket, os, sys"]),
            case("imports only: socket, os, sys",
                 [python, "-I", "-S", "-c", "import socket, os, sys"]),
            case("PreToolUse today (bash bin/clavain-hook)",
                 ["bash", str(REPO / "bin" / "clavain-hook"), "PreToolUse"], body(1)),
            case("resident + python client (socket)",
                 [python, "-I", "-S", "-c", CLIENT_SOCKET, str(sock)], body(2)),
            case("resident + python client (_socket)",
                 [python, "-I", "-S", "-c", CLIENT_LEAN, str(sock)], body(3)),
            case("resident + bash launcher + _socket client", ["bash", str(launch)], body(4)),
        ]
        notes = []
        socat = shutil.which("socat")
        if socat:
            cases.append(case("resident + socat client (no python)",
                              [socat, "-", f"UNIX-CONNECT:{sock}"], body(5)))
            # The socket's path is not known to hooks.json: a bash hop would find it.
            hop = work / "launch-socat.sh"
            hop.write_text(f"exec {_quote(socat)} - {_quote('UNIX-CONNECT:' + str(sock))}\n",
                           encoding="utf-8")
            cases.append(case("resident + bash + socat client", ["bash", str(hop)], body(6)))
        else:
            notes.append("socat not installed: the no-Python client row is skipped")
        sessions = {c["name"]: json.loads(c["stdin"])["session_id"] for c in cases if c["stdin"]}

        server = start_server(python, sock, env, project)
        hooks_log = project / ".clavain" / "logs" / "hooks.log"
        time_interleaved(cases, args.runs, args.warmup)
        if server.poll() is not None:
            notes.append(f"resident server exited early with {server.returncode}")
        if hooks_log.exists():
            tail = hooks_log.read_text(encoding="utf-8").splitlines()[-1:]
            last = tail[0][:160] if tail else ""
            notes.append(f"hooks.log has lines (a failure somewhere): {last}")
        work_done = recorded(project / ".clavain" / "state.sqlite", sessions)
        today = work_done[cases[3]["name"]]["decisions"]
        for name, facts in work_done.items():
            facts["same_decisions_as_today"] = facts["decisions"] == today
            expected = args.runs + args.warmup
            if facts["calls"] != expected:
                notes.append(f"{name}: {facts['calls']} calls recorded, {expected} expected")

        rows = [{"name": c["name"], "runs": len(c["samples"]),
                 "p50_ms": round(percentile(c["samples"], 50), 2),
                 "p95_ms": round(percentile(c["samples"], 95), 2),
                 "min_ms": round(min(c["samples"]), 2),
                 "failures": sum(1 for code in c["codes"] if code != 0),
                 "stderr": c["stderr"].splitlines()[-1][:160] if c["stderr"] else ""}
                for c in cases]
        bare_ms = percentile(cases[0]["samples"], 50)
        for row, c in zip(rows, cases, strict=True):
            row["ratio_to_bare"] = round(percentile(c["samples"], 50) / bare_ms, 2)
    finally:
        if server is not None and server.poll() is None:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
        shutil.rmtree(work, ignore_errors=True)

    if args.json:
        print(json.dumps({"python": python, "runs": args.runs, "warmup": args.warmup,
                          "baseline": rows[0]["name"], "rows": rows, "recorded": work_done,
                          "notes": notes}, indent=2))
        return 0
    headers = ["row", "runs", "p50 ms", "p95 ms", "min ms", "x bare", "failed"]
    table = [[r["name"], str(r["runs"]), f"{r['p50_ms']:.2f}", f"{r['p95_ms']:.2f}",
              f"{r['min_ms']:.2f}", f"{r['ratio_to_bare']:.2f}", str(r["failures"])]
             for r in rows]
    widths = [max(len(h), *(len(row[i]) for row in table)) for i, h in enumerate(headers)]
    print(f"python: {python} (ready plugin venv)  runs: {args.runs} (+{args.warmup} warm-up), "
          f"every row once per round  cpus: {os.cpu_count()}")
    print(f"ratios against the first row: {rows[0]['p50_ms']:.2f} ms on this machine "
          "(issue 37 target for PreToolUse: <= 1.50)")
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for row in table:
        print("  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                        for i, (cell, w) in enumerate(zip(row, widths, strict=True))))
    print("recorded in .clavain/state.sqlite (budget_calls), per row's session:")
    for name, facts in work_done.items():
        print(f"  {name}: {facts['calls']} calls, gate's hook_ms p50 {facts['hook_ms_p50']}, "
              f"decisions {'same as' if facts['same_decisions_as_today'] else 'DIFFER from'} "
              f"today's hook ({','.join(sorted(set(facts['decisions'])))})")
    for r in rows:
        if r["stderr"]:
            print(f"note: {r['name']}: stderr: {r['stderr']}")
    for note in notes:
        print(f"note: {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
