"""A backoff ends at `blocked_until`: a node blocked until exactly `now` is runnable, one blocked
until a millisecond later (the stored precision) is not."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from clavain.clock import now_iso
from clavain.workgraph import claim_pick, claims, edits
from tests.sql import run_sql

NOW = datetime(2030, 1, 1, 12, 0, 0, 500_000, tzinfo=timezone.utc)
ONE_MS = timedelta(milliseconds=1)


def _block(conn, node_id: str, until: datetime) -> None:
    run_sql(conn, "UPDATE nodes SET blocked_until = ? WHERE id = ?", (now_iso(until), node_id))


@pytest.fixture
def blocked(g, conn):
    """`at-now` blocked until exactly NOW, `later` until 1 ms after; `later` sorts first by
    rank (verify before task), so picking it would show."""
    edits.add_nodes(g, [{"id": "later", "type": "verify"}, {"id": "at-now", "type": "task"}])
    _block(conn, "at-now", NOW)
    _block(conn, "later", NOW + ONE_MS)
    return g


def test_select_next_takes_a_node_blocked_until_exactly_now(blocked) -> None:
    assert claim_pick.select_next(blocked, now=NOW) == "at-now"
    assert claim_pick.select_next(blocked, now=NOW - ONE_MS) is None
    assert claim_pick.select_next(blocked, now=NOW + ONE_MS) == "later"


def test_claim_next_takes_a_node_blocked_until_exactly_now(blocked) -> None:
    assert claims.claim_next(blocked, run_id="r", now=NOW - ONE_MS) is None
    claimed = claims.claim_next(blocked, run_id="r", now=NOW)
    assert claimed is not None and claimed["id"] == "at-now"
    # The other is still in its backoff at the same instant.
    assert claims.claim_next(blocked, run_id="r", now=NOW) is None
    assert claim_pick.select_next(blocked, now=NOW) is None
    claimed = claims.claim_next(blocked, run_id="r", now=NOW + ONE_MS)
    assert claimed is not None and claimed["id"] == "later"
