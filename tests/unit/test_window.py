"""`guards.window`: the subscription's windows as the host reported them (record, current,
expiry), the share past which no fan-out starts (`share_denial`, `resume_at`), and a file
that is missing, hand-written, garbage, a FIFO or a symlink reading as no windows."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from clavain.guards import window
from clavain.guards.policy import resolve
from clavain.supervisor import claude_output

NOW = 1_800_000_000.0
HOUR = 3600.0


@pytest.fixture
def root(tmp_path: Path) -> str:
    folder = tmp_path / ".clavain"
    folder.mkdir()
    return str(folder)


def limits(share: float | None, **settings: object) -> dict:
    found, problems = resolve({"windowShareMax": share, **settings} if share is not None
                              else settings, {})
    assert problems == []
    return found


def five_hour(used: float, resets_in: float = 2 * HOUR + 13 * 60) -> dict:
    return {"five_hour": {"used_percent": used, "resets_at": NOW + resets_in}}


def test_record_then_current_then_expiry(root: str) -> None:
    assert window.current(root, NOW) == {}
    assert window.record(root, five_hour(41.5), window.STATUSLINE, NOW)
    live = window.current(root, NOW)
    assert live == {"five_hour": {"used_percent": 41.5, "resets_at": NOW + 2 * HOUR + 780,
                                  "source": "statusline", "seen_at": NOW}}
    stored = json.loads(Path(root, "window.json").read_text())
    assert stored["version"] == 1 and stored["windows"]["five_hour"]["used_percent"] == 41.5
    # Past its reset the window is no longer used.
    assert window.current(root, NOW + 2 * HOUR + 781) == {}
    assert window.resume_at(root, limits(10), NOW + 3 * HOUR) is None


def test_written_only_when_a_figure_changed(root: str) -> None:
    path = Path(root, "window.json")
    assert window.record(root, five_hour(50), window.STATUSLINE, NOW)
    before = path.stat().st_mtime_ns, path.stat().st_ino
    # The same figure again (the status line every 300 ms): no write, not even seen_at.
    assert not window.record(root, five_hour(50), window.STATUSLINE, NOW + 5)
    assert (path.stat().st_mtime_ns, path.stat().st_ino) == before
    assert window.current(root, NOW)["five_hour"]["seen_at"] == NOW


def test_within_one_window_the_share_only_grows(root: str) -> None:
    """An idle session's status line keeps repeating its old figure: it must not lower the
    newer one a runner reported for the same window."""
    window.record(root, five_hour(40), window.STATUSLINE, NOW)
    window.record(root, five_hour(95, resets_in=2 * HOUR + 790), window.RUNNER, NOW + 60)
    assert not window.record(root, five_hour(40), window.STATUSLINE, NOW + 120)
    assert window.current(root, NOW + 120)["five_hour"]["used_percent"] == 95
    assert window.current(root, NOW + 120)["five_hour"]["source"] == "runner"
    # A new window (a later reset) replaces it, even lower; an old window's figure does not.
    window.record(root, five_hour(3, resets_in=6 * HOUR - 60), window.STATUSLINE, NOW + 3 * HOUR)
    assert window.current(root, NOW + 3 * HOUR)["five_hour"]["used_percent"] == 3
    assert not window.record(root, five_hour(99), window.STATUSLINE, NOW + 3 * HOUR)


@pytest.mark.parametrize(("used", "denied"), [(79, False), (79.9, False), (80, True),
                                               (95, True)])
def test_share_denial_at_the_share(root: str, used: float, denied: bool) -> None:
    window.record(root, five_hour(used), window.STATUSLINE, NOW)
    line = window.share_denial(root, limits(80), NOW)
    if not denied:
        assert line is None
        assert window.resume_at(root, limits(80), NOW) is None
        return
    assert line is not None and "\n" not in line
    assert "5-hour window" in line and f"{used:g}% used" in line and "80%" in line
    assert "budgets.windowShareMax" in line and "(in 2 h 13 min)" in line
    import time

    assert time.strftime("%H:%M", time.localtime(NOW + 2 * HOUR + 780)) in line
    assert window.resume_at(root, limits(80), NOW) == NOW + 2 * HOUR + 780


def test_the_weekly_window_too_and_the_later_reset_wins(root: str) -> None:
    window.record(root, {"seven_day": {"used_percent": 85, "resets_at": NOW + 3 * 86400},
                         "five_hour": {"used_percent": 20, "resets_at": NOW + HOUR}},
                  window.STATUSLINE, NOW)
    line = window.share_denial(root, limits(80), NOW)
    assert line is not None and "weekly window is 85% used" in line and "in 3 d" in line
    assert window.resume_at(root, limits(80), NOW) == NOW + 3 * 86400
    window.record(root, five_hour(90, resets_in=HOUR), window.RUNNER, NOW)
    # Both past the share: fan-out resumes only when the last of them resets.
    assert window.resume_at(root, limits(80), NOW) == NOW + 3 * 86400
    assert window.share_denial(root, limits(90), NOW) is not None  # 5h at 90 ≥ 90
    assert window.share_denial(root, limits(91), NOW) is None


def test_no_share_or_budgets_off_denies_nothing(root: str) -> None:
    window.record(root, five_hour(100), window.STATUSLINE, NOW)
    assert window.share_denial(root, limits(None), NOW) is None
    assert window.share_denial(root, limits(50, enabled=False), NOW) is None
    assert window.share_denial(root, {}, NOW) is None


def test_a_reading_past_100_is_over_the_limit_not_garbage(root: str) -> None:
    """The host can report more than the window (an overage): it counts as 100 % and still
    denies, never as a reading to drop (which would let fan-out through)."""
    Path(root, "window.json").write_text(json.dumps({"windows": {"five_hour": {
        "used_percent": 950, "resets_at": NOW + HOUR, "seen_at": NOW}}}))
    assert window.current(root, NOW)["five_hour"]["used_percent"] == 100
    assert window.share_denial(root, limits(80), NOW) is not None


@pytest.mark.parametrize("content", [
    b"", b"not json", b"[1, 2]", b'{"windows": [1]}', b"\xff\xfe garbage",
    b'{"windows": {"five_hour": {"used_percent": "95", "resets_at": 1800003600}}}',
    b'{"windows": {"five_hour": {"used_percent": true, "resets_at": 1800003600,'
    b' "seen_at": 1800000000}}}',
    b'{"windows": {"five_hour": {"used_percent": 95, "resets_at": 1e308, "seen_at": 1e308}}}',
    b"[" * 100_000,
])
def test_bad_files_read_as_no_windows(root: str, content: bytes) -> None:
    Path(root, "window.json").write_bytes(content)
    assert window.current(root, NOW) == {}
    assert window.share_denial(root, limits(0), NOW) is None
    # And the next reading replaces what was there.
    assert window.record(root, five_hour(90), window.RUNNER, NOW)
    assert window.current(root, NOW)["five_hour"]["used_percent"] == 90


def test_a_hand_written_far_reset_is_not_waited_on(root: str) -> None:
    """A person (or a bug) writing a reset a month ahead must not hold a headless run for a
    month: a 5-hour window resets within hours."""
    Path(root, "window.json").write_text(json.dumps({"windows": {"five_hour": {
        "used_percent": 99, "resets_at": NOW + 30 * 86400, "seen_at": NOW + 30 * 86400 - 60}}}))
    assert window.current(root, NOW) == {}
    assert window.resume_at(root, limits(50), NOW) is None


def test_a_hand_written_file_of_the_right_shape_is_read(root: str) -> None:
    Path(root, "window.json").write_text(json.dumps({"windows": {"seven_day": {
        "used_percent": 81, "resets_at": NOW + 86400, "seen_at": NOW - 10, "source": "me"}},
        "unknown": 1}))
    assert window.current(root, NOW)["seven_day"]["used_percent"] == 81
    assert window.share_denial(root, limits(80), NOW) is not None


def test_a_fifo_never_blocks_and_is_not_written_through(root: str) -> None:
    fifo = Path(root, "window.json")
    os.mkfifo(fifo)
    result: list = []
    reader = threading.Thread(target=lambda: result.append(
        (window.current(root, NOW), window.share_denial(root, limits(0), NOW))), daemon=True)
    reader.start()
    reader.join(10)
    assert result == [({}, None)]  # returned at once: no writer was ever opened
    # A reading replaces the FIFO with a regular file (the atomic rename), never writes into it.
    assert window.record(root, five_hour(90), window.RUNNER, NOW)
    assert fifo.is_file() and window.current(root, NOW)["five_hour"]["used_percent"] == 90


def test_a_symlink_is_not_followed(root: str, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps({"windows": {"five_hour": {
        "used_percent": 99, "resets_at": NOW + HOUR, "seen_at": NOW}}}))
    Path(root, "window.json").symlink_to(elsewhere)
    assert window.current(root, NOW) == {}
    window.record(root, five_hour(10), window.RUNNER, NOW)
    assert json.loads(elsewhere.read_text())["windows"]["five_hour"]["used_percent"] == 99
    assert not Path(root, "window.json").is_symlink()


def test_a_missing_state_folder_is_not_created(tmp_path: Path) -> None:
    gone = str(tmp_path / "gone" / ".clavain")
    with pytest.raises(OSError):
        window.record(gone, five_hour(10), window.STATUSLINE, NOW)
    assert not os.path.exists(gone)


def test_readings_from_the_host_shapes() -> None:
    payload = {"rate_limits": {
        "five_hour": {"used_percentage": 95, "resets_at": NOW + HOUR},
        "seven_day": {"used_percentage": 12.5, "resets_at": NOW + 86400},
        "spend_limit": {"used_percentage": 50, "resets_at": NOW + HOUR},  # a gateway's dollars
        "seven_day_opus": {"used_percentage": "a lot", "resets_at": NOW}}}
    assert window.from_statusline(payload, NOW) == {
        "five_hour": {"used_percent": 95.0, "resets_at": NOW + HOUR},
        "seven_day": {"used_percent": 12.5, "resets_at": NOW + 86400}}
    assert window.from_statusline({"rate_limits": None}, NOW) == {}
    assert window.from_statusline([], NOW) == {}
    info = {"status": "allowed_warning", "resetsAt": NOW + HOUR, "rateLimitType": "five_hour",
            "utilization": 0.95, "unifiedWindows": {
                "five_hour": {"utilization": 0.95, "resetsAt": NOW + HOUR, "status": "allowed"},
                "seven_day": {"utilization": 0.3, "resetsAt": NOW + 86400},
                "overage": {"utilization": 1.0, "resetsAt": NOW + HOUR}}}
    assert window.from_rate_limit_info(info, NOW) == {
        "five_hour": {"used_percent": 95.0, "resets_at": NOW + HOUR},
        "seven_day": {"used_percent": 30.0, "resets_at": NOW + 86400}}
    # Without unifiedWindows: the one window it is about; rejected is used up.
    assert window.from_rate_limit_info({"status": "rejected", "resetsAt": NOW + HOUR,
                                        "rateLimitType": "five_hour"}, NOW) == {
        "five_hour": {"used_percent": 100.0, "resets_at": NOW + HOUR}}
    assert window.from_rate_limit_info("rejected", NOW) == {}


def test_a_runner_output_is_recorded_from_its_events_only(root: str) -> None:
    event = {"type": "rate_limit_event", "session_id": "x", "rate_limit_info": {
        "status": "allowed_warning", "rateLimitType": "five_hour", "utilization": 0.95,
        "resetsAt": NOW + HOUR}}
    later = {**event, "rate_limit_info": {**event["rate_limit_info"], "utilization": 0.97}}
    stdout = "\n".join(json.dumps(m) for m in (event, later, {"type": "result", "result": "ok"}))
    assert claude_output.record_runner_output(root, stdout, NOW)
    assert window.current(root, NOW)["five_hour"] == {
        "used_percent": 97.0, "resets_at": NOW + HOUR, "source": "runner", "seen_at": NOW}
    # The model's own words about limits are not an event.
    said = json.dumps({"type": "result", "result": '{"rate_limit_info": {"utilization": 1}}'})
    assert not claude_output.record_runner_output(root, said, NOW + 1)
    assert not claude_output.record_runner_output(root, "rate_limit garbage {", NOW + 1)


def test_a_stop_is_recorded_and_denies_nothing(root: str) -> None:
    window.record(root, five_hour(50), window.STATUSLINE, NOW)
    window.record_stop(root, "rate_limit", "s-1", NOW + 5)
    data = window.load(root)
    assert data["stop"] == {"error": "rate_limit", "seen_at": NOW + 5, "session_id": "s-1"}
    assert data["windows"]["five_hour"]["used_percent"] == 50  # kept
    assert window.share_denial(root, limits(80), NOW + 5) is None
    assert window.status(root, NOW + 5, limits(40))["windows"][0]["over"] is True


@pytest.mark.parametrize(("seconds", "said"), [
    (0, "in 0 s"), (45, "in 45 s"), (61, "in 2 min"), (3600, "in 1 h"),
    (2 * 3600 + 13 * 60, "in 2 h 13 min"), (3 * 86400 + 4 * 3600, "in 3 d 4 h")])
def test_until(seconds: float, said: str) -> None:
    assert window.until(seconds) == said
