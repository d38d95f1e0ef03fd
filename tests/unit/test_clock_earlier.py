"""`clock.earlier_iso` moves a stored time back without `datetime` (SubagentStop measures from a
run's start on every reviewer) and agrees with `datetime` to the millisecond (issue 37)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clavain.clock import _epoch_ms, earlier_iso, iso_at, now_iso

# 1000-01-01 to 9999-12-31, in milliseconds since the epoch.
FIRST_MS, LAST_MS = -30610224000000, 253402300799999


def _by_datetime(stamp: str, seconds: int) -> str:
    return now_iso(datetime.fromisoformat(stamp.replace("Z", "+00:00"))
                   - timedelta(seconds=seconds))


@given(st.integers(FIRST_MS + 86_400_000, LAST_MS), st.integers(0, 86_400),
       st.sampled_from(["ms", "s", "us"]))
def test_it_agrees_with_datetime(moment_ms: int, seconds: int, form: str) -> None:
    moment = datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(milliseconds=moment_ms)
    stamp = {"ms": now_iso(moment), "s": moment.strftime("%Y-%m-%dT%H:%M:%SZ"),
             "us": moment.isoformat(timespec="microseconds").replace("+00:00", "Z")}[form]
    assert _epoch_ms(stamp) is not None
    assert earlier_iso(stamp, seconds) == _by_datetime(stamp, seconds)


def test_what_it_writes_is_now_iso_s_form() -> None:
    assert earlier_iso(iso_at(1764374400.5), 60) == iso_at(1764374340.5)
    # Into a year below 1000: written with four digits, as `datetime` writes it.
    assert earlier_iso("1000-01-01T00:00:30.000Z", 60) == "0999-12-31T23:59:30.000Z"


@pytest.mark.parametrize("stamp", ["2026-02-30T00:00:00.000Z", "2026-11-21T25:00:00Z",
                                   "2026-11-21T20:30:00+02:00", "2026-11-21T20:30:00.1Z",
                                   "２０２６-11-21T20:30:00Z", "0999-11-21T20:30:00Z", "x"])
def test_other_forms_go_through_datetime(stamp: str) -> None:
    """Not `now_iso`'s form, or no time at all: `datetime` decides, as it did before."""
    assert _epoch_ms(stamp) is None
    try:
        expected = _by_datetime(stamp, 60)
    except ValueError:
        with pytest.raises(ValueError):
            earlier_iso(stamp, 60)
        return
    assert earlier_iso(stamp, 60) == expected
