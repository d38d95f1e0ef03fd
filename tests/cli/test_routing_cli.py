"""`clavain report --routing` and `clavain sprint classify --explain` through the real launcher:
an agent's start and a person's, the report for people and for tools, the cues shown."""

from __future__ import annotations

import re
from typing import Any


def _keys(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [*value, *(key for inner in value.values() for key in _keys(inner))]
    if isinstance(value, list):
        return [key for inner in value for key in _keys(inner)]
    return []


def test_nothing_recorded_yet_is_one_clear_line(run_cli, cli_json) -> None:
    shown = run_cli("report", "--routing")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("No sprint start recorded yet in ")
    assert cli_json("report", "--routing")["starts"] == 0


def test_report_routing_of_an_agents_and_a_persons_start(run_cli, cli_json) -> None:
    started = cli_json("sprint", "start", "--complexity", "4", "fix typo in README")
    assert started["routing_decision"]["decided_by"] == "agent"
    assert run_cli("sprint", "abandon", person=True).returncode == 0
    lowered = run_cli("sprint", "start", "--complexity", "2", "add OAuth login", person=True)
    assert lowered.returncode == 0, lowered.stderr + lowered.stdout
    found = cli_json("report", "--routing")
    assert (found["starts"], found["agreed"], found["raised"], found["lowered"]) == (2, 0, 1, 1)
    assert found["overrides"] == [
        {"decided_by": "agent", "direction": "raised", "steps": 3, "starts": 1},
        {"decided_by": "person", "direction": "lowered", "steps": -2, "starts": 1}]
    assert found["miss_cues"]["lowered"][0]["cue"] == "oauth"
    assert all(re.fullmatch(r"[a-z0-9_]+", key) for key in _keys(found)), _keys(found)
    text = run_cli("report", "--routing").stdout
    assert "Agreement: 0 of 2 (0%)" in text and "agent       raised     +3" in text


def test_routing_takes_no_run_or_page(run_cli) -> None:
    refused = run_cli("report", "--routing", "--run", "x")
    assert refused.returncode != 0 and "--routing reads every recorded sprint start" in \
        refused.stderr


def test_classify_explain_shows_the_cues(run_cli, cli_json) -> None:
    shown = run_cli("sprint", "classify", "--explain", "fix the typo in the footer. also add "
                    "pagination to the orders list")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("3/5 (moderate)\n") and "Decided by: ask 2" in shown.stdout
    assert re.search(r"trivial +typo", shown.stdout)
    assert re.search(r"moderate +add pagination", shown.stdout)
    found = cli_json("sprint", "classify", "--explain", "add OAuth login")
    assert "oauth" in found["cues"]["complex"] and found["decided_by"] == "whole"
    assert found["asks"] == [] and found["whole"]["score"] == found["score"] == 4
    assert all(re.fullmatch(r"[a-z0-9_]+", key) for key in _keys(found)), _keys(found)


def test_help_names_the_new_flags(run_cli) -> None:
    assert "--routing" in run_cli("report", "--help").stdout
    assert "--explain" in run_cli("sprint", "classify", "--help").stdout
