"""The built-in `shell` runner: does a node's work by running its own `commands` (no LLM) and
prints the runner result. Started by the supervisor like any runner, with a JSON request on
stdin: `{"commands": [...], "log_dir": PATH, "state_root": PATH, "timeout": SECONDS}`.

Each command runs with `bash -c` in its own process group (`workgraph.shell`); SIGTERM kills the
running one and ends this runner, so stopping the runner's group stops the work too.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any


def result_for(commands: list[str], outcomes: list[Any], timeout: float) -> dict[str, Any]:
    from clavain.workgraph.verifier import log_tail

    if not commands:
        return {"status": "success", "summary": "no commands to run", "errors": []}
    failed = next((o for o in outcomes if not o.passed), None)
    if failed is None:
        return {"status": "success", "summary": f"all {len(commands)} commands passed",
                "errors": []}
    how = f"timed out after {timeout:g}s" if failed.timed_out else f"exited {failed.exit_code}"
    tail = log_tail(failed.log_path)
    error = f"`{failed.command}` {how} (log: {failed.log_path})"
    return {"status": "fail",
            "summary": f"command {failed.index} of {len(commands)} {how}: {failed.command}"[:2000],
            "errors": [f"{error}\n{tail}" if tail else error]}


def main() -> int:
    from clavain.workgraph.shell import Interrupted, SignalGuard, run_commands
    from clavain.workgraph.verifier import result_line

    request = json.loads(sys.stdin.read())
    commands = [str(c) for c in request.get("commands") or []]
    timeout = float(request["timeout"])
    with SignalGuard() as guard:
        guard.allow()
        try:
            outcomes = run_commands(commands, cwd=Path.cwd(), log_dir=Path(request["log_dir"]),
                                    timeout=timeout, env=dict(os.environ),
                                    state_root=Path(request["state_root"]), guard=guard)
        except Interrupted as exc:
            print(f"shell runner: {exc}", file=sys.stderr)
            return 143
        guard.hold()
    print(result_line(result_for(commands, outcomes, timeout)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
