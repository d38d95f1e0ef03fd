"""The size of one loop iteration's prompt (`clavain iterate`), counted with `ctok`, for a
project with 1, 5 and 20 actionable items (failing checks with a few lines of output each,
runnable tasks), next to the estimate `clavain iterate --json` prints (which errs high).

    python benchmarks/loop_prompt.py [--json]

ctok comes from the benchmark venv `context_cost.py` sets up (`~/.cache/clavain/ctok-venv`).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "lib"))

from benchmarks.context_cost import count_tokens  # noqa: E402

from clavain.loop.iterate import iterate  # noqa: E402
from clavain.paths import StatePaths  # noqa: E402
from clavain.store.db import connect  # noqa: E402
from clavain.workgraph.edits import add_nodes  # noqa: E402
from clavain.workgraph.graphs import DEFAULT_GRAPH, Graph  # noqa: E402

SIZES = (1, 5, 20)


def project_with(root: Path, items: int) -> StatePaths:
    """Half failing checks (with realistic output), half runnable tasks."""
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    state = StatePaths(root / ".clavain", project=root)
    state.root.mkdir()
    checks = [{"id": f"check-{n}", "cmd": f"printf 'FAILED test_{n}\\nAssertionError: expected "
               f"{n}\\n'; exit 1", "priority": "high", "description": f"unit tests part {n}"}
              for n in range((items + 1) // 2)]
    (state.root / "config.json").write_text(json.dumps({"checks": checks}))
    conn = connect(state.db)
    add_nodes(Graph(conn, DEFAULT_GRAPH, state), [
        {"id": f"task-{n}", "type": "task", "title": f"Implement part {n} of the feature",
         "verify": [f"pytest -q tests/test_part_{n}.py"], "ownership": [f"src/part_{n}/**"]}
        for n in range(items // 2)])
    conn.close()
    return state


def measure() -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        prompts = []
        for items in SIZES:
            state = project_with(Path(tmp) / f"p{items}", items)
            found = iterate(state, graph_id=DEFAULT_GRAPH, automation="auto")
            assert len(found["items"]) == items, found["items"]
            prompts.append(found)
        counts = count_tokens([found["prompt"] for found in prompts])
    for items, found, tokens in zip(SIZES, prompts, counts, strict=True):
        rows.append({"items": items, "ctok_tokens": tokens,
                     "estimate": found["prompt_tokens_estimate"],
                     "characters": len(found["prompt"])})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args()
    rows = measure()
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'items':>5}  {'ctok tokens':>11}  {'estimate':>8}  {'characters':>10}")
    for row in rows:
        print(f"{row['items']:>5}  {row['ctok_tokens']:>11,}  {row['estimate']:>8,}  "
              f"{row['characters']:>10,}")


if __name__ == "__main__":
    main()
