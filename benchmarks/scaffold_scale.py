"""`clavain graph scaffold` against `clavain graph import` of the same graph, at 1k, 10k and 40k
tasks: both run as whole processes (`bin/clavain`) in a fresh git project, one after the
other, so the ratio scaffold / import is taken on one machine in one run. The graph is shaped
like a backlog: chains of ten tasks, each after the previous one, each with its verify command
and one owned file.

    .venv/bin/python benchmarks/scaffold_scale.py [--sizes 1000,10000,40000] [--json]

Scaffold adds a verify node per task, the integrate and the final gate, so it writes about
twice what import does: linear means a steady ratio as the graph grows. Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CLAVAIN = REPO / "bin" / "clavain"


def _graph(tasks: int) -> dict:
    return {"nodes": [{"id": f"t{n}", "type": "task", "title": f"task {n}",
                       "verify": ["pytest -q"], "ownership": [f"src/f{n}.py"],
                       "dependsOn": [f"t{n - 1}"] if n % 10 else []} for n in range(tasks)]}


def _timed(args: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run([str(CLAVAIN), *args], cwd=cwd, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def measure(tasks: int) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        project = Path(folder) / "project"
        project.mkdir()
        subprocess.run(["git", "init", "-q"], cwd=project, check=True)
        plan = Path(folder) / "graph.json"
        plan.write_text(json.dumps(_graph(tasks)), encoding="utf-8")
        imported = _timed(["graph", "import", str(plan)], project)
        scaffolded = _timed(["graph", "scaffold"], project)
    return {"tasks": tasks, "import_s": round(imported, 3), "scaffold_s": round(scaffolded, 3),
            "ratio": round(scaffolded / imported, 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,40000")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = []
    for size in (int(part) for part in args.sizes.split(",")):
        rows.append(measure(size))
        if not args.json:
            row = rows[-1]
            print(f"{row['tasks']:>7,} tasks  import {row['import_s']:7.2f} s  scaffold "
                  f"{row['scaffold_s']:7.2f} s  scaffold/import {row['ratio']:.2f}x", flush=True)
    if args.json:
        print(json.dumps({"python": sys.version.split()[0], "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
