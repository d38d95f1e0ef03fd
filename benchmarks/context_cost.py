"""Always-on context the plugin adds to every session, measured on the real `claude` binary.

Runs `claude -p hi` twice against the scripted model on 127.0.0.1 — without the plugin and with
`--plugin-dir` this repo — and compares the first request the model receives: system prompt,
tool definitions (the Agent tool lists every agent's description), and messages (SessionStart
context, the skill/command listing). Tokens are estimated at 4 characters a token.

    python benchmarks/context_cost.py [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "lib")]

from tests.e2e.conftest import ClaudeRunner  # noqa: E402
from tests.e2e.scripted_model import ScriptedModel, text  # noqa: E402

from clavain.claude_bin import find_claude  # noqa: E402

CHARS_PER_TOKEN = 4


def parts(request: dict[str, Any]) -> dict[str, int]:
    """Characters of each part of a Messages API request that the model reads."""
    return {
        "system": len(json.dumps(request.get("system", ""), ensure_ascii=False)),
        "tools": len(json.dumps(request.get("tools", []), ensure_ascii=False)),
        "messages": len(json.dumps(request.get("messages", []), ensure_ascii=False)),
    }


def first_request(runner: ClaudeRunner, plugin_dir: Path | None) -> dict[str, Any]:
    run = runner.run("hi", lambda request: [text("hello")], plugin_dir=plugin_dir,
                     allowed_tools=("Bash", "Read", "Agent"))
    if not run.requests:
        raise SystemExit(f"no request reached the scripted model\n{run}")
    return run.requests[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    binary = find_claude()
    if binary is None:
        raise SystemExit("no claude binary (set CLAVAIN_CLAUDE_BIN)")
    with tempfile.TemporaryDirectory(prefix="clavain-context-") as tmp, ScriptedModel() as model:
        runner = ClaudeRunner(binary, model, Path(tmp))
        bare = parts(first_request(runner, None))
        with_plugin = parts(first_request(runner, REPO))
    rows = [{"part": name, "chars_without": bare[name], "chars_with": with_plugin[name],
             "added_tokens": round((with_plugin[name] - bare[name]) / CHARS_PER_TOKEN)}
            for name in bare]
    total = sum(row["added_tokens"] for row in rows)
    if args.json:
        print(json.dumps({"rows": rows, "added_tokens": total}, indent=2))
        return 0
    print(f"{'part':<10} {'chars w/o':>10} {'chars with':>11} {'+tokens':>8}")
    for row in rows:
        print(f"{row['part']:<10} {row['chars_without']:>10} {row['chars_with']:>11} "
              f"{row['added_tokens']:>8}")
    print(f"always-on context added by the plugin: ~{total} tokens "
          f"(estimated at {CHARS_PER_TOKEN} chars/token)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
