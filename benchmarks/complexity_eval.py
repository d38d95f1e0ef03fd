"""How often the complexity classifier agrees with people: exact and within ±1 on the labelled
requests in tests/data/complexity.jsonl (the set its signals were tuned on; a test holds it to
≥ 75 % exact, ≥ 95 % within ±1), on tests/data/complexity_holdout.jsonl (written by someone
who never saw the classifier or the first set) and on tests/data/complexity_holdout_v2.jsonl
(written blind before the system-wide-concern, compound-ask and CJK changes: system-wide work
in new words, compound asks, Chinese and Japanese, very short and very long requests). The
held-out figures are the honest ones and are reported only, never asserted. Each set also
counts the costly error: work labelled 3+ routed as 1-2 (skipping brainstorm, strategy and
plan review).

    python benchmarks/complexity_eval.py [--misses] [--set tuning|holdout|holdout-v2]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "lib"))

from clavain.sprint.complexity import LABELS, classify  # noqa: E402

DATA = REPO / "tests" / "data" / "complexity.jsonl"
HOLDOUT = REPO / "tests" / "data" / "complexity_holdout.jsonl"
HOLDOUT_V2 = REPO / "tests" / "data" / "complexity_holdout_v2.jsonl"
SETS = {"tuning": ("tuning set", DATA), "holdout": ("held-out set", HOLDOUT),
        "holdout-v2": ("blind held-out set v2", HOLDOUT_V2)}


def evaluate(path: Path = DATA) -> dict:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    matrix = {(want, got): 0 for want in LABELS for got in LABELS}
    misses = []
    for row in rows:
        got = classify(row["text"], row.get("files", 0))["score"]
        matrix[(row["label"], got)] += 1
        if got != row["label"]:
            misses.append((row["label"], got, row["text"]))
    exact = sum(matrix[(n, n)] for n in LABELS)
    near = sum(count for (want, got), count in matrix.items() if abs(want - got) <= 1)
    under = sum(count for (want, got), count in matrix.items() if want >= 3 and got <= 2)
    return {"rows": len(rows), "exact": exact / len(rows), "within_one": near / len(rows),
            "under_routed": under, "matrix": matrix, "misses": misses}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--misses", action="store_true", help="list every wrong answer")
    parser.add_argument("--set", choices=SETS, default="tuning",
                        help="whose misses --misses lists (default: tuning)")
    parser.add_argument("--holdout", action="store_true",
                        help="same as --set holdout (kept for old command lines)")
    args = parser.parse_args()
    chosen = "holdout" if args.holdout else args.set
    for key, (name, path) in SETS.items():
        report = evaluate(path)
        print(f"{name}: {report['rows']} labelled requests: {report['exact']:.1%} exact, "
              f"{report['within_one']:.1%} within ±1, {report['under_routed']} labelled 3+ "
              f"routed as 1-2")
        print("  label \\ classified  " + "  ".join(f"{n:>3}" for n in LABELS))
        for want in LABELS:
            cells = "  ".join(f"{report['matrix'][(want, got)]:>3}" for got in LABELS)
            print(f"  {want} {LABELS[want]:<16}  {cells}")
        if args.misses and key == chosen:
            for want, got, text in report["misses"]:
                print(f"  want {want} got {got}: {text[:110]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
