"""The complexity classifier's learned second opinion (`complexity_model`): the shipped weights
load, are small and are what training on the labelled data gives; how the model and the rules
combine; `explain` shows the model's probabilities and the features that pushed."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from clavain.sprint import complexity_model as model
from clavain.sprint.complexity import classify, explain, rule_score

REPO = Path(__file__).resolve().parents[2]


def _trainer():
    spec = importlib.util.spec_from_file_location(
        "train_complexity", REPO / "benchmarks" / "train_complexity.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("train_complexity", module)
    spec.loader.exec_module(module)
    return module


def test_the_weights_load_once_are_small_and_deterministic() -> None:
    assert model.WEIGHTS.stat().st_size < 150 * 1024
    assert model.weights() is model.weights() and len(model.weights()) > 100
    text = "let admins export the audit log as csv, filtered by date range and user"
    first, again = explain(text)["model"], explain(text)["model"]
    assert first == again and abs(sum(first["probabilities"].values()) - 1) < 0.01
    assert set(first["probabilities"]) == {"1", "2", "3", "4", "5"}


def test_retraining_on_the_data_gives_the_shipped_weights() -> None:
    """The weights cannot go stale: a change to the labelled data or the features must be
    followed by `python benchmarks/train_complexity.py`."""
    trainer = _trainer()
    assert "routing_holdout_3" not in " ".join(str(path) for path in trainer.SETS.values())
    assert trainer.shipped(trainer.load()) == model.WEIGHTS.read_text(encoding="utf-8")


@pytest.mark.parametrize(("rule", "probs", "words", "hold", "want"), [
    (2, [0.1, 0.1, 0.7, 0.05, 0.05], 12, False, 3),   # the model is clearly surer: it decides
    (2, [0.1, 0.4, 0.5, 0.0, 0.0], 12, False, 2),     # a near tie: the rules break it
    (2, [0.1, 0.1, 0.7, 0.05, 0.05], 6, False, 2),    # a few words: the rules decide
    (2, [0.1, 0.1, 0.7, 0.05, 0.05], 12, True, 2),    # a structure the rules read: they hold
    (4, [0.9, 0.05, 0.05, 0.0, 0.0], 12, False, 4),   # a named large-work cue is never ≤ 2
    (1, [0.5, 0.05, 0.05, 0.4, 0.0], 4, False, 3),    # the model sees large work: not ≤ 2
    (1, [0.5, 0.05, 0.05, 0.4, 0.0], 12, True, 3),
])
def test_how_the_rules_and_the_model_combine(rule: int, probs: list[float], words: int,
                                             hold: bool, want: int) -> None:
    score, why = model.combine(rule, probs, words, hold=hold)
    assert score == want
    assert (why is None) == (score == rule)


def test_work_with_a_strong_large_work_cue_is_never_scored_two_or_lower() -> None:
    trainer = _trainer()
    rows = [json.loads(line) for path in trainer.SETS.values()
            for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    large = [row for row in rows if rule_score(row["text"], row.get("files", 0))[0] >= 4]
    assert len(large) > 100
    low = [row["text"] for row in large if classify(row["text"], row.get("files", 0))["score"] <= 2]
    assert not low, low[:5]


def test_explain_shows_the_model_and_a_moved_score_says_so() -> None:
    text = ("we need to move all customer records from the old mysql box into postgres "
            "without losing anything over the weekend")
    shown = explain(text)
    opinion = shown["model"]
    assert opinion["rules_score"] == 4 and opinion["score"] == shown["score"]
    assert opinion["top_features"] and all(weight > 0 for _, weight in opinion["top_features"])
    for text in ("every time someone opens the settings page on a phone the save button "
                 "sits under the keyboard and people cannot reach it at all",):
        result = explain(text)
        if result["score"] != result["model"]["rules_score"]:
            assert result["reasons"][0].startswith("model: ")


def test_without_a_weights_file_the_rules_decide_alone(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(model, "WEIGHTS", tmp_path / "missing.json")
    model.weights.cache_clear()
    try:
        text = "add a bumper sticker page with new typography for the researcher bio section"
        assert explain(text)["model"] is None
        assert classify(text)["score"] == rule_score(text)[0]
    finally:
        model.weights.cache_clear()
