"""Always-on context the plugin adds to a session, measured on the real `claude` binary and
counted with `ctok` (an offline reconstruction of Claude's tokenizer).

Runs `claude -p hi` against the scripted model on 127.0.0.1 without the plugin and with
`--plugin-dir` this repo, and compares the first request the model receives: the whole
difference (the figure that counts), and the added lines by what added them — the SessionStart
context, the agent listing (`- clavain:<agent>: … (Tools: …)`), the skill and command listing,
each beside what SessionStart's cap estimates for it (the estimate must err high).
Two projects: an idle one, and one with an active sprint and a handoff note (what SessionStart
adds when there is something to act on).

`ctok` is a benchmark dependency, not a test extra: the script installs it on first use into
`~/.cache/clavain/ctok-venv` (it declares Python >= 3.12 but runs on 3.11:
`pip install --ignore-requires-python ctok`); counting needs no network.

    python benchmarks/context_cost.py [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "lib")]

from tests.e2e.conftest import ClaudeRunner  # noqa: E402
from tests.e2e.scripted_model import ScriptedModel, added_parts, request_text, text  # noqa: E402

from clavain.claude_bin import find_claude  # noqa: E402
from clavain.session.token_estimate import estimate_tokens  # noqa: E402

CTOK_VERSION = "4.7"
BUDGET = 400  # SessionStart's cap on what it adds (the busy project)
IDLE_TARGET = 120  # the listings every session pays (issue 26)
ANCHORS = {"mistakeknot/Clavain": 4192, "obra/superpowers": 2122}


def ctok_python() -> str:
    """The interpreter of a venv that has ctok, created on first use."""
    home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    venv = home / "clavain" / "ctok-venv"
    python = venv / "bin" / "python"
    if subprocess.run([str(python), "-c", "import ctok"], capture_output=True).returncode != 0 \
            if python.exists() else True:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet",
                        "--disable-pip-version-check", "--ignore-requires-python", "ctok"],
                       check=True)
    return str(python)


def count_tokens(texts: list[str]) -> list[int]:
    """ctok counts of `texts`, in one subprocess."""
    code = ("import json, sys, ctok; texts = json.load(sys.stdin); "
            f"print(json.dumps([ctok.token_count(t, version={CTOK_VERSION!r}) for t in texts]))")
    done = subprocess.run([ctok_python(), "-c", code], input=json.dumps(texts), text=True,
                          capture_output=True, check=True)
    return json.loads(done.stdout)


def first_request(runner: ClaudeRunner, plugin_dir: Path | None) -> dict[str, Any]:
    run = runner.run("hi", lambda request: [text("hello")], plugin_dir=plugin_dir,
                     allowed_tools=("Bash", "Read", "Agent", "Skill"))
    if not run.requests:
        raise SystemExit(f"no request reached the scripted model\n{run}")
    return run.requests[0]


def _make_busy(project: Path) -> None:
    """An active sprint and a handoff note: what SessionStart reports."""
    env = {**os.environ, "CLAVAIN_PROJECT_DIR": str(project), "CLAVAIN_PYTHON": sys.executable}
    subprocess.run([str(REPO / "bin" / "clavain"), "sprint", "start", "--complexity", "3",
                    "add caching to the product service"], env=env, check=True,
                   capture_output=True)
    handoff = project / ".clavain" / "scratch" / "handoff.md"
    handoff.parent.mkdir(parents=True, exist_ok=True)
    handoff.write_text("Caching: redis client wired in ProductService.get_by_id; TTL and "
                       "invalidation on update still to do. Tests in tests/test_cache.py "
                       "fail on purpose until then.\n")


def measure(binary: Path, busy: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="clavain-context-") as tmp, \
            ScriptedModel() as model:
        runner = ClaudeRunner(binary, model, Path(tmp))
        bare = request_text(first_request(runner, None))
        if busy:
            _make_busy(runner.project)
        with_plugin = request_text(first_request(runner, REPO))
    groups = added_parts(bare, with_plugin)
    names = list(groups)
    counts = count_tokens([bare, with_plugin, "", *(groups[n] for n in names)])
    overhead = counts[2]  # what ctok counts for an empty message
    rows = [{"part": name, "added_tokens": max(0, counts[3 + i] - overhead) if groups[name]
             else 0, "lines": groups[name].count("\n") + 1 if groups[name] else 0,
             "estimated_tokens": estimate_tokens(groups[name])}
            for i, name in enumerate(names)]
    return {"project": "active sprint + handoff" if busy else "idle", "rows": rows,
            "added_tokens": counts[1] - counts[0]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    binary = find_claude()
    if binary is None:
        raise SystemExit("no claude binary (set CLAVAIN_CLAUDE_BIN)")
    reports = [measure(binary, busy=False), measure(binary, busy=True)]
    if args.json:
        print(json.dumps({"budget": BUDGET, "idle_target": IDLE_TARGET, "reports": reports,
                          "anchors": ANCHORS}, indent=2))
        return 0
    for report in reports:
        print(f"{report['project']}: +{report['added_tokens']} tokens (ctok {CTOK_VERSION})")
        for row in report["rows"]:
            print(f"  {row['part']:<24} {row['lines']:>3} line(s)  {row['added_tokens']:+6}"
                  f"  (hook estimate {row['estimated_tokens']})")
    idle = reports[0]["added_tokens"]
    anchors = ", ".join(f"{name} +{tokens:,}" for name, tokens in ANCHORS.items())
    print(f"idle: +{idle} tokens (target ≤ {IDLE_TARGET}; {anchors}, measured the same way)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
