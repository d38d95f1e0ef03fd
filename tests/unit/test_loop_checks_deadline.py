"""The Stop hook's checks have a total deadline under the host's 600 s: enforced while they run
(a check still running is stopped, one not started is not run, both reported as not finished,
never as passed) and checked when `/clavain:loop` starts."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from clavain.loop import checks, session_loop


def _check(name: str, cmd: str, timeout: float | None = None) -> dict:
    return {"id": name, "cmd": cmd, **({"timeout": timeout} if timeout is not None else {})}


def test_the_worst_case_is_every_check_to_its_timeout_eight_at_a_time() -> None:
    assert checks.worst_case_seconds([]) == 0
    assert checks.worst_case_seconds([_check("a", "true")]) == checks.DEFAULT_TIMEOUT
    assert checks.worst_case_seconds([_check(str(i), "true", 540) for i in range(8)]) == 540
    # 16 checks of 540 s: two rounds, past the host's 600 s.
    assert checks.worst_case_seconds([_check(str(i), "true", 540) for i in range(16)]) == 1080
    # In config order, each taking the first place that frees.
    assert checks.worst_case_seconds([_check(str(i), "true", t) for i, t in
                                      enumerate([300] * 8 + [200, 300])]) == 600


def test_a_loop_whose_checks_cannot_finish_in_a_stop_hook_is_refused() -> None:
    sixteen = [_check(str(i), "true", 540) for i in range(16)]
    refused = session_loop.checks_too_long(sixteen)
    assert refused is not None and "\n" not in refused
    assert refused.startswith("the checks in .clavain/config.json may take 1080 s together "
                              "(each to its timeout, 8 at a time), more than the 540 s")
    assert session_loop.checks_too_long(sixteen[:8]) is None
    assert session_loop.checks_too_long([_check("slow", "true", 541)]) is not None


def test_the_deadline_counts_from_the_hook_launcher(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAVAIN_HOOK_STARTED", f"{time.time() - 40:.6f}")
    left = session_loop.checks_deadline() - time.monotonic()
    assert session_loop.CHECKS_SECONDS - 45 < left < session_loop.CHECKS_SECONDS - 35


def test_a_check_running_at_the_deadline_is_stopped_and_not_finished(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checks, "MAX_PARALLEL", 1)  # the second waits for the first's place
    started = time.monotonic()
    outcome = checks.run_checks(
        [_check("slow", "sleep 60", 120), _check("queued", "true", 120)],
        project=tmp_path, state_root=tmp_path, log_dir=tmp_path / "logs",
        deadline=started + 1.5)
    assert time.monotonic() - started < 30  # returned at the deadline, not after `sleep 60`
    slow, queued = outcome
    assert (slow["passed"], slow["finished"], slow["timed_out"]) == (False, False, True)
    assert slow["tail"].endswith("[not finished: stopped when the checks' total time ran out]")
    assert (queued["passed"], queued["finished"]) == (False, False)
    assert queued["tail"] == "not run: the checks' total time ran out before it could start"


def test_checks_inside_the_deadline_are_reported_as_usual(tmp_path: Path) -> None:
    passed, failed, own = checks.run_checks(
        [_check("ok", "true"), _check("red", "exit 3"), _check("own", "sleep 30", 0.5)],
        project=tmp_path, state_root=tmp_path, log_dir=tmp_path / "logs",
        deadline=time.monotonic() + 60)
    assert (passed["passed"], passed["finished"]) == (True, True)
    assert (failed["passed"], failed["exit_code"], failed["finished"]) == (False, 3, True)
    # Past its own timeout, well before the total: timed out, and finished as such.
    assert (own["timed_out"], own["finished"]) == (True, True)
    assert "not finished" not in own["tail"]
