"""Routing in the open: each sprint start's routing decision in the checkpoint and in
`.clavain/logs/routing.jsonl`, `report` over the recorded starts, and the cues `explain` names."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from clavain.paths import StatePaths
from clavain.sprint import checkpoint, lifecycle, routing_log
from clavain.sprint.complexity import classify, explain

PERSON = {"by": "person", "via": "terminal", "terminal": "/dev/pts/1", "user": "ann",
          "at": "2026-11-27T10:00:00.000Z"}


@pytest.fixture
def state(project: Path) -> StatePaths:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@x", "PATH": "/usr/bin:/bin"}
    (project / "README").write_text("r\n")
    subprocess.run(["git", "add", "-A"], cwd=project, check=True, env=env)
    subprocess.run(["git", "commit", "-qm", "first"], cwd=project, check=True, env=env)
    return StatePaths.discover()


def _start(state: StatePaths, text: str, **kwargs) -> dict:
    started = lifecycle.start(state, text, **kwargs)
    lifecycle.abandon(state, decided_by=PERSON)
    return started["routing_decision"]


def _four_starts(state: StatePaths) -> list[dict]:
    return [
        _start(state, "fix typo in README", decided_by=None),  # the classifier's 1
        _start(state, "add OAuth login", complexity="2", decided_by=PERSON),  # 4 -> 2
        _start(state, "fix typo in README", complexity="3", decided_by=PERSON),  # 1 -> 3
        _start(state, "fix typo in the docs", complexity="4", decided_by=None),  # 1 -> 4
    ]


def test_each_start_records_whose_score_was_used(state: StatePaths) -> None:
    by_classifier, lowered, raised, agent = _four_starts(state)
    assert by_classifier == {
        "classifier_score": 1, "classifier_label": "trivial",
        "classifier_reasons": ["a mechanical edit: typo"], "cues": {"trivial": ["typo"]},
        "score": 1, "decided_by": "classifier", "direction": None, "steps": 0}
    assert (lowered["decided_by"], lowered["direction"], lowered["steps"]) == (
        "person", "lowered", -2)
    assert lowered["classifier_score"] == 4 and lowered["score"] == 2
    assert "oauth" in lowered["cues"]["complex"]
    assert (raised["decided_by"], raised["direction"], raised["steps"]) == ("person", "raised", 2)
    assert (agent["decided_by"], agent["direction"], agent["steps"]) == ("agent", "raised", 3)
    # The checkpoint is archived with its sprint; the log keeps one line per start.
    records, skipped = routing_log.read(state)
    assert skipped == 0 and [r["decided_by"] for r in records] == [
        "classifier", "person", "person", "agent"]
    assert records[1]["description"] == "add OAuth login" and records[1]["sprint_id"]
    assert {key: records[1][key] for key in lowered} == lowered


def test_the_checkpoint_keeps_the_routing_decision(state: StatePaths) -> None:
    lifecycle.start(state, "fix typo in README", complexity="2", decided_by=PERSON)
    kept = checkpoint.read(state)  # checked against schemas/checkpoint.schema.json
    assert kept is not None and kept["routing_decision"]["decided_by"] == "person"
    assert kept["routing_decision"]["direction"] == "raised"


def test_a_torn_last_line_is_skipped_and_the_next_start_is_whole(state: StatePaths) -> None:
    _start(state, "fix typo in README", decided_by=None)
    log = routing_log.log_path(state)
    with log.open("ab") as handle:  # a crash mid-write
        handle.write(b'{"sprint_id": "sprint-x", "classifier_sc')
    assert routing_log.read(state)[1] == 1
    _start(state, "add OAuth login", decided_by=None)
    records, skipped = routing_log.read(state)
    assert skipped == 1 and [r["classifier_score"] for r in records] == [1, 4]
    assert routing_log.report(state)["starts"] == 2
    assert "1 unreadable line(s) skipped" in routing_log.render(routing_log.report(state))


def test_report_counts_agreement_direction_and_the_cues_behind_misses(
        state: StatePaths) -> None:
    _four_starts(state)
    found = routing_log.report(state)
    assert (found["starts"], found["agreed"], found["agreement"]) == (4, 1, 0.25)
    assert (found["raised"], found["lowered"]) == (2, 1)
    assert found["decided_by"] == {"classifier": 1, "person": 2, "agent": 1}
    assert found["overrides"] == [
        {"decided_by": "agent", "direction": "raised", "steps": 3, "starts": 1},
        {"decided_by": "person", "direction": "lowered", "steps": -2, "starts": 1},
        {"decided_by": "person", "direction": "raised", "steps": 2, "starts": 1}]
    assert found["confusion"] == [{"classifier": 1, "used": 1, "starts": 1},
                                  {"classifier": 1, "used": 3, "starts": 1},
                                  {"classifier": 1, "used": 4, "starts": 1},
                                  {"classifier": 4, "used": 2, "starts": 1}]
    assert found["miss_cues"]["raised"][0] == {"family": "trivial", "cue": "typo", "starts": 2}
    assert {"family": "complex", "cue": "oauth", "starts": 1} in found["miss_cues"]["lowered"]
    text = routing_log.render(found)
    assert "Agreement: 1 of 4 (25%)" in text and "person      lowered    -2" in text
    assert "trivial  typo  2" in text


def test_nothing_recorded_is_one_line(state: StatePaths) -> None:
    found = routing_log.report(state)
    assert found["starts"] == 0 and found["agreement"] is None
    assert routing_log.render(found).startswith("No sprint start recorded yet")


@pytest.mark.parametrize(("text", "family", "cue"), [
    ("fix typo in README", "trivial", "typo"),
    ("add OAuth login to the admin app", "complex", "oauth"),
    ("investigate why the nightly export is slow", "research", "investigate"),
    ("add pagination to the orders list", "moderate", "add pagination"),
    ("just add a retry option to the upload client and log each attempt", "simplicity", "just"),
])
def test_explain_names_the_cue_that_matched(text: str, family: str, cue: str) -> None:
    shown = explain(text)
    assert cue in shown["cues"][family], shown
    assert {key: shown[key] for key in classify(text)} == classify(text)


def test_explain_shows_each_ask_and_which_decided() -> None:
    shown = explain("fix the typo in the footer. also add pagination to the orders list")
    assert (shown["score"], shown["decided_by"], shown["whole"]["score"]) == (3, "ask 2", 2)
    assert [(ask["text"], ask["score"]) for ask in shown["asks"]] == [
        ("fix the typo in the footer", 1), ("add pagination to the orders list", 3)]
    assert shown["asks"][0]["cues"] == {"trivial": ["typo"]}
    assert shown["cues"] == shown["asks"][1]["cues"] == {"moderate": ["add pagination"]}
    assert "cues" not in classify("fix typo in README")  # classify's own result is unchanged
