"""Calls per hour: a full window makes the loop wait until its oldest call leaves, the window
slides, the count survives a restart, and a property test against a naive recount."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clavain.errors import ClavainError
from clavain.loop.rate_limit import WINDOW_SECONDS, CallRate


class FakeClock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def _rate(root: Path, clock: FakeClock, per_hour: int = 100) -> CallRate:
    state_root = root / ".clavain"
    return CallRate(state_root / "loop" / "calls.json", state_root=state_root,
                    per_hour=per_hour, clock=clock)


def test_a_full_window_waits_until_the_first_call_leaves(tmp_path: Path,
                                                        clock: FakeClock) -> None:
    rate = _rate(tmp_path, clock)
    start = clock.now
    for _ in range(100):
        assert rate.wait_seconds() == 0
        rate.record_call()
        clock.advance(10)
    assert clock.now == start + 1000
    assert rate.wait_seconds() == pytest.approx(WINDOW_SECONDS - 1000)
    status = rate.status()
    assert status == {"per_hour": 100, "calls_in_window": 100,
                      "next_free_at": pytest.approx(start + WINDOW_SECONDS), "last_reset": None}


def test_the_window_slides(tmp_path: Path, clock: FakeClock) -> None:
    rate = _rate(tmp_path, clock, per_hour=3)
    start = clock.now
    for _ in range(3):
        rate.record_call()
        clock.advance(100)
    clock.now = start + WINDOW_SECONDS - 0.5
    assert rate.wait_seconds() == pytest.approx(0.5)
    clock.now = start + WINDOW_SECONDS  # the first call leaves exactly an hour later
    assert rate.wait_seconds() == 0
    assert rate.status() == {"per_hour": 3, "calls_in_window": 2, "next_free_at": None,
                             "last_reset": None}
    rate.record_call()
    assert rate.wait_seconds() == pytest.approx(100)  # now the second call is the oldest
    saved = json.loads((tmp_path / ".clavain" / "loop" / "calls.json").read_text())
    assert len(saved["calls"]) == 3  # the call that left was pruned


def test_an_empty_window_never_waits(tmp_path: Path, clock: FakeClock) -> None:
    rate = _rate(tmp_path, clock, per_hour=1)
    assert rate.wait_seconds() == 0
    assert rate.status() == {"per_hour": 1, "calls_in_window": 0, "next_free_at": None,
                             "last_reset": None}
    rate.record_call()
    assert rate.wait_seconds() == WINDOW_SECONDS


def test_a_new_instance_keeps_the_calls(tmp_path: Path, clock: FakeClock) -> None:
    first = _rate(tmp_path, clock, per_hour=2)
    first.record_call()
    clock.advance(60)
    _rate(tmp_path, clock, per_hour=2).record_call()
    third = _rate(tmp_path, clock, per_hour=2)
    assert third.status()["calls_in_window"] == 2
    assert third.wait_seconds() == pytest.approx(WINDOW_SECONDS - 60)


def test_a_lowered_limit_waits_for_enough_calls_to_leave(tmp_path: Path,
                                                         clock: FakeClock) -> None:
    start = clock.now
    rate = _rate(tmp_path, clock, per_hour=10)
    for _ in range(10):
        rate.record_call()
        clock.advance(1)
    lowered = _rate(tmp_path, clock, per_hour=4)
    # 10 calls in the window, 4 allowed: the 7th oldest (at start + 6) must leave first
    assert lowered.wait_seconds() == pytest.approx(start + 6 + WINDOW_SECONDS - clock.now)


@pytest.mark.parametrize("per_hour", [0, -5, True, 2.5])
def test_a_limit_below_one_is_refused(tmp_path: Path, clock: FakeClock, per_hour) -> None:
    with pytest.raises(ClavainError, match="calls per hour"):
        _rate(tmp_path, clock, per_hour=per_hour)


def test_a_state_file_outside_the_state_root_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ClavainError, match="not inside"):
        CallRate(tmp_path / "calls.json", state_root=tmp_path / ".clavain")


@pytest.mark.parametrize("content", [
    "{not json", "[]", "", '{"version": 1}', '{"version": 1, "calls": "x"}',
    '{"version": 1, "calls": [1, "2"]}', '{"version": 1, "calls": [true]}',
    '{"version": 2, "calls": [1]}',
])
def test_a_damaged_state_file_is_an_empty_window(tmp_path: Path, clock: FakeClock,
                                                 content: str) -> None:
    path = tmp_path / ".clavain" / "loop" / "calls.json"
    path.parent.mkdir(parents=True)
    path.write_text(content)
    rate = _rate(tmp_path, clock, per_hour=1)
    assert rate.wait_seconds() == 0
    rate.record_call()
    assert json.loads(path.read_text()) == {"version": 1, "calls": [clock.now]}


def test_a_call_stamped_in_the_future_counts_as_now(tmp_path: Path, clock: FakeClock) -> None:
    rate = _rate(tmp_path, clock, per_hour=1)
    rate.record_call()
    clock.now -= 10 * 86400  # the clock went back ten days
    assert _rate(tmp_path, clock, per_hour=1).wait_seconds() == WINDOW_SECONDS


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(st.tuples(st.sampled_from([0, 1, 30, 600, 1800, 3599, 3600]),
                                st.booleans(), st.booleans()), max_size=40),
       per_hour=st.integers(1, 5))
def test_rate_agrees_with_a_naive_recount(steps: list, per_hour: int) -> None:
    """After any sequence, a call may start exactly when fewer than per_hour calls were made in
    the last hour, and waiting wait_seconds() always frees one."""
    clock = FakeClock()
    made: list[float] = []
    with tempfile.TemporaryDirectory(prefix="clavain-rate-") as folder:
        rate = _rate(Path(folder), clock, per_hour)
        for advance, call, restart in steps:
            clock.advance(advance)
            if restart:
                rate = _rate(Path(folder), clock, per_hour)
            in_window = [at for at in made if at > clock.now - WINDOW_SECONDS]
            wait = rate.wait_seconds()
            assert (wait == 0) == (len(in_window) < per_hour)
            assert rate.status()["calls_in_window"] == len(in_window)
            if wait:
                clock.advance(wait)
                assert rate.wait_seconds() == 0
            if call:
                rate.record_call()
                made.append(clock.now)
