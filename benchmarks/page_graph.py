"""Drawing the workgraph picture of `clavain report --html` (`clavain.page.graph_svg.draw`) for
graphs of 100, 1,000 and 10,000 nodes shaped like a sprint's: a plan, chains of tasks (each
after the previous one, some after a task of another chain), a verify node per task, one
integrate after every verify and a final_verify; the early part done, eight tasks in
progress, the rest open, about 1 % failed and a few waiting for a person.

    .venv/bin/python benchmarks/page_graph.py [--sizes 100,1000,10000] [--repeats 5] [--json]
        [--max-width PX]

Prints, per size: the median wall-clock time of `draw` over `--repeats` runs, the SVG's size,
the boxes drawn (nodes shown one by one + groups), the groups, the layers, the lanes (virtual
points where long edges pass a line: `graph_place`), the edges sent down the side channel and
the picture's width (at most --max-width, the page's content width at 1,440 px by default; 0
draws without a width to fit: lines of up to 12 boxes, lanes without end). Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))

from clavain.page.graph_svg import MAX_WIDTH, draw

CHAIN = 12  # tasks per chain
WORKERS = 8  # nodes in progress at once


def sprint_graph(size: int, seed: int = 7) -> list[dict]:
    """`size` snapshot-shaped nodes (id, title, type, status, depends_on, parent_id)."""
    rng = random.Random(seed)
    tasks = max(1, (size - 3) // 2)
    nodes = [{"id": "plan", "title": "Plan the sprint", "type": "plan", "status": "done",
              "depends_on": [], "parent_id": None}]
    verifies = []
    for index in range(tasks):
        chain, step = divmod(index, CHAIN)
        if step == 0:
            done_until = int(CHAIN * rng.uniform(0.3, 0.9))
        status = "done" if step < done_until else "open"
        if step == done_until and chain < WORKERS:
            status = "in_progress"
        roll = rng.random()
        if roll < 0.01:
            status = "failed"
        elif roll < 0.013:
            status = "needs_human"
        deps = ["plan"] if step == 0 else [f"task-{chain}-{step - 1}"]
        if chain and step and rng.random() < 0.3:
            deps.append(f"task-{rng.randrange(chain)}-{rng.randrange(step)}")
        task_id = f"task-{chain}-{step}"
        nodes.append({"id": task_id, "title": f"Step {step} of part {chain}", "type": "task",
                      "status": status, "depends_on": deps, "parent_id": None})
        verified = "done" if status == "done" else "open"
        nodes.append({"id": f"verify-{task_id}", "title": f"Verify {task_id}", "type": "verify",
                      "status": verified, "depends_on": [task_id], "parent_id": None})
        verifies.append(f"verify-{task_id}")
    nodes.append({"id": "integrate", "title": "Integrate all verified tasks", "type": "integrate",
                  "status": "open", "depends_on": verifies, "parent_id": None})
    nodes.append({"id": "final-verify", "title": "Final verification", "type": "final_verify",
                  "status": "open", "depends_on": ["integrate"], "parent_id": None})
    if len(nodes) < size:  # an even size: one task nobody verifies (a docs change)
        nodes.append({"id": "task-docs", "title": "Update the docs", "type": "task",
                      "status": "open", "depends_on": ["plan"], "parent_id": None})
    return nodes


def measure(size: int, repeats: int, max_width: int | None = MAX_WIDTH) -> dict:
    nodes = sprint_graph(size)
    times, picture = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        picture = draw(nodes, max_width=max_width)
        times.append(time.perf_counter() - started)
    assert picture is not None
    return {"nodes": len(nodes), "edges": sum(len(n["depends_on"]) for n in nodes),
            "median_ms": round(statistics.median(times) * 1000, 1),
            "svg_kb": round(len(picture.svg.encode()) / 1024, 1),
            "boxes": picture.shown_nodes + picture.groups, "shown": picture.shown_nodes,
            "groups": picture.groups, "layers": picture.layers, "folded": picture.folded,
            "lanes": picture.lanes, "aside": picture.aside,
            "width_px": int(re.search(r'width="(\d+)"', picture.svg)[1])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="one JSON document instead of a table")
    parser.add_argument("--max-width", type=int, default=MAX_WIDTH,
                        help=f"the widest picture, px (default {MAX_WIDTH}; 0: no limit)")
    args = parser.parse_args()
    rows = [measure(int(size), args.repeats, args.max_width or None)
            for size in args.sizes.split(",")]
    if args.json:
        print(json.dumps({"repeats": args.repeats, "sizes": rows}, indent=2))
        return 0
    print(f"{'nodes':>7} {'edges':>7} {'draw ms':>8} {'SVG KB':>7} {'boxes':>6} {'shown':>6} "
          f"{'groups':>6} {'layers':>6} {'lanes':>6} {'aside':>6} {'width':>6}")
    for row in rows:
        print(f"{row['nodes']:>7} {row['edges']:>7} {row['median_ms']:>8} {row['svg_kb']:>7} "
              f"{row['boxes']:>6} {row['shown']:>6} {row['groups']:>6} {row['layers']:>6} "
              f"{row['lanes']:>6} {row['aside']:>6} {row['width_px']:>6}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
