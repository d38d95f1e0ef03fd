"""What a complexity-2 sprint costs the model in tokens, measured on the real `claude` binary and
counted with `ctok` (an offline reconstruction of Claude's tokenizer).

Runs `/clavain:sprint add a --verbose flag to the export command` (the classifier scores it 2)
against the scripted model on 127.0.0.1 in a small project with an `export` command, and walks
the whole route as the model would: plan, execute (an executor agent), test, quality-gates (one
reviewer per lens), resolve, ship (commit, integrate, final-verify). The route costs what the
model reads for the sprint:

- idle: what the plugin adds to every session (the first request of a session given the bare
  request, with the plugin and without; `benchmarks/context_cost.py` breaks it down);
- the entry: the first request of the sprint session against that of the session with the
  plugin given the bare request: the command body and the `sprint start` output;
- every guide, as the Read tool delivers it (read where a `sprint start` or `sprint done` line
  names it, each guide once; a guide named by its folder "in the skills folder above" is read
  beside the first guide, as a model would);
- what each `clavain sprint done STEP` prints.

`--installed` runs the plugin from a copy at `~/.claude/plugins/cache/clavain/clavain/<version>/`
of the benchmark's temporary home, as `claude plugin install` lays it out: the guides' paths the
model reads are that long.

Everything else the CLI printed on the way (claims, packets, verify results) is shown beside the
total, not in it: it is the work's, not the route's.

    python benchmarks/sprint_tokens.py [--json]
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "lib")]

from benchmarks.context_cost import CTOK_VERSION, count_tokens  # noqa: E402
from tests.e2e.conftest import ClaudeRunner  # noqa: E402
from tests.e2e.scripted_model import (  # noqa: E402
    ScriptedModel,
    agent,
    all_text,
    assistant_turns,
    bash,
    is_subagent,
    request_text,
    text,
    tool_results,
    tool_use,
    user_texts,
)

from clavain.claude_bin import find_claude  # noqa: E402

REQUEST = "add a --verbose flag to the export command"
TARGET = 2000
RUN = "s1"
CLAIM = f"clavain graph next --claim --run-id {RUN} --json"
EXECUTOR_BODY = "You change code for one job and prove it."
REVIEWER_BODY = "You review through exactly one lens."
GUIDE = re.compile(r"(/\S+/skills/[\w-]+/(?:SKILL|references/[\w-]+)\.md)")
SHORT_GUIDE = re.compile(r"\(guide: ([\w-]+)/SKILL\.md in the skills folder above\)")

APP = '''import argparse
import difflib
import json

ROWS = [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]


def main(argv=None):
    parser = argparse.ArgumentParser(prog="tool")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("export", help="print the rows as JSON")
    args = parser.parse_args(argv)
    if args.command == "export":
        print(json.dumps(ROWS))


if __name__ == "__main__":
    main()
'''
APP_VERBOSE = APP.replace(
    '    commands.add_parser("export", help="print the rows as JSON")\n',
    '    export = commands.add_parser("export", help="print the rows as JSON")\n'
    '    export.add_argument("--verbose", action="store_true", help="say what is exported")\n'
).replace('        print(json.dumps(ROWS))\n',
          '        if args.verbose:\n            print(f"exporting {len(ROWS)} rows")\n'
          '        print(json.dumps(ROWS))\n')
PLAN = """mkdir -p docs/plans && cat > docs/plans/verbose.md <<'PLAN'
# Plan: --verbose for export

`tool export --verbose` says how many rows it exports before the JSON; without the flag the
output is unchanged.

Acceptance: `export --verbose` prints `exporting 2 rows` then the rows; `export` prints the rows.

```json
{"nodes": [{"id": "task-export-verbose", "type": "task", "title": "--verbose for export",
  "ownership": ["src/**"],
  "verify": ["python3 src/tool.py export --verbose | grep -q 'exporting 2 rows'",
             "python3 src/tool.py export | head -1 | grep -q '^\\\\['"],
  "acceptance": ["export --verbose names the row count", "export alone is unchanged"]}]}
```
PLAN
"""
EXECUTOR_ANSWER = """Added --verbose to export; both verify commands pass.

<result>{"status": "success", "summary": "export --verbose names the row count"}</result>

TYPE: implementation
STATUS: COMPLETE
FILES_CHANGED: [src/tool.py]
SUMMARY: executor-done export --verbose
"""


def _verdict(lens: str) -> str:
    return (f"Read src/tool.py.\n\nTYPE: verdict\nSTATUS: CLEAN\nFINDINGS_COUNT: 0\n"
            f"SUMMARY: {lens}-ok the flag does what the plan says\n")


Ctx = dict[str, Any]
Maker = Callable[[Ctx], "list[dict[str, Any]] | None"]


class Route:
    """The main conversation, one step's tool calls per turn, in order. A maker returns the
    blocks of its turn, [] to be skipped (a guide read before), or None for not yet (a subagent
    has not reported: the turn answers "waiting"). Each tool result is kept with its label."""

    def __init__(self, steps: list[tuple[str, Maker]]):
        self.steps = steps
        self.index = 0
        self.pending: tuple[str, list[str]] | None = None
        self.results: list[tuple[str, str, bool]] = []  # (label, text, is_error)
        self.read: list[str] = []  # guides, in the order they were read
        self.lock = threading.Lock()

    def turn(self, request: dict[str, Any]) -> list[dict[str, Any]]:
        with self.lock:
            if self.pending is not None:
                label, ids = self.pending
                got = {r.tool_use_id: r for r in tool_results(request)}
                if not all(i in got for i in ids):
                    return [text("waiting")]
                self.results += [(label, got[i].content, got[i].is_error) for i in ids]
                self.pending = None
            while self.index < len(self.steps):
                label, make = self.steps[self.index]
                blocks = make({"results": self.results, "seen": all_text(request)})
                if blocks is None:
                    return [text("waiting")]
                self.index += 1
                if blocks:
                    self.pending = (label, [b["id"] for b in blocks if b["type"] == "tool_use"])
                    return blocks
            return [text("Shipped.")]

    def last(self, label: str) -> str:
        return next(out for name, out, _ in reversed(self.results) if name == label)

    def guide_read(self, after: str) -> Maker:
        """Read the guide the latest output of `after` names, unless it was read already."""
        def make(ctx: Ctx) -> list[dict[str, Any]]:
            source = self.last(after) if after != "entry" else ctx["entry"]
            line = source.split("Next:")[-1]
            found = GUIDE.search(line)
            named = SHORT_GUIDE.search(line)
            if found:
                path = found[1]
            elif named and self.read:  # as a model does: beside the guide it read first
                path = str(Path(self.read[0]).parents[1] / named[1] / "SKILL.md")
            else:
                return []
            if path in self.read:
                return []
            self.read.append(path)
            return [tool_use("Read", {"file_path": path})]
        return make


def _run(command: str, description: str = "Run a command") -> Maker:
    return lambda ctx: [bash(command, description)]


def _after(markers: tuple[str, ...], make: Maker) -> Maker:
    return lambda ctx: make(ctx) if all(m in ctx["seen"] for m in markers) else None


def route_steps(route: Route, entry: list[str]) -> list[tuple[str, Maker]]:
    def done(step: str, extra: str = "") -> Maker:
        return _run(f"clavain sprint done {step}{extra}", f"Record step {step}")

    def guide(after: str) -> Maker:
        make = route.guide_read(after)
        return lambda ctx: make({**ctx, "entry": entry[0]})

    lenses = ("quality", "correctness", "goal")
    wait_task = ("for i in $(seq 300); do clavain graph ls --status done --json | grep -q "
                 "'\"id\": \"task-export-verbose\"' && break; sleep 0.2; done; ")
    git = "git -c user.name=bench -c user.email=bench@example.invalid"
    return [
        ("guide", guide("entry")),
        ("work", _run(PLAN, "Write the plan")),
        ("sprint done", done("plan", " --plan docs/plans/verbose.md")),
        ("guide", guide("sprint done")),
        ("work", _run(CLAIM, "Claim the next node")),
        ("packet", _run("clavain graph packet task-export-verbose --thin", "Task packet")),
        ("work", lambda ctx: [agent("clavain:executor", route.last("packet"),
                                    "Execute task-export-verbose")]),
        ("work", _after(("executor-done",), _run(wait_task + CLAIM, "Claim the next node"))),
        ("work", _run(f"clavain verify verify-task-export-verbose --run-id {RUN}", "Verify")),
        ("sprint done", done("execute")),
        ("guide", guide("sprint done")),
        ("work", _run("python3 src/tool.py export --verbose && python3 src/tool.py export",
                      "Run the checks")),
        ("sprint done", done("test")),
        ("guide", guide("sprint done")),
        ("work", _run("clavain sprint status --json", "Sprint status")),
        ("work", lambda ctx: [agent("clavain:reviewer", f"Lens: {lens}\nThe request: "
                                    f"\"{REQUEST}\". The change: git diff HEAD, src/tool.py; "
                                    "the plan: docs/plans/verbose.md.", f"Review: {lens}")
                              for lens in lenses]),
        ("sprint done", _after(tuple(f"{lens}-ok" for lens in lenses), done("quality-gates"))),
        ("work", _run("clavain verdicts summary", "Verdicts")),
        ("guide", guide("sprint done")),
        ("sprint done", done("resolve")),
        ("guide", guide("sprint done")),
        ("work", _run("git status --short && git diff --stat", "What changed")),
        ("work", _run("python3 src/tool.py export --verbose", "Tests, one last time")),
        ("work", _run(f"{git} add src docs && {git} commit -qm 'export: --verbose names the "
                      "row count'", "Commit")),
        ("work", _run(CLAIM, "Claim the next node")),
        ("work", _run("echo '{\"status\":\"success\",\"summary\":\"one tree\"}' | clavain graph "
                      f"apply integrate --run-id {RUN} --result -", "Integrate")),
        ("work", _run(CLAIM, "Claim the next node")),
        ("work", _run(f"clavain verify final-verify --run-id {RUN}", "Final verify")),
        ("sprint done", done("ship")),
        ("work", _run("clavain sprint summary", "Summary")),
    ]


def _project(runner: ClaudeRunner) -> None:
    src = runner.project / "src"
    src.mkdir()
    (src / "tool.py").write_text(APP)
    env = {"PATH": "/usr/bin:/bin", "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "b@x",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "b@x"}
    for argv in (["git", "add", "-A"], ["git", "commit", "-qm", "tool"]):
        subprocess.run(argv, cwd=runner.project, env=env, check=True, capture_output=True)


def _lens_of(request: dict[str, Any]) -> str:
    found = re.search(r"^Lens: ([\w-]+)", "\n".join(user_texts(request)), re.M)
    return found[1] if found else "?"


def installed_copy(home: Path) -> Path:
    """The plugin's files where `claude plugin install` puts them
    (`~/.claude/plugins/cache/<marketplace>/<plugin>/<version>/`): the guides' paths the model
    reads are that long."""
    version = json.loads((REPO / ".claude-plugin" / "plugin.json").read_text())["version"]
    folder = home / ".claude" / "plugins" / "cache" / "clavain" / "clavain" / version
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=REPO, capture_output=True, check=True)
    for name in filter(None, listed.stdout.decode().split("\0")):
        source, copy = REPO / name, folder / name
        if source.is_file():
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy)
    return folder


def measure(binary: Path, *, installed: bool = False) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="clavain-sprint-tokens-") as tmp, \
            ScriptedModel() as model:
        runner = ClaudeRunner(binary, model, Path(tmp))
        _project(runner)
        plugin_dir = installed_copy(runner.home) if installed else REPO
        tools = ("Bash", "Read", "Edit", "Write", "Agent")
        host, bare = (runner.run(REQUEST, lambda request: [text("ok")], allowed_tools=tools,
                                 plugin_dir=plugin) for plugin in (None, plugin_dir))
        if not host.requests or not bare.requests:
            raise SystemExit(f"no request reached the scripted model\n{host}\n{bare}")
        entry: list[str] = [""]
        route = Route([])
        route.steps = route_steps(route, entry)

        def script(request: dict[str, Any]):
            if is_subagent(request, EXECUTOR_BODY):
                if assistant_turns(request) == 0:
                    return [bash(f"cat > src/tool.py <<'PY'\n{APP_VERBOSE}PY", "Add --verbose")]
                return [text(EXECUTOR_ANSWER)]
            if is_subagent(request, REVIEWER_BODY):
                return [text(_verdict(_lens_of(request)))]
            if not entry[0]:
                entry[0] = "\n".join(user_texts(request))
            return route.turn(request)

        run = runner.run(f"/clavain:sprint {REQUEST}", script, allowed_tools=tools,
                         plugin_dir=plugin_dir, timeout=900)
        if not run.requests:
            raise SystemExit(f"no request reached the scripted model\n{run}")
        archived = list((runner.project / ".clavain" / "runs").glob("sprint-*/checkpoint.json"))
        checkpoint = json.loads(archived[0].read_text()) if archived else {}
        refused = [label for label, _, err in route.results if err and label != "work"]
        if checkpoint.get("outcome") != "shipped" or checkpoint.get("waivers") or refused:
            shown = "\n".join(f"--- {label} (error={err}):\n{out[-800:]}"
                              for label, out, err in route.results)
            raise SystemExit(f"the sprint did not ship cleanly\n{shown}\n{run}")
        firsts = [request_text(r.requests[0]) for r in (host, bare, run)]
        route_results = list(route.results)
    counts = count_tokens([*firsts, *(out for _, out, _ in route_results)])
    parts: dict[str, list[int]] = {"guide": [], "sprint done": [], "work": []}
    for (label, _, _), tokens in zip(route_results, counts[3:], strict=True):
        parts["work" if label == "packet" else label].append(tokens)
    idle, entry_tokens = counts[1] - counts[0], counts[2] - counts[1]
    total = idle + entry_tokens + sum(parts["guide"]) + sum(parts["sprint done"])
    return {"request": REQUEST, "complexity": checkpoint["complexity"],
            "route": checkpoint["route"], "idle_tokens": idle, "entry_tokens": entry_tokens,
            "guides": dict(zip(route.read, parts["guide"], strict=True)),
            "sprint_done": dict(zip(checkpoint["route"], parts["sprint done"], strict=True)),
            "work_tokens": sum(parts["work"]), "total": total, "target": TARGET,
            "entry_text": "\n".join(line[2:] for line in difflib.ndiff(
                firsts[1].splitlines(), firsts[2].splitlines()) if line.startswith("+ ")),
            "texts": [(label, out) for label, out, _ in route_results if label != "work"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--show", action="store_true",
                        help="also print what the model read: the entry's first user message, "
                             "each guide and each `sprint done` output")
    parser.add_argument("--installed", action="store_true",
                        help="run the plugin from a copy where `claude plugin install` puts it "
                             "(longer guide paths) instead of this checkout")
    args = parser.parse_args(argv)
    binary = find_claude()
    if binary is None:
        raise SystemExit("no claude binary (set CLAVAIN_CLAUDE_BIN)")
    report = measure(binary, installed=args.installed)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"/clavain:sprint {report['request']} — complexity {report['complexity']}, route "
          f"{' → '.join(report['route'])} (ctok {CTOK_VERSION})")
    print(f"  idle (what every session pays)         {report['idle_tokens']:6}")
    print(f"  entry (command body + `sprint start`)  {report['entry_tokens']:6}")
    for path, tokens in report["guides"].items():
        print(f"  guide {Path(path).parent.name + '/' + Path(path).name:<33}{tokens:6}")
    for step, tokens in report["sprint_done"].items():
        print(f"  `sprint done {step}`{'':<{24 - len(step)}}{tokens:6}")
    print(f"  total{'':<34}{report['total']:6}  (target ≤ {TARGET:,})")
    print(f"  not in the total: the work's own CLI output (claims, packet, verify, status, "
          f"summary) {report['work_tokens']}")
    if args.show:
        print("--- entry (the lines it adds)\n" + report["entry_text"])
        for label, out in report["texts"]:
            print(f"--- {label}\n{out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
