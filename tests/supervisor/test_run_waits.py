"""A run's waits with nothing running are kept in its metrics.json (`RunMetrics.waited`) and
drawn on its page: a real supervised run, a real runner process that is rate limited once,
real SQLite, and the page's timeline read back from the files the run wrote."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from clavain.clock import now_iso
from clavain.page import collect, timeline_section
from tests.checks import PASSES
from tests.supervisor import kit

pytestmark = pytest.mark.slow


def test_a_rate_limit_wait_is_recorded_and_drawn_as_a_band(tmp_path: Path) -> None:
    runner = kit.rate_limited_once(tmp_path)
    state = kit.make_project(tmp_path / "p", {"runners": {"lim": {"command": [str(runner)]}}})
    kit.add(state, [{"id": "task-a", "type": "task", "title": "task-a", "verify": [PASSES]}],
            scaffold=False)
    report = kit.run(state, [], runner="lim")
    on_disk = json.loads((state.runs / report["run_id"] / "metrics.json").read_text())
    limited, done = on_disk["timeline"]
    assert (limited["outcome"], done["outcome"]) == ("rate_limited", "done")
    # One wait (the loop's turns joined), between the limited call and the next one.
    assert [w["why"] for w in on_disk["waits"]] == ["rate_limit"]
    wait = on_disk["waits"][0]
    assert limited["end_epoch"] <= wait["start_epoch"] < wait["end_epoch"] \
        <= done["start_epoch"]
    problems: list[str] = []
    run = collect._run(state, report["run_id"], problems)
    text = timeline_section.section({"runs": [run], "loops": [], "generated_at": now_iso()})
    band = re.search(r'<g class="wait wait-rate_limit run-wait"[^>]*>.*?</g>', text, re.S)
    assert band and "rate-limit wait" in band.group(0)
    assert '<g class="legend-entry" data-wait="rate_limit">' in text
