"""The loop's circuit breaker: every transition with a fake clock, the error normaliser,
persistence across instances, damaged state files, and a property test against a naive model
that recounts streaks from the whole iteration history."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clavain.errors import ClavainError
from clavain.loop.breaker import (
    CLOSED,
    HALF_OPEN,
    HISTORY_LIMIT,
    OPEN,
    CircuitBreaker,
    normalise_error,
)


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


def _breaker(root: Path, clock: FakeClock, **thresholds: float) -> CircuitBreaker:
    state_root = root / ".clavain"
    return CircuitBreaker(state_root / "loop" / "breaker.json", state_root=state_root,
                          clock=clock, **thresholds)  # type: ignore[arg-type]


@pytest.fixture
def breaker(tmp_path: Path, clock: FakeClock) -> CircuitBreaker:
    return _breaker(tmp_path, clock)


def _open_on_no_progress(breaker: CircuitBreaker) -> None:
    for _ in range(3):
        breaker.record(progress=False)
    assert breaker.state == OPEN


# -- no progress -----------------------------------------------------------------------------

def test_no_progress_warns_at_two_and_opens_at_three(breaker: CircuitBreaker,
                                                     clock: FakeClock) -> None:
    assert breaker.record(progress=False) == CLOSED
    assert breaker.record(progress=False) == HALF_OPEN
    assert breaker.allows()  # a warning still lets the loop run
    assert breaker.record(progress=False) == OPEN
    status = breaker.status()
    assert status["reason"] == "3 iterations in a row with no progress"
    assert status["no_progress"] == 3
    assert status["opened_at"] == clock.now
    assert status["cooldown_until"] == clock.now + 1800
    assert [(t["from"], t["to"]) for t in status["history"]] == [(CLOSED, HALF_OPEN),
                                                                 (HALF_OPEN, OPEN)]
    assert not breaker.allows()


def test_progress_in_half_open_closes_and_resets(breaker: CircuitBreaker) -> None:
    breaker.record(progress=False)
    breaker.record(progress=False)
    assert breaker.record(progress=True) == CLOSED
    status = breaker.status()
    assert (status["no_progress"], status["reason"], status["opened_at"]) == (0, None, None)
    assert status["history"][-1]["to"] == CLOSED


def test_half_open_stays_without_progress_even_when_the_warning_count_falls(
        breaker: CircuitBreaker) -> None:
    for _ in range(4):
        breaker.record(progress=True, error="boom")
    assert breaker.state == HALF_OPEN
    assert breaker.record(progress=False) == HALF_OPEN  # no error now, but no progress either
    assert breaker.record(progress=True) == CLOSED


# -- same error ------------------------------------------------------------------------------

def test_same_error_with_masked_differences_opens_at_five(breaker: CircuitBreaker) -> None:
    errors = [f"Traceback  (most recent call last):\n  File \"/tmp/tmp{tag}/run.py\", "
              f"line {line}, in main\nKeyError at 0x7f{line}ab in object {sha}"
              for tag, line, sha in [("ab12cd34", 12, "3f2a9c1d"), ("zz_9yx01", 13, "be77e01"),
                                     ("q1w2e3r4", 99, "0a1b2c3d4e"), ("k9k9k9k9", 7, "ffff0001"),
                                     ("mnbvcxz1", 1200, "deadbee5")]]
    states = [breaker.record(progress=True, error=text) for text in errors]
    assert states == [CLOSED, CLOSED, CLOSED, HALF_OPEN, OPEN]
    reason = breaker.status()["reason"]
    assert reason.startswith("5 iterations in a row ended with the same error: Traceback")


def test_a_different_error_resets_the_count(breaker: CircuitBreaker) -> None:
    for _ in range(4):
        breaker.record(progress=True, error="ImportError: no module named foo")
    assert breaker.state == HALF_OPEN
    assert breaker.record(progress=True, error="ImportError: no module named bar") == CLOSED
    assert breaker.status()["same_error"] == 1
    breaker.record(progress=True, error="ImportError: no module named bar")
    assert breaker.record(progress=True) == CLOSED
    assert breaker.status()["same_error"] == 0


@pytest.mark.parametrize(("one", "other"), [
    ("error at line 12", "error at line 13"),
    ("failed   in\n\t/tmp/pytest-of-me/pytest-4/test_a0/x.py", "failed in /tmp/other/y.py"),
    ("failed in /var/folders/ab/cd/T/tmpx/a", "failed in /private/var/folders/zz/T/q"),
    ("cannot open C:\\Users\\me\\AppData\\Local\\Temp\\abc\\f.txt",
     "cannot open C:\\Users\\you\\AppData\\Local\\Temp\\xyz\\g.txt"),
    ("wrote tmpab12cd34.json", "wrote tmpzz_9yx01.json"),
    ("task 123e4567-e89b-12d3-a456-426614174000 failed",
     "task 9f0e4567-aaaa-bbbb-cccc-426614174fff failed"),
    ("segfault at 0xdeadbeef", "segfault at 0x1"),
    ("commit 3f2a9c1 not found", "commit be77e01aa not found"),
    ("pid 4242 took 1.5s", "pid 7 took 30.25s"),
])
def test_normaliser_masks_what_differs_between_runs(one: str, other: str) -> None:
    assert normalise_error(one) == normalise_error(other)


@pytest.mark.parametrize(("one", "other"), [
    ("KeyError: 'a'", "KeyError: 'b'"),
    ("error in /repo/a.py", "error in /repo/b.py"),
    ("ValueError", "valueerror"),  # case is kept
])
def test_normaliser_keeps_what_tells_errors_apart(one: str, other: str) -> None:
    assert normalise_error(one) != normalise_error(other)


def test_normaliser_examples() -> None:
    assert normalise_error("  line 12,\n\tcol 3  ") == "line #, col #"
    assert normalise_error("at 0xff in deadbeef1") == "at <hex> in <hex>"
    assert normalise_error(None) == normalise_error("   \n") == ""


def test_a_blank_error_is_no_error(breaker: CircuitBreaker) -> None:
    for _ in range(6):
        breaker.record(progress=True, error="  \n ")
    assert breaker.state == CLOSED
    assert breaker.status()["same_error"] == 0


# -- permission denials ----------------------------------------------------------------------

def test_permission_denials_warn_at_one_and_open_at_two(breaker: CircuitBreaker) -> None:
    assert breaker.record(progress=False, permission_denials=3) == HALF_OPEN
    assert breaker.record(progress=False, permission_denials=1) == OPEN
    assert breaker.status()["reason"] == "2 iterations in a row hit permission denials"


def test_an_iteration_without_denials_resets_their_count(breaker: CircuitBreaker) -> None:
    breaker.record(progress=False, permission_denials=1)
    assert breaker.record(progress=True) == CLOSED
    assert breaker.status()["permission_denials"] == 0
    assert breaker.record(progress=False, permission_denials=1) == HALF_OPEN


def test_denials_in_iterations_that_made_progress_do_not_count(
        breaker: CircuitBreaker) -> None:
    for _ in range(5):  # the host refusing a call while the work moves on is the host's job
        assert breaker.record(progress=True, permission_denials=2) == CLOSED
    assert breaker.status()["permission_denials"] == 0


def test_negative_denials_are_refused(breaker: CircuitBreaker) -> None:
    with pytest.raises(ClavainError, match="permission_denials"):
        breaker.record(progress=True, permission_denials=-1)


# -- cooldown and probe ----------------------------------------------------------------------

def test_cooldown_then_a_probe_without_progress_opens_again(breaker: CircuitBreaker,
                                                            clock: FakeClock) -> None:
    _open_on_no_progress(breaker)
    first_open = clock.now
    clock.advance(1799)
    assert not breaker.allows()
    assert breaker.state == OPEN
    clock.advance(1)
    assert breaker.allows()
    status = breaker.status()
    assert (status["state"], status["probing"]) == (HALF_OPEN, True)
    assert status["reason"] == "3 iterations in a row with no progress"  # why it opened
    assert status["history"][-1]["from"] == OPEN
    assert status["history"][-1]["to"] == HALF_OPEN
    assert breaker.record(progress=False) == OPEN
    status = breaker.status()
    assert status["opened_at"] == first_open + 1800
    assert status["cooldown_until"] == first_open + 3600
    assert status["reason"] == "the probe after the cooldown made no progress"
    assert not breaker.allows()


def test_cooldown_then_a_probe_with_progress_closes(breaker: CircuitBreaker,
                                                    clock: FakeClock) -> None:
    _open_on_no_progress(breaker)
    clock.advance(1800)
    assert breaker.allows()
    assert breaker.record(progress=True, error="a new, different error") == CLOSED
    status = breaker.status()
    assert (status["no_progress"], status["probing"], status["cooldown_until"]) == (0, False,
                                                                                   None)
    assert [t["to"] for t in status["history"]] == [HALF_OPEN, OPEN, HALF_OPEN, CLOSED]


def test_a_probe_that_repeats_the_opening_error_opens_again(breaker: CircuitBreaker,
                                                            clock: FakeClock) -> None:
    for _ in range(5):
        breaker.record(progress=True, error="boom on line 3")
    clock.advance(1800)
    assert breaker.allows()
    assert breaker.record(progress=True, error="boom on line 4") == OPEN
    assert breaker.status()["same_error"] == 6


def test_a_probe_without_progress_opens_again(breaker: CircuitBreaker,
                                                        clock: FakeClock) -> None:
    _open_on_no_progress(breaker)
    clock.advance(1800)
    assert breaker.record(progress=False, permission_denials=1) == OPEN  # record() probes too


def test_an_iteration_recorded_while_open_cannot_close_it(breaker: CircuitBreaker) -> None:
    _open_on_no_progress(breaker)
    assert breaker.record(progress=True) == OPEN
    assert breaker.status()["no_progress"] == 0


def test_custom_thresholds_and_cooldown(tmp_path: Path, clock: FakeClock) -> None:
    breaker = _breaker(tmp_path, clock, no_progress=1, cooldown_seconds=10)
    assert breaker.record(progress=False) == OPEN  # a threshold of 1 has no warning step
    clock.advance(10)
    assert breaker.allows()


@pytest.mark.parametrize("bad", [{"no_progress": 0}, {"same_error": -1},
                                 {"permission_denials": True}, {"cooldown_seconds": -1},
                                 {"cooldown_seconds": float("nan")}])
def test_bad_settings_are_refused(tmp_path: Path, clock: FakeClock, bad: dict) -> None:
    with pytest.raises(ClavainError):
        _breaker(tmp_path, clock, **bad)


def test_a_state_file_outside_the_state_root_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ClavainError, match="not inside"):
        CircuitBreaker(tmp_path / "elsewhere.json", state_root=tmp_path / ".clavain")


# -- reset, history --------------------------------------------------------------------------

def test_reset_closes_and_zeroes_the_counts(breaker: CircuitBreaker) -> None:
    _open_on_no_progress(breaker)
    breaker.reset()
    status = breaker.status()
    assert status["state"] == CLOSED
    assert (status["no_progress"], status["same_error"], status["permission_denials"]) == (0, 0,
                                                                                           0)
    assert status["history"][-1]["from"] == OPEN
    assert status["history"][-1]["reason"] == "reset by a person"
    breaker.reset("checked the logs")
    assert breaker.status()["history"][-1] == {"at": status["history"][-1]["at"],
                                               "from": CLOSED, "to": CLOSED,
                                               "reason": "checked the logs"}


def test_history_keeps_the_last_fifty_transitions(breaker: CircuitBreaker,
                                                  clock: FakeClock) -> None:
    for i in range(40):
        clock.advance(1)
        breaker.record(progress=False, permission_denials=1)
        breaker.record(progress=True)
        breaker.reset(f"reset {i}")
    history = breaker.status()["history"]
    assert len(history) == HISTORY_LIMIT
    assert history[-1]["reason"] == "reset 39"


# -- persistence -----------------------------------------------------------------------------

def test_a_new_instance_continues_the_counts(tmp_path: Path, clock: FakeClock) -> None:
    _breaker(tmp_path, clock).record(progress=False)
    second = _breaker(tmp_path, clock)
    assert second.record(progress=False) == HALF_OPEN
    third = _breaker(tmp_path, clock)
    assert third.status()["no_progress"] == 2
    assert third.record(progress=False) == OPEN
    fourth = _breaker(tmp_path, clock)
    assert not fourth.allows()
    assert fourth.status() == third.status()


def test_a_new_instance_continues_a_probe_and_the_error_streak(tmp_path: Path,
                                                               clock: FakeClock) -> None:
    first = _breaker(tmp_path, clock)
    for _ in range(4):
        first.record(progress=True, error="same failure at line 1")
    assert _breaker(tmp_path, clock).record(progress=True, error="same failure at line 2") == OPEN
    clock.advance(1800)
    assert _breaker(tmp_path, clock).allows()
    probe = _breaker(tmp_path, clock)
    assert (probe.state, probe.status()["probing"]) == (HALF_OPEN, True)
    assert probe.record(progress=True) == CLOSED


@pytest.mark.parametrize("content", [
    "{not json", "[]", "null", "", '{"version": 1}',
    json.dumps({"version": 1, "state": "BOGUS", "counts": {}}),
    json.dumps({"version": 1, "state": "OPEN", "counts": {"no_progress": 3, "same_error": 0,
                "permission_denials": 0}, "error_digest": None, "error_excerpt": None,
                "probing": False, "opened_at": None, "reason": None, "history": []}),
    json.dumps({"version": 1, "state": "CLOSED", "counts": {"no_progress": -1, "same_error": 0,
                "permission_denials": 0}, "error_digest": None, "error_excerpt": None,
                "probing": False, "opened_at": None, "reason": None, "history": []}),
    json.dumps({"version": 99, "state": "CLOSED"}),
])
def test_a_damaged_state_file_starts_fresh(tmp_path: Path, clock: FakeClock,
                                           content: str) -> None:
    path = tmp_path / ".clavain" / "loop" / "breaker.json"
    path.parent.mkdir(parents=True)
    path.write_text(content)
    breaker = _breaker(tmp_path, clock)
    assert breaker.state == CLOSED
    assert breaker.allows()
    assert breaker.status()["history"] == []
    breaker.record(progress=False)
    assert json.loads(path.read_text())["counts"]["no_progress"] == 1


def test_a_missing_state_file_is_fresh_and_nothing_is_written_until_a_change(
        tmp_path: Path, clock: FakeClock) -> None:
    breaker = _breaker(tmp_path, clock)
    assert breaker.allows()
    assert breaker.status()["state"] == CLOSED
    assert not (tmp_path / ".clavain").exists()


def test_an_opening_stamped_in_the_future_counts_from_now(tmp_path: Path,
                                                          clock: FakeClock) -> None:
    _open_on_no_progress(_breaker(tmp_path, clock))
    clock.now -= 10 * 86400  # the clock went back ten days
    breaker = _breaker(tmp_path, clock)
    assert breaker.status()["cooldown_until"] == clock.now + 1800
    clock.advance(1800)
    assert breaker.allows()


# -- property test against a naive model -----------------------------------------------------

ERROR_TEMPLATES = ["boom at line {n}", "KeyError in /tmp/tmp{tag}/a.py", "timed out after {n}s",
                   "object {hex} missing"]
TAG_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789_"

ERRORS = st.one_of(
    st.none(),
    st.tuples(st.integers(0, len(ERROR_TEMPLATES) - 1), st.integers(0, 10**6),
              st.text(TAG_ALPHABET, min_size=8, max_size=8),
              st.integers(2**28, 2**40)),
)
OP_KINDS = {
    "iterate": st.tuples(st.just("iterate"), st.booleans(), ERRORS,
                         st.sampled_from([0, 0, 0, 1, 2])),
    "advance": st.tuples(st.just("advance"), st.sampled_from([0, 1, 5, 10, 60, 500])),
    "restart": st.tuples(st.just("restart"), st.none()),
    "reset": st.tuples(st.just("reset"), st.none()),
}
# Mostly iterations, so streaks build up; a restart or a reset now and then.
OPS = st.sampled_from(["iterate"] * 12 + ["advance"] * 4 + ["restart", "reset"]).flatmap(
    OP_KINDS.__getitem__)


def _error_text(error: tuple[int, int, str, int] | None) -> str | None:
    if error is None:
        return None
    template, n, tag, number = error
    return ERROR_TEMPLATES[template].format(n=n, tag=tag, hex=f"{number:x}a1")


class NaiveModel:
    """Recounts every streak from the full list of iterations since the last reset, and keeps
    the state as a plain mode: closed, warn, open (with its opening time) or probe."""

    def __init__(self, thresholds: dict[str, int], cooldown: float) -> None:
        self.thresholds = thresholds
        self.cooldown = cooldown
        self.reset()

    def reset(self) -> None:
        self.iterations: list[tuple[bool, int | None, bool]] = []
        self.mode = "closed"
        self.opened_at: float | None = None

    def streaks(self) -> dict[str, int]:
        def trailing(test) -> int:
            count = 0
            for item in reversed(self.iterations):
                if not test(item):
                    break
                count += 1
            return count

        last_error = self.iterations[-1][1] if self.iterations else None
        return {"no_progress": trailing(lambda it: not it[0]),
                "same_error": 0 if last_error is None else trailing(lambda it: it[1] == last_error),
                # a denial counts only in an iteration that made no progress
                "permission_denials": trailing(lambda it: it[2] and not it[0])}

    def allows(self, now: float) -> bool:
        if self.mode == "open":
            if now - self.opened_at < self.cooldown:
                return False
            self.mode = "probe"
        return True

    def record(self, now: float, progress: bool, error: int | None, denied: bool) -> None:
        self.allows(now)  # record() starts a due probe itself
        self.iterations.append((progress, error, denied))
        streaks = self.streaks()
        reached = any(streaks[k] >= self.thresholds[k] for k in streaks)
        warned = any(streaks[k] >= max(1, self.thresholds[k] - 1) for k in streaks)
        if self.mode == "probe":
            clean = progress and not warned
            self.mode = "closed" if clean else "open"
            self.opened_at = None if clean else now
        elif self.mode in ("closed", "warn") and reached:
            self.mode, self.opened_at = "open", now
        elif self.mode == "closed" and warned:
            self.mode = "warn"
        elif self.mode == "warn" and progress and not warned:
            self.mode = "closed"

    def state(self) -> str:
        return {"closed": CLOSED, "warn": HALF_OPEN, "open": OPEN, "probe": HALF_OPEN}[self.mode]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(OPS, min_size=5, max_size=80), no_progress=st.integers(1, 4),
       same_error=st.integers(1, 5), denials=st.integers(1, 3),
       cooldown=st.sampled_from([0, 10, 100, 1800]))
def test_breaker_agrees_with_a_naive_model(ops: list, no_progress: int, same_error: int,
                                           denials: int, cooldown: int) -> None:
    clock = FakeClock()
    settings_ = {"no_progress": no_progress, "same_error": same_error,
                 "permission_denials": denials, "cooldown_seconds": cooldown}
    model = NaiveModel({k: v for k, v in settings_.items() if k != "cooldown_seconds"},
                       cooldown)
    with tempfile.TemporaryDirectory(prefix="clavain-breaker-") as folder:
        root = Path(folder)
        breaker = _breaker(root, clock, **settings_)
        for op in ops:
            if op[0] == "advance":
                clock.advance(op[1])
            elif op[0] == "restart":
                breaker = _breaker(root, clock, **settings_)
            elif op[0] == "reset":
                breaker.reset()
                model.reset()
            else:
                _, progress, error, denied = op
                allowed = breaker.allows()
                assert allowed == model.allows(clock.now)
                if allowed:
                    breaker.record(progress=progress, error=_error_text(error),
                                   permission_denials=denied)
                    model.record(clock.now, progress, None if error is None else error[0],
                                 denied > 0)
            status = breaker.status()
            assert status["state"] == model.state()
            assert {k: status[k] for k in model.thresholds} == model.streaks()
            # OPEN exactly while the model's opening is younger than the cooldown - or older,
            # when nobody has asked since (the move to a probe happens on allows/record).
            if model.mode == "open":
                assert status["cooldown_until"] == model.opened_at + cooldown
            assert (status["state"] == OPEN) == (model.mode == "open")
