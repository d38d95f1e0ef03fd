"""How often the complexity classifier agrees with people: exact and within ±1 on the labelled
requests in tests/data/complexity.jsonl (the set its signals were tuned on; a test holds it to
≥ 75 % exact, ≥ 95 % within ±1), and on tests/data/complexity_holdout.jsonl (written by someone
who never saw the classifier or the first set: the honest figure, reported only), with the
confusion matrix and the misses.

    python benchmarks/complexity_eval.py [--misses] [--holdout]
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
    return {"rows": len(rows), "exact": exact / len(rows), "within_one": near / len(rows),
            "matrix": matrix, "misses": misses}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--misses", action="store_true", help="list every wrong answer")
    parser.add_argument("--holdout", action="store_true",
                        help="list the misses of the held-out set instead")
    args = parser.parse_args()
    for name, path in (("tuning set", DATA), ("held-out set", HOLDOUT)):
        report = evaluate(path)
        print(f"{name}: {report['rows']} labelled requests: {report['exact']:.1%} exact, "
              f"{report['within_one']:.1%} within ±1")
        print("  label \\ classified  " + "  ".join(f"{n:>3}" for n in LABELS))
        for want in LABELS:
            cells = "  ".join(f"{report['matrix'][(want, got)]:>3}" for got in LABELS)
            print(f"  {want} {LABELS[want]:<16}  {cells}")
        if args.misses and (path == HOLDOUT) == args.holdout:
            for want, got, text in report["misses"]:
                print(f"  want {want} got {got}: {text[:110]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
