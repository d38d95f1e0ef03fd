"""Reserve / settle / charge sequences on a real SQLite file against a naive model: what is
spent plus what is reserved never passes the cap, and each step agrees with the model."""

from __future__ import annotations

import itertools
from contextlib import closing
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clavain.guards import reservations
from clavain.paths import StatePaths
from clavain.store.db import connect
from clavain.supervisor.routes import Route
from clavain.supervisor.run_reserve import NoRoom, RunReserve, charge_held

ROUTE = Route("executor", "stand-in", None)
_runs = itertools.count()


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> StatePaths:
    root = Path(tmp_path_factory.mktemp("reserve"))
    (root / ".clavain").mkdir()
    return StatePaths(root / ".clavain", project=root)


reserve_step = st.tuples(st.just("reserve"), st.floats(0.01, 4.0), st.integers(1_000, 400_000),
                         st.integers(1, 8))
settle_step = st.tuples(st.just("settle"), st.integers(0, 20), st.floats(0.0, 1.0),
                        st.just(0))
charge_step = st.tuples(st.just("charge"), st.integers(0, 20), st.just(0.0), st.just(0))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cap=st.floats(0.5, 15.0), token_cap=st.integers(100_000, 2_000_000),
       steps=st.lists(st.one_of(reserve_step, settle_step, charge_step), max_size=25))
def test_spent_and_reserved_never_pass_the_cap(state: StatePaths, cap: float, token_cap: int,
                                               steps: list) -> None:
    key = f"run:prop-{next(_runs)}"
    limits = {"enabled": True, "maxCostUsd": cap, "maxTokens": token_cap}
    meter = RunReserve(state, key, limits, {})
    spent = {"cost_usd": 0.0, "tokens": 0}
    live: dict[str, dict] = {}  # holder → its share (held or charged)
    for number, (op, a, b, idle) in enumerate(steps):
        if op == "reserve":
            projected = {"cost_usd": a, "tokens": b, "source": "test"}
            meter.projected = lambda _route, p=projected: p  # type: ignore[method-assign]
            unreserved = {"cost_usd": cap - spent["cost_usd"]
                          - sum(s["cost_usd"] for s in live.values()),
                          "tokens": token_cap - spent["tokens"]
                          - sum(s["tokens"] for s in live.values())}
            fits = all(unreserved[c] + 1e-9 >= projected[c] for c in unreserved)
            try:
                share = meter.reserve({"id": f"n{number}", "attempts": 0}, ROUTE, idle=idle)
            except NoRoom:
                assert not fits
            else:
                assert fits and share is not None
                expected = min(unreserved["cost_usd"],
                               max(a, min(unreserved["cost_usd"] / idle, a * 4)))
                assert share.cost_usd == pytest.approx(expected)
                live[share.holder] = {"cost_usd": share.cost_usd, "tokens": share.tokens,
                                      "charged": False}
        elif live:
            holder = sorted(live)[a % len(live)]
            if op == "settle" and not live[holder]["charged"]:
                # A runner that honours its share spends at most its share.
                used = {"cost_usd": live[holder]["cost_usd"] * b,
                        "tokens": int(live[holder]["tokens"] * b)}
                meter.settle(holder, tokens=used["tokens"], cost_usd=used["cost_usd"])
                del live[holder]
                for column in spent:
                    spent[column] += used[column]
            elif op == "charge":
                meter.charge(holder)  # no transcript: it stays, counted as spent
                live[holder]["charged"] = True
        conn = connect(state.db)
        try:
            used, held = reservations.spent(conn, key), reservations.reserved(conn, key)
        finally:
            conn.close()
        assert used["cost_usd"] == pytest.approx(spent["cost_usd"])
        assert held["count"] == len(live)
        assert held["cost_usd"] == pytest.approx(sum(s["cost_usd"] for s in live.values()))
        assert used["cost_usd"] + held["cost_usd"] <= cap + 1e-6
        assert used["tokens"] + held["tokens"] <= token_cap
        ledger = meter.ledger()
        assert ledger["cost_usd"] == pytest.approx(
            spent["cost_usd"] + sum(s["cost_usd"] for s in live.values() if s["charged"]),
            abs=1e-5)


def test_a_runner_still_running_after_recovery_keeps_its_reservation_held(
        state: StatePaths) -> None:
    """Recovery charges the reservations of a dead supervisor's runners, but not one whose
    runner could not be stopped: it still spends, and measuring its partial transcript now
    would let the rest go unseen."""
    key = f"run:prop-{next(_runs)}"
    meter = RunReserve(state, key, {"enabled": True, "maxCostUsd": 10.0, "maxTokens": 10 ** 6},
                       {})
    meter.projected = lambda _route: {"cost_usd": 1.0, "tokens": 100,  # type: ignore
                                      "source": "test"}
    dead = meter.reserve({"id": "dead", "attempts": 0}, ROUTE, idle=2)
    alive = meter.reserve({"id": "alive", "attempts": 0}, ROUTE, idle=2)
    assert dead and alive
    assert charge_held(state, key, running=frozenset({"alive"})) == [dead.holder]
    with closing(connect(state.db)) as conn:
        states = {r["holder"]: r["state"] for r in reservations.listed(conn, key)}
    assert states == {dead.holder: "charged", alive.holder: "held"}


def test_a_history_that_measured_no_dollars_projects_the_default(state: StatePaths) -> None:
    """Runners that report tokens but no dollars would project $0: a share of $0 would stop a
    claude runner before it begins (`--max-budget-usd 0`), so the default stands in."""
    timeline = [{"llm": True, "role": ROUTE.role, "model": ROUTE.model, "tokens": 500,
                 "cost_usd": 0.0}]
    meter = RunReserve(state, "run:zero", {"enabled": True, "maxCostUsd": 10.0,
                                           "maxTokens": 10 ** 6},
                       {"supervisor": {"projection": {"tokensPerCall": 40000,
                                                      "costPerCallUsd": 0.2}}},
                       lambda: timeline)
    projected = meter.projected(ROUTE)
    assert projected is not None
    assert projected["tokens"] == 500 and projected["cost_usd"] == 0.2
