"""The complexity classifier on wording of its own (issue 36): cue families in the shape of a
phrase — a value set to another, a capability built, a defect in an existing one, an open
question — rather than the phrases of the labelled sets, so fresh wording routes the same."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from clavain.sprint.complexity import classify

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("text", [
    "lower the session idle timeout from 30 to 20 minutes",
    "set DEFAULT_PAGE_SIZE to 50 in settings.py",
    "flip DEBUG to false in the staging settings",
    "the about page still says we were founded in 2019",
    "the link to the API reference in the quickstart is dead",
    "make the cancel button grey",
    "replicas in values.yaml 2 -> 3",                   # a bare arrow is a value, not a version
    'rename the "Login" heading to "Sign in"',          # quoted text is content, not auth work
    "drop the unused lodash import in utils.js",
])
def test_mechanical_edits_in_other_words_are_trivial(text: str) -> None:
    assert classify(text)["score"] == 1, classify(text)


@pytest.mark.parametrize("text", [
    "add a tooltip to the export button and fix the typo in its label",
    "bump the retry count from 3 to 5 and add jitter to the backoff",
])
def test_an_ask_that_builds_beside_a_mechanical_edit_makes_it_simple(text: str) -> None:
    result = classify(text)
    assert result["score"] == 2, result
    assert result["reasons"][0].startswith("more than a mechanical edit")


@pytest.mark.parametrize("text", [
    "add pagination to the audit list",
    "let admins export the member list as CSV",
    "implement password reset with expiring links",
    "move PDF rendering off the request path into a background job",
    "the dashboard takes 12 seconds to load, profile it and speed up the slow queries",
    "support drag-and-drop reordering of playlist items",
])
def test_building_a_capability_is_moderate(text: str) -> None:
    assert classify(text)["score"] == 3, classify(text)


@pytest.mark.parametrize("text", [
    "the search endpoint returns 500 on an empty query, return 400 instead",
    "the csv export drops the header row when there is one record",
    "add a retry option to the upload client and document it",
])
def test_a_defect_in_or_a_tweak_to_an_existing_capability_is_simple(text: str) -> None:
    assert classify(text)["score"] == 2, classify(text)


@pytest.mark.parametrize("text", [
    "which message broker suits us best: NATS or Kafka?",
    "design how retries should work across the workers",
    "find out why the queue backs up on monday mornings",
    "propose a layout for the new monorepo",
    "NATS or Kafka for the new event bus?",
])
def test_open_questions_in_other_words_are_research(text: str) -> None:
    assert classify(text)["score"] == 5, classify(text)


@pytest.mark.parametrize("text", [
    "make the invoice job safe to run twice without charging anyone twice",
    "move the attachments to a new bucket layout without breaking existing links",
    "add row history to every model so any record can be rebuilt as of a date",
    "get off MySQL and onto Postgres for all tables",
])
def test_large_work_in_other_words_is_not_scored_low(text: str) -> None:
    assert classify(text)["score"] == 4, classify(text)


def test_five_to_nineteen_files_lift_simple_work_to_moderate_but_no_further() -> None:
    moderate = "add pagination to the audit list"
    assert classify(moderate, 8)["score"] == 3
    assert classify("add a retry option to the upload client", 8)["score"] == 3
    assert classify(moderate, 25)["score"] == 4


def test_code_and_paths_count_as_words() -> None:
    result = classify("send `Cache-Control: no-store` on the /account response")
    assert not any("too little" in reason for reason in result["reasons"]), result


def test_the_benchmark_reports_every_set_and_large_work_scored_low() -> None:
    run = subprocess.run([sys.executable, str(REPO / "benchmarks" / "complexity_eval.py"),
                          "--misses", "--set", "all"], capture_output=True, text=True,
                         check=True)
    summaries = [line for line in run.stdout.splitlines() if "labelled requests" in line]
    assert len(summaries) >= 4 and all("labelled 4-5)" in line for line in summaries)
