"""A learned second opinion on a request's complexity (`complexity`): a multinomial logistic
regression over stemmed words, pairs of them and the request's shape (length, `--files`, a
question mark, the script), trained by `benchmarks/train_complexity.py` on every labelled request
and shipped as `complexity_weights.json`. Why: word lists tuned on some sets of requests scored
70 % on a blind set in fresh wording, and each pass of more vocabulary gained a few points; many
weak weighted signals carry further (cross-validated on that set: 86 % alone, 79 % combined).

The weights are read once, lazily (json only). How it combines with the rules (`combine`): the
rules decide short requests and those whose structure decided (`complexity._holds`), break near
ties, and keep a named large-work score (4–5) from falling to 1–2; the model lifts a 1–2 to 3
when it puts 40 % or more on large work.
"""

from __future__ import annotations

import json
import math
import re
from functools import cache
from itertools import pairwise
from pathlib import Path

from clavain.sprint import complexity_cues as cue

WEIGHTS = Path(__file__).with_name("complexity_weights.json")
SCORES = (1, 2, 3, 4, 5)
_TOKEN = re.compile(r"[^\W_](?:[\w'.-]*[^\W_])?")
# Chosen by cross-validation (benchmarks/train_complexity.py --cv): the rules' score wins
# unless another is this much more probable; a 2 or lower is lifted to 3 from this much on 4–5.
# Under MIN_WORDS words the rules decide alone (the model then only guards against large work).
TRUST, LARGE_FLOOR, MIN_WORDS = 0.25, 0.4, 10
_CODE = "qqcodeqq"  # stands for a path or a piece of code (`…` in `cue.normalise`) while split
_SUFFIXES = ("ations", "ation", "ings", "ing", "ies", "ed", "es", "ly", "s")


def stem(word: str) -> str:
    """A crude stem (`migrating`, `migrated`, `migrates` -> `migrat`), numbers as `<n>`."""
    if any(ch.isdigit() for ch in word):
        return "<n>" if not any(ch.isalpha() for ch in word) else "<v>"
    for suffix in _SUFFIXES:
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def tokens(text: str) -> list[str]:
    """Stemmed words in order; Chinese and Japanese as pairs of characters; a path or a piece of
    code as `<code>`."""
    lowered = cue.normalise(text)
    out: list[str] = []
    for raw in _TOKEN.findall(cue.CJK.sub(" ", lowered.replace("…", f" {_CODE} "))):
        out.append("<code>" if raw == _CODE else stem(raw))
    chars = [ch for ch in lowered if cue.CJK.match(ch)]
    out += [a + b for a, b in pairwise(chars)]
    return out


def features(text: str, files: int) -> list[str]:
    """The request's features: `w:` stemmed words, `b:` pairs of them, and its shape (length,
    `--files`, a question mark, a script other than Latin). Not the rules' cues or score:
    the rules were tuned on most of the training rows, so a model fed their verdict learns to
    copy it, and on fresh wording (the second blind set) that cost 3–6 points."""
    words = tokens(text)
    found = {f"w:{w}" for w in words}
    found |= {f"b:{a} {b}" for a, b in pairwise(words)}
    count = cue.word_count(cue.normalise(text))
    length = next(name for top, name in ((5, "<5"), (10, "<10"), (20, "<20"), (40, "<40"),
                                         (10**9, "40+")) if count < top)
    found |= {f"len:{length}", "bias"}
    found.add("files:" + next(name for top, name in ((1, "0"), (2, "1"), (5, "2-4"),
                                                     (20, "5-19"), (10**9, "20+"))
                              if files < top))
    if "?" in text or "？" in text:
        found.add("q")
    if cue.CJK.search(text):
        found.add("script:cjk")
    elif any(ord(ch) > 127 and ch.isalpha() for ch in text):
        found.add("script:accented")
    return sorted(found)


@cache
def weights() -> dict[str, list[float]] | None:
    """The shipped weights, feature -> one weight per score, read once; None without the file
    (the rules then decide alone)."""
    try:
        return json.loads(WEIGHTS.read_text(encoding="utf-8"))["weights"]
    except FileNotFoundError:
        return None


def opinion(text: str, files: int, rule: int, *, hold: bool = False
            ) -> dict[str, object] | None:
    """The model's second opinion on a request the rules scored `rule`: the combined `score`,
    the `reason` when the model moved it, the `probabilities` of 1–5, `rules_score` (`hold`:
    a structure the rules read decided it, see `combine`), and the
    features that pushed most toward the combined score (`top_features`); None without
    weights."""
    table = weights()
    if table is None:
        return None
    found = features(text, files)
    probs = probabilities(found, table)
    score, why = combine(rule, probs, cue.word_count(cue.normalise(text)), hold=hold)
    if why:
        pushed = ", ".join(str(name) for name, _ in contributions(found, score, 3))
        why = f"{why}{f' — {pushed}' if pushed else ''}"
    return {"score": score, "reason": why, "rules_score": rule,
            "probabilities": {str(s): round(p, 3) for s, p in zip(SCORES, probs, strict=True)},
            "top_features": contributions(found, score)}


def probabilities(found: list[str], table: dict[str, list[float]] | None = None
                  ) -> list[float]:
    """P(score) for scores 1–5 (softmax over the summed weights of the features present)."""
    table = (weights() or {}) if table is None else table
    sums = [0.0] * len(SCORES)
    for name in found:
        for at, weight in enumerate(table.get(name, ())):
            sums[at] += weight
    top = max(sums)
    exps = [math.exp(s - top) for s in sums]
    return [e / sum(exps) for e in exps]


def contributions(found: list[str], score: int, limit: int = 5) -> list[list[object]]:
    """The features that pushed most toward `score` (its weight above the mean of the other
    scores' weights), [[feature, weight], …] largest first."""
    table, at = weights() or {}, score - 1
    pushes = []
    for name in found:
        row = table.get(name)
        if row and name != "bias":
            push = row[at] - (sum(row) - row[at]) / (len(row) - 1)
            if push > 0:
                pushes.append((push, name))
    return [[name, round(push, 2)] for push, name in sorted(pushes, reverse=True)[:limit]]


def combine(rule: int, probs: list[float], words: int, *, hold: bool = False,
            trust: float = TRUST,
            large_floor: float = LARGE_FLOOR, min_words: int = MIN_WORDS
            ) -> tuple[int, str | None]:
    """The score from the rules' (`rule`) and the model's probabilities for a request of
    `words` words, with the reason when the model moved it: the rules' score when they `hold`
    (a structure words alone do not show decided it: the larger of several asks, a cause to
    find then fix, a deliverable asked politely, `--files`) or under `min_words` (a few words
    give the model little to weigh; the rules read them precisely), else the
    model's best score unless the rules' is within `trust` of it in probability (the rules
    break near ties); never below the rules' 4–5 for a 1–2 (a named large-work cue stands),
    and never 2 or lower when the model puts `large_floor` or more on 4–5 (3 then: brainstorm
    and plan review run)."""
    best = max(SCORES, key=lambda s: probs[s - 1] + (trust if s == rule else 0.0))
    score = best if words >= min_words and not hold and not (rule >= 4 and best <= 2) else rule
    why = None if score == rule else \
        f"model: {score} ({probs[score - 1]:.0%}) over the rules' {rule} ({probs[rule - 1]:.0%})"
    large = probs[3] + probs[4]
    if score <= 2 and large >= large_floor:
        why = f"model: {large:.0%} that it is large work (4–5), so 3, not {score}"
        score = 3
    return score, why
