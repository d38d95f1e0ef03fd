"""What the whole HTML page costs at 100, 1,000 and 10,000 nodes.

Two figures per size:
- render: `page.html.render` of a page whose graph is `benchmarks/page_graph.sprint_graph`
  (statuses mixed as in a sprint under way), median of `--repeats`; and the page's size (the
  picture folds beyond 300 nodes, the table of every node does not);
- command: `clavain report --html FILE --graph big` through the real launcher, in a project
  whose database holds that many imported nodes (all open), median of `--repeats`: reading the
  database, drawing and writing the file.

    python benchmarks/page_html.py [--sizes 100 1000 10000] [--repeats 3] [--json]
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

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "lib")]

from benchmarks.page_graph import sprint_graph  # noqa: E402

from clavain.page.html import render  # noqa: E402


def _page(nodes: list[dict]) -> dict:
    return {"subject": {"kind": "graph", "id": "big"}, "project": "/p", "state_root": "/p/.clavain",
            "generated_at": "2026-11-27T00:00:00.000Z", "graph": {"id": "big", "nodes": nodes},
            "runs": [], "loops": [], "sprint": None, "verdicts": [], "budget": None,
            "problems": [], "live": False}


def render_figures(size: int, repeats: int) -> dict:
    page = _page(sprint_graph(size))
    times, text = [], ""
    for _ in range(repeats):
        started = time.perf_counter()
        text = render(page)
        times.append(time.perf_counter() - started)
    return {"render_ms": round(1000 * statistics.median(times), 1),
            "page_kb": round(len(text.encode()) / 1024)}


def command_figures(size: int, repeats: int) -> dict:
    clavain = str(REPO / "bin" / "clavain")
    with tempfile.TemporaryDirectory() as folder:
        project = Path(folder) / "p"
        project.mkdir()
        env = dict(os.environ, CLAVAIN_PROJECT_DIR=str(project), CLAVAIN_PYTHON=sys.executable,
                   CLAVAIN_GRAPH="big")
        subprocess.run(["git", "init", "-q", str(project)], check=True)
        subprocess.run([clavain, "init"], env=env, cwd=project, check=True, capture_output=True)
        nodes = [{"id": node["id"], "type": node["type"], "title": node["title"],
                  "dependsOn": node["depends_on"]} for node in sprint_graph(size)
                 if node["type"] in ("task", "verify")]
        plan = project / "plan.json"
        plan.write_text(json.dumps({"nodes": [
            {**node, "dependsOn": [d for d in node["dependsOn"] if d != "plan"]}
            for node in nodes]}))
        subprocess.run([clavain, "graph", "import", str(plan)], env=env, cwd=project,
                       check=True, capture_output=True)
        target = Path(folder) / "page.html"
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            subprocess.run([clavain, "report", "--html", str(target), "--graph", "big"],
                           env=env, cwd=project, check=True, capture_output=True)
            times.append(time.perf_counter() - started)
        return {"command_ms": round(1000 * statistics.median(times)),
                "imported_nodes": len(nodes), "command_page_kb": round(target.stat().st_size
                                                                       / 1024)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    rows = [{"nodes": size, **render_figures(size, args.repeats),
             **command_figures(size, args.repeats)} for size in args.sizes]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'nodes':>7} {'render':>10} {'page':>8}   {'command':>9} {'page':>8} (imported)")
    for row in rows:
        print(f"{row['nodes']:>7,} {row['render_ms']:>8.1f}ms {row['page_kb']:>6}KB   "
              f"{row['command_ms']:>7}ms {row['command_page_kb']:>6}KB "
              f"({row['imported_nodes']:,})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
