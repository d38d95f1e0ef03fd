"""A supervised run never passes its cap: each node that calls a model starts only with its share
of what is left reserved (`supervisor.run_reserve`), the share is the runner's hard limit, a
runner that dies unmeasured is charged, and the run's cost is one figure everywhere.

Real SQLite, real git, real runner processes (kit.COST_RUNNER: a stand-in that spends known
dollars per node and reports them in claude's JSON shape)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
from contextlib import closing
from pathlib import Path

import pytest

from clavain.store.db import connect
from clavain.supervisor.run_budget import run_key
from clavain.supervisor.run_reserve import ledger_of
from tests.supervisor import kit

pytestmark = pytest.mark.slow
CAP = 12.0
UNCAPPED = {"supervisor": {"projection": {"shareMaxMultiple": 1000}}}


def _project(tmp_path: Path, *, honour: bool, cap: float = CAP, nodes: int = 40,
             sleep: float = 0.0, extra: dict | None = None) -> kit.StatePaths:
    runner = kit.script(tmp_path / "cost.py", kit.COST_RUNNER)
    env = f"FAKE_HONOUR={int(honour)} FAKE_SLEEP={sleep} FAKE_LOG={tmp_path / 'calls.log'}"
    # Shares as the split alone makes them (no ceiling in projections), unless a test sets one.
    config = {"runners": {"cost": {"command": f"{env} {runner}"}},
              "budgets": {"maxCostUsd": cap}, **UNCAPPED}
    kit._merge(config, extra or {})
    state = kit.make_project(tmp_path / "p", config)
    kit.add(state, kit.cost_tasks(nodes), scaffold=False)
    return state


def _calls(tmp_path: Path) -> list[dict]:
    path = tmp_path / "calls.log"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _assert_one_figure(state: kit.StatePaths, report: dict) -> float:
    said = kit.figures(state, report)
    assert len({round(value, 6) for value in said.values()}) == 1, said
    return said["ledger"]


@pytest.mark.parametrize("workers", [1, 4, 8])
def test_runners_that_honour_their_share_never_pass_the_cap(tmp_path: Path,
                                                            workers: int) -> None:
    state = _project(tmp_path, honour=True)
    events: list[dict] = []
    report = kit.run(state, events, runner="cost", workers=workers)
    assert report["status"] == "budget" and report["exit_code"] == 3, report["message"]
    spent = _assert_one_figure(state, report)
    assert spent <= CAP + 1e-9
    # It ended only once nothing was held that could come back: what is left is less than one
    # node's projection (the run's own median, at most the dearest node's $2.50).
    assert CAP - spent < 2.5
    calls = _calls(tmp_path)
    # Every runner was told its share, and the shares never summed past the cap.
    assert calls and all(float(c["share_env"]) > 0 for c in calls)
    started = [e for e in events if e["event"] == "started"]
    assert all(e["share_usd"] for e in started)
    if workers == 1:  # one worker gets all that is left
        assert started[0]["share_usd"] == pytest.approx(CAP)
    else:  # N workers split it
        assert started[0]["share_usd"] == pytest.approx(CAP / workers)
    # The message says why it stopped, what was done and left, and the figures at the end.
    message = report["message"]
    # Nothing more fit (or the last node a retry gave more room used the rest up).
    assert "nothing more started" in message
    assert "is unreserved" in message or "budget spent" in message
    assert f"{len(report['done'])} node(s) done" in message
    assert f"spent ${spent:.4f} of ${CAP:.4f}" in message
    with closing(connect(state.db)) as conn:  # nothing is left reserved once the run ended
        assert conn.execute("SELECT count(*) FROM budget_reservations").fetchone()[0] == 0


def test_runners_that_ignore_their_share_are_stopped_at_the_cap(tmp_path: Path) -> None:
    state = _project(tmp_path, honour=False, sleep=0.3)
    events: list[dict] = []
    report = kit.run(state, events, runner="cost", workers=4)
    assert report["status"] == "budget"
    spent = _assert_one_figure(state, report)
    worst = max(kit.node_cost(f"task-{n:03d}") for n in range(40))
    # What a runner spends past its share is measured only when it reports: the cap can be
    # passed by the runners at work then, never by one started after it.
    assert spent <= CAP + 4 * worst, spent
    capped = [e for e in events if e["event"] == "cap_reached"]
    stopped = [e for e in events if e["event"] == "finished"
               and "reached its cap" in str(e.get("summary"))]
    if spent >= CAP:
        assert capped, "the supervisor must stop configured runners at the cap"
    for event in stopped:  # a stopped runner's node went back unspent, its share charged
        assert kit.node(state, event["node"])["attempts"] == 0
        assert event.get("charged_usd")
    print(f"ignoring runners, 4 workers: spent ${spent:.4f} of ${CAP:.2f}")


def test_a_configured_runner_still_at_work_is_stopped_once_the_spend_reaches_the_cap(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    costs = tmp_path / "costs.json"
    costs.write_text(json.dumps({"task-000": 4.0, "task-001": 0.1}))
    monkeypatch.setenv("FAKE_COSTS", str(costs))
    monkeypatch.setenv("FAKE_SLOW", "task-001")
    state = _project(tmp_path, honour=False, nodes=2, cap=3.0)
    events: list[dict] = []
    report = kit.run(state, events, runner="cost", workers=2)
    assert [e["message"] for e in events if e["event"] == "cap_reached"] == [
        "dollars: $4.0000 spent of the $3.0000 cap (maxCostUsd)"]
    slow = next(e for e in events if e["event"] == "finished" and e["node"] == "task-001")
    assert slow["outcome"] == "released"
    assert slow["summary"] == "stopped: the run's spend reached its cap"
    assert slow["charged_usd"] == pytest.approx(1.5)  # its share: half of what was left
    assert kit.node(state, "task-001")["attempts"] == 0
    assert report["status"] == "budget"
    assert _assert_one_figure(state, report) == pytest.approx(5.5)


def test_claude_gets_its_share_as_a_hard_limit_and_stops_at_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = kit.script(tmp_path / "claude", kit.COST_RUNNER)
    costs = tmp_path / "costs.json"
    costs.write_text(json.dumps({"task-000": 0.3, "task-001": 5.0, "task-002": 0.3}))
    state = kit.make_project(tmp_path / "p", {"budgets": {"maxCostUsd": 1.0}, **UNCAPPED})
    kit.add(state, kit.cost_tasks(3), scaffold=False)
    monkeypatch.setenv("CLAVAIN_CLAUDE_BIN", str(fake))
    monkeypatch.setenv("FAKE_COSTS", str(costs))
    monkeypatch.setenv("FAKE_LOG", str(tmp_path / "calls.log"))
    events: list[dict] = []
    report = kit.run(state, events, runner="claude")
    calls = _calls(tmp_path)
    first = calls[0]["argv"]
    assert first[first.index("--max-budget-usd") + 1] == "1.0000"  # all that was left
    session = first[first.index("--session-id") + 1]
    assert len(session) == 36 and session.count("-") == 4
    assert "--max-turns" in first
    # task-001 (costs $5) stops at its share ($0.70): given back unspent, its usage counted.
    assert calls[1]["node"] == "task-001" and calls[1]["share"] == pytest.approx(0.7)
    finished = [e for e in events if e["event"] == "finished"]
    assert finished[1]["outcome"] == "budget_share"
    assert kit.node(state, "task-001")["attempts"] == 0
    assert report["status"] == "budget"
    assert _assert_one_figure(state, report) == pytest.approx(1.0)


def test_a_runner_killed_before_it_reported_is_charged_its_share(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state = _project(tmp_path, honour=True, nodes=3, cap=3.0)
    monkeypatch.setenv("FAKE_SELF_KILL", "task-000")
    report = kit.run(state, runner="cost")
    ledger = ledger_of(state, run_key(report["run_id"]))
    assert ledger["charged"]["count"] == 1
    assert ledger["charged"]["cost_usd"] == pytest.approx(3.0)  # its share: all that was left
    assert report["status"] == "budget"  # nothing more fits: a dead runner counts as spent
    assert _assert_one_figure(state, report) == pytest.approx(3.0)


def test_a_claude_runner_killed_unmeasured_is_measured_from_its_transcript(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """kill -9 of the supervisor mid-run: the next run charges the dead runner's reservation;
    once its transcript is there, a run measures it instead."""
    fake = kit.script(tmp_path / "claude", kit.COST_RUNNER)
    home = tmp_path / "home"
    home.mkdir()
    state = kit.make_project(tmp_path / "p", {
        "budgets": {"maxCostUsd": 2.0}, **UNCAPPED,
        "runners": {"free": {"command": "echo '<result>{\"status\": \"success\", "
                                        "\"summary\": \"ok\"}</result>'"}}})
    kit.add(state, kit.cost_tasks(2), scaffold=False)
    hang = tmp_path / "hang.pid"
    proc = kit.start_cli(state, "run", "--graph", "default", CLAVAIN_CLAUDE_BIN=str(fake),
                         FAKE_HANG_FILE=str(hang), HOME=str(home))
    kit.wait_until(lambda: hang.exists() and hang.read_text(), what="the runner started")
    run_id = next(p.parent.name for p in state.runs.glob("*/supervisor.json"))
    key = run_key(run_id)
    with closing(connect(state.db)) as conn:
        held = [dict(r) for r in conn.execute("SELECT * FROM budget_reservations")]
    assert [(r["holder"], r["state"], r["cost_usd"]) for r in held] == [
        ("task-000#1", "held", 2.0)]
    detail = json.loads(held[0]["detail_json"])
    transcript = Path(detail["transcript"])
    # The path claude 2.1.330 writes (its HOME, the cwd with every non-alphanumeric → '-').
    mangled = "".join(c if c.isalnum() else "-" for c in str(state.project))
    assert transcript == home / ".claude" / "projects" / mangled / \
        f"{detail['session_id']}.jsonl"
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)

    done, report = kit.run_cli_json(state, "run", "--resume", run_id, "--runner", "free",
                                    HOME=str(home))
    assert report["recovered"][0]["charged"] == ["task-000#1"]
    assert report["recovered"][0]["measured"] == []
    assert report["status"] == "budget" and done.returncode == 3  # charged: all that was left
    assert "charged" in report["message"]
    charged = ledger_of(state, key)
    assert charged["charged"] == {"count": 1, "tokens": charged["charged"]["tokens"],
                                  "cost_usd": 2.0}
    _, status = kit.run_cli_json(state, "budget", "status", "--run", run_id)
    assert status["reservations"]["reserved"]["charged"]["count"] == 1
    assert status["reservations"]["headroom"]["cost_usd"] == 0

    # Its transcript turns up (what claude wrote before it died): measured, not charged.
    transcript.parent.mkdir(parents=True)
    line = {"type": "assistant", "requestId": "req_1", "message": {
        "id": "msg_1", "model": "claude-sonnet-4-5", "role": "assistant",
        "usage": {"input_tokens": 10000, "output_tokens": 1000,
                  "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}}
    transcript.write_text(json.dumps(line) + "\n")
    done, report = kit.run_cli_json(state, "run", "--resume", run_id, "--runner", "free",
                                    HOME=str(home))
    assert report["status"] == "complete", report["message"]
    measured = ledger_of(state, key)
    assert measured["charged"]["count"] == 0 and measured["held"]["count"] == 0
    assert 0 < measured["cost_usd"] < 2.0
    assert _assert_one_figure(state, report) == pytest.approx(measured["cost_usd"])


def test_a_meter_that_cannot_be_written_stops_dispatch_with_one_line(tmp_path: Path) -> None:
    state = _project(tmp_path, honour=True, nodes=3)
    with closing(connect(state.db)) as conn:
        conn.execute("CREATE TRIGGER refuse BEFORE INSERT ON budget_reservations "
                     "BEGIN SELECT RAISE(ABORT, 'the meter refuses'); END")
    report = kit.run(state, runner="cost")
    assert report["status"] == "budget"
    first = report["message"].split("; ")[0]
    assert "the run's budget could not be reserved" in first and "the meter refuses" in first
    assert "\n" not in report["message"]
    assert _calls(tmp_path) == []  # nothing started
    assert all(n["attempts"] == 0 and n["status"] == "open" for n in kit.nodes(state).values())


def test_a_meter_that_cannot_be_read_stops_dispatch(tmp_path: Path) -> None:
    state = _project(tmp_path, honour=True, nodes=2)
    with closing(connect(state.db)) as conn:
        conn.execute("ALTER TABLE budget_reservations RENAME TO budget_reservations_gone")
    report = kit.run(state, runner="cost")
    assert report["status"] == "budget"
    assert "budget could not be" in report["message"]
    assert _calls(tmp_path) == []


def test_a_run_already_at_its_cap_starts_nothing(tmp_path: Path) -> None:
    state = _project(tmp_path, honour=True, nodes=2, cap=1.0)
    with closing(connect(state.db)) as conn:
        conn.execute("INSERT INTO budget_runs (run_key, started_at, updated_at, cost_usd) "
                     "VALUES ('run:full', 'x', 'x', 0.95)")
    report = kit.run(state, runner="cost", run_id="full")
    assert report["status"] == "budget" and _calls(tmp_path) == []
    assert "only $0.0500 of the $1.0000 cap" in report["message"]


def test_dry_run_shows_the_reservation_plan(tmp_path: Path) -> None:
    state = _project(tmp_path, honour=True, nodes=8, cap=1.0)
    done = subprocess.run([str(kit.REPO / "bin" / "clavain"), "run", "--dry-run", "--runner",
                           "cost"], cwd=state.project, env=kit.cli_env(state),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    # $0.20 per call by default: five fit $1.00, the sixth does not.
    assert "Fit the budget: 5 of 8 pending node(s) in dispatch order; nothing starts from " \
        "task-005 on" in done.stdout
    _, plan = kit.run_cli_json(state, "run", "--dry-run", "--runner", "cost")
    reserve = plan["reservation"]
    assert (reserve["fits"], reserve["pending"], reserve["first_over"]) == (5, 8, "task-005")
    assert [row["fits"] for row in reserve["nodes"]] == [True] * 5 + [False] * 3
    assert reserve["headroom"]["cost_usd"] == pytest.approx(1.0)


def test_cli_output_says_the_ledgers_figure(tmp_path: Path) -> None:
    state = _project(tmp_path, honour=True, nodes=6, cap=1.0)
    done = subprocess.run([str(kit.REPO / "bin" / "clavain"), "run", "--runner", "cost",
                           "--workers", "2"], cwd=state.project, env=kit.cli_env(state),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stderr
    run_id = next(p.parent.name for p in state.runs.glob("*/supervisor.json"))
    figure = ledger_of(state, run_key(run_id))["cost_usd"]
    assert f"cost: ${figure:.4f}" in done.stdout
    assert f"Spend (the run's ledger): ${figure:.4f}" in done.stdout
    status = subprocess.run([str(kit.REPO / "bin" / "clavain"), "budget", "status", "--run",
                             run_id], cwd=state.project, env=kit.cli_env(state),
                            capture_output=True, text=True, timeout=60)
    assert f"Spent: ${figure:.4f}" in status.stdout and "Headroom: $" in status.stdout


def test_an_unreadable_budget_database_fails_closed(tmp_path: Path) -> None:
    """The reservation's own connection cannot open the file: nothing starts."""
    state = _project(tmp_path, honour=True, nodes=2)
    from clavain.supervisor import run_reserve

    def broken(*_a: object, **_k: object) -> sqlite3.Connection:
        raise sqlite3.DatabaseError("file is not a database")

    original = run_reserve.connect
    run_reserve.connect = broken
    try:
        report = kit.run(state, runner="cost")
    finally:
        run_reserve.connect = original
    assert report["status"] == "budget"
    assert "could not be reserved (DatabaseError: file is not a database)" in report["message"]
    assert _calls(tmp_path) == []


def test_no_runner_holds_more_than_a_few_projections(tmp_path: Path) -> None:
    """`supervisor.projection.shareMaxMultiple`: one worker is not given all that is left, so a
    runner that dies unmeasured is charged at most that many projections."""
    state = _project(tmp_path, honour=True, nodes=3, extra={
        "supervisor": {"projection": {"shareMaxMultiple": 2, "costPerCallUsd": 1.0}}})
    events: list[dict] = []
    kit.run(state, events, runner="cost", workers=1)
    started = [e for e in events if e["event"] == "started"]
    # The first node has no history: projected at the default $1.00, given 2 × $1.00.
    assert started[0]["share_usd"] == pytest.approx(2.0)
    assert all(e["share_usd"] <= CAP for e in started)


def test_a_node_stopped_at_its_share_needs_twice_that_next_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A runner stopped at its share gives its node back unspent, and the node's next try
    reserves twice that share — so it gets more room, or the run ends on its budget; it is
    never re-dispatched at the same share until the budget is gone."""
    fake = kit.script(tmp_path / "claude", kit.COST_RUNNER)
    costs = tmp_path / "costs.json"
    costs.write_text(json.dumps({"task-000": 1.5}))
    state = kit.make_project(tmp_path / "p", {
        "budgets": {"maxCostUsd": 100.0},
        "supervisor": {"projection": {"shareMaxMultiple": 2, "costPerCallUsd": 0.2}}})
    kit.add(state, kit.cost_tasks(1), scaffold=False)
    monkeypatch.setenv("CLAVAIN_CLAUDE_BIN", str(fake))
    monkeypatch.setenv("FAKE_COSTS", str(costs))
    monkeypatch.setenv("FAKE_LOG", str(tmp_path / "calls.log"))
    events: list[dict] = []
    report = kit.run(state, events, runner="claude")
    shares = [e["share_usd"] for e in events if e["event"] == "started"]
    finished = [e["outcome"] for e in events if e["event"] == "finished"]
    # $0.40 (2 × the $0.20 projection); then projected at twice that, $0.80, given 2 × $0.80:
    # the node fits and is done.
    assert shares == [pytest.approx(0.4), pytest.approx(1.6)]
    assert finished == ["budget_share", "done"]
    assert report["status"] == "complete"
    assert kit.node(state, "task-000")["attempts"] == 0
