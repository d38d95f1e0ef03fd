"""Config checks for the loop: in parallel, each with its timeout, never silently passing."""

from __future__ import annotations

import time
from pathlib import Path

from clavain.loop.checks import run_checks


def test_checks_run_at_once_and_a_slow_one_times_out(tmp_path: Path) -> None:
    state_root = tmp_path / ".clavain"
    state_root.mkdir()
    checks = [{"id": "slow-a", "cmd": "sleep 1", "timeout": 10},
              {"id": "slow-b", "cmd": "sleep 1", "timeout": 10},
              {"id": "hang", "cmd": "sleep 30", "timeout": 0.5},
              {"id": "red", "cmd": "echo broken; exit 4", "priority": "high"}]
    began = time.monotonic()
    results = run_checks(checks, project=tmp_path, state_root=state_root,
                         log_dir=state_root / "runs" / "checks")
    assert time.monotonic() - began < 2.5  # not 1 + 1 + 0.5 in a row
    by_id = {r["id"]: r for r in results}
    assert [r["id"] for r in results] == ["slow-a", "slow-b", "hang", "red"]
    assert by_id["slow-a"]["passed"] and by_id["slow-b"]["passed"]
    assert not by_id["hang"]["passed"] and by_id["hang"]["timed_out"]
    assert by_id["red"]["exit_code"] == 4 and "broken" in by_id["red"]["tail"]
    assert by_id["red"]["priority"] == "high" and by_id["slow-a"]["priority"] == "medium"


def test_no_checks_is_nothing_to_run(tmp_path: Path) -> None:
    assert run_checks([], project=tmp_path, state_root=tmp_path, log_dir=tmp_path) == []
