"""How far past its dollar cap a headless run goes: `clavain run` on a 202-node plan with
`budgets.maxCostUsd: 12`, at 1, 4 and 8 workers, with a runner that honours its budget share
(stops at it, as `claude --max-budget-usd` does) and one that ignores it, on the reservation
rule (`supervisor.run_reserve`) and, beside it, the old rule (a node starts while the budget is
not yet spent; reservation and the stop at the cap switched off by monkeypatching
`supervise.admit` and `supervise.check_cap`). On the old rule no runner is told a share, so
"honours" and "ignores" behave alike there.

    .venv/bin/python benchmarks/budget_overshoot.py               # 3 cost draws per cell
    .venv/bin/python benchmarks/budget_overshoot.py --draws 1 --json

Each run is real: a git project, real SQLite, the supervisor in-process, every node a runner
process (tests/supervisor/kit.py COST_RUNNER) that spends a known, drawn cost ($0.05-0.60, one
node in eight a runaway of $1.50-4.00) and reports it in claude's JSON shape. The figure is the
run's ledger (measured + charged): the worst over the draws, against the cap. Asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "lib"))
sys.path.insert(0, str(REPO))

from tests.supervisor import kit  # noqa: E402

from clavain.supervisor import supervise  # noqa: E402

CAP = 12.0
NODES = 202
SLEEP = 0.15  # seconds of "work" per node: enough for workers to overlap


def draw_costs(seed: int) -> dict[str, float]:
    rng = random.Random(seed)
    return {f"task-{n:03d}": round(rng.uniform(1.5, 4.0) if rng.random() < 0.125
                                   else rng.uniform(0.05, 0.6), 4) for n in range(NODES)}


@contextlib.contextmanager
def old_rule(enabled: bool):
    """The rule before reservations: no share, a node starts while the budget is not spent."""
    if not enabled:
        yield
        return
    real = supervise.admit

    def no_reservation(reserve: Any, cfg: Any, node: Any, runner_override: Any, *,
                       idle: int, running: bool) -> tuple[Any, Any, Any]:
        from clavain.supervisor.routes import route_for

        return None, route_for(cfg, node, runner_override=runner_override), None

    real_cap = supervise.check_cap
    supervise.admit = no_reservation  # type: ignore[assignment]
    supervise.check_cap = lambda *_args: None  # type: ignore[assignment]
    try:
        yield
    finally:
        supervise.admit = real  # type: ignore[assignment]
        supervise.check_cap = real_cap  # type: ignore[assignment]


def one_run(folder: Path, *, workers: int, honour: bool, old: bool, seed: int
            ) -> dict[str, Any]:
    runner = kit.script(folder / "cost.py", kit.COST_RUNNER)
    costs = folder / "costs.json"
    costs.write_text(json.dumps(draw_costs(seed)))
    command = f"FAKE_HONOUR={int(honour)} FAKE_SLEEP={SLEEP} FAKE_COSTS={costs} {runner}"
    state = kit.make_project(folder / "p", {"runners": {"cost": {"command": command}},
                                            "budgets": {"maxCostUsd": CAP}})
    kit.add(state, kit.cost_tasks(NODES), scaffold=False)
    events: list[dict[str, Any]] = []
    began = time.monotonic()
    with old_rule(old):
        report = kit.run(state, events, runner="cost", workers=workers)
    spend = report["spend"] or {}
    return {"spent": float(spend.get("cost_usd") or report["metrics"]["cost_usd"]),
            "done": len(report["done"]), "status": report["status"],
            "stopped_at_cap": sum(1 for e in events if e["event"] == "finished"
                                  and "reached its cap" in str(e.get("summary"))),
            "seconds": round(time.monotonic() - began, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--draws", type=int, default=3, help="cost draws per cell")
    parser.add_argument("--workers", default="1,4,8")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = []
    for workers in [int(w) for w in args.workers.split(",")]:
        for honour in (True, False):
            for old in (False, True):
                runs = []
                for seed in range(args.draws):
                    with tempfile.TemporaryDirectory(prefix="overshoot-") as tmp:
                        runs.append(one_run(Path(tmp), workers=workers, honour=honour,
                                            old=old, seed=seed))
                worst = max(r["spent"] for r in runs)
                rows.append({"workers": workers,
                             "runner": "honours share" if honour else "ignores share",
                             "rule": "old (start if not spent)" if old else "reservation",
                             "worst_spent_usd": round(worst, 4), "cap_usd": CAP,
                             "worst_overshoot_usd": round(max(0.0, worst - CAP), 4),
                             "median_spent_usd": round(statistics.median(
                                 r["spent"] for r in runs), 4),
                             "nodes_done": statistics.median(r["done"] for r in runs),
                             "stopped_at_cap": sum(r["stopped_at_cap"] for r in runs),
                             "seconds": round(sum(r["seconds"] for r in runs), 1)})
                if not args.json:
                    print(_line(rows[-1]), flush=True)
    if args.json:
        print(json.dumps({"nodes": NODES, "cap_usd": CAP, "draws": args.draws, "rows": rows},
                         indent=2))
    return 0


def _line(row: dict[str, Any]) -> str:
    return (f"{row['workers']:>2} workers | {row['runner']:<13} | {row['rule']:<24} | worst "
            f"${row['worst_spent_usd']:>7.4f} of ${row['cap_usd']:.2f} | overshoot "
            f"${row['worst_overshoot_usd']:.4f} | median ${row['median_spent_usd']:.4f} | "
            f"nodes done {row['nodes_done']:g} | runners stopped at cap "
            f"{row['stopped_at_cap']} | {row['seconds']:.1f}s")


if __name__ == "__main__":
    os.environ.setdefault("CLAVAIN_BUSY_TIMEOUT_MS", "30000")
    raise SystemExit(main())
