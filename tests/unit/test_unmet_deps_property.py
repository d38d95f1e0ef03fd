"""`nodes.unmet_deps` is kept by triggers; hypothesis drives random edits through raw SQL and
compares every node's count with a recount from the tables after each step.

The mutant tests break one trigger the way a careless edit would (forgetting `settled` edges, or
dropping the delete-edges-first trigger) and require the same property to fail: proof that the
generated sequences reach the cases the triggers exist for.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from importlib import resources

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from clavain.clock import now_iso
from clavain.paths import StatePaths
from clavain.store.db import connect
from tests.sql import run_sql

STATUSES = ("open", "in_progress", "done", "failed", "needs_human", "cancelled")
# Two graphs holding the same ids: a trigger that forgets the graph moves the other's counts.
# Most steps stay in one graph, so edges (both ends in one graph) remain as common as before.
GRAPH = st.sampled_from(("default", "default", "default", "other"))
IDS = st.integers(0, 3).map(lambda n: f"n{n}")

_INSERT_NODE = st.tuples(st.just("insert_node"), GRAPH, IDS, st.sampled_from(STATUSES))
_INSERT_EDGE = st.tuples(st.just("insert_edge"), GRAPH, IDS, IDS,
                         st.sampled_from(("done", "settled")))
_SET_STATUS = st.tuples(st.just("set_status"), GRAPH, IDS, st.sampled_from(STATUSES))
# Edges and status changes are what move the counts, so they come up most often.
OPERATION = st.one_of(
    _INSERT_NODE, _INSERT_EDGE, _INSERT_EDGE, _SET_STATUS, _SET_STATUS, _SET_STATUS,
    st.tuples(st.just("delete_edge"), GRAPH, IDS, IDS),
    st.tuples(st.just("delete_node"), GRAPH, IDS),
)
# Every example starts with a few nodes so edges (which need both ends) are common from step one.
STARTING_NODES = st.lists(_INSERT_NODE, min_size=3, max_size=6)
OPERATIONS = st.tuples(STARTING_NODES, st.lists(OPERATION, min_size=20, max_size=50)).map(
    lambda parts: parts[0] + parts[1])


def _exists(conn: sqlite3.Connection, sql: str, *params: str) -> bool:
    return run_sql(conn, sql, params).fetchone() is not None


def _apply(conn: sqlite3.Connection, operation: tuple[str, ...]) -> None:
    kind, graph_id, *args = operation
    if kind == "insert_node":
        node_id, status = args
        if not _exists(conn, "SELECT 1 FROM nodes WHERE graph_id = ? AND id = ?",
                       graph_id, node_id):
            at = now_iso()
            run_sql(conn, "INSERT INTO nodes (graph_id, id, type, status, created_at, updated_at) "
                         "VALUES (?, ?, 'task', ?, ?, ?)", (graph_id, node_id, status, at, at))
    elif kind == "insert_edge":
        node_id, depends_on, edge_kind = args
        both_exist = run_sql(conn, "SELECT count(*) FROM nodes WHERE graph_id = ? AND id IN (?, ?)",
                                  (graph_id, node_id, depends_on)).fetchone()[0] == 2
        if node_id != depends_on and both_exist and not _exists(
                conn, "SELECT 1 FROM deps WHERE graph_id = ? AND node_id = ? "
                "AND depends_on_id = ?", graph_id, node_id, depends_on):
            run_sql(conn, "INSERT INTO deps (graph_id, node_id, depends_on_id, kind) "
                         "VALUES (?, ?, ?, ?)", (graph_id, node_id, depends_on, edge_kind))
    elif kind == "delete_edge":
        run_sql(conn, "DELETE FROM deps WHERE graph_id = ? AND node_id = ? AND depends_on_id = ?",
                     (graph_id, *args))
    elif kind == "delete_node":
        run_sql(conn, "DELETE FROM nodes WHERE graph_id = ? AND id = ?", (graph_id, *args))
    else:
        node_id, status = args
        run_sql(conn, "UPDATE nodes SET status = ? WHERE graph_id = ? AND id = ?",
                     (status, graph_id, node_id))


def _recount(conn: sqlite3.Connection) -> dict[tuple[str, str], int]:
    """What unmet_deps must be, from the rows alone: edges whose dependency (in the same graph)
    is not satisfied."""
    status = {(row["graph_id"], row["id"]): row["status"]
              for row in run_sql(conn, "SELECT graph_id, id, status FROM nodes")}
    unmet = dict.fromkeys(status, 0)
    for edge in run_sql(conn, "SELECT graph_id, node_id, depends_on_id, kind FROM deps"):
        dep_status = status[(edge["graph_id"], edge["depends_on_id"])]
        if not (dep_status == "done" or (edge["kind"] == "settled" and dep_status == "failed")):
            unmet[(edge["graph_id"], edge["node_id"])] += 1
    return unmet


def _check_every_sequence(conn: sqlite3.Connection, **overrides: object) -> None:
    @settings(**{"max_examples": 150, "deadline": None,
                 "suppress_health_check": [HealthCheck.too_slow], **overrides})
    @given(operations=OPERATIONS)
    def holds(operations: list[tuple[str, ...]]) -> None:
        # One transaction per example, rolled back: every sequence starts from empty tables.
        run_sql(conn, "BEGIN")
        try:
            run_sql(conn, "INSERT INTO graphs (id, kind, created_at) VALUES ('other', 'run', ?) "
                         "ON CONFLICT (id) DO NOTHING", (now_iso(),))
            for step, operation in enumerate(operations):
                _apply(conn, operation)
                stored = {(row["graph_id"], row["id"]): row["unmet_deps"] for row in
                          run_sql(conn, "SELECT graph_id, id, unmet_deps FROM nodes")}
                assert stored == _recount(conn), f"after step {step}: {operation}"
        finally:
            run_sql(conn, "ROLLBACK")

    holds()


@pytest.fixture
def conn(state: StatePaths) -> Iterator[sqlite3.Connection]:
    connection = connect(state.db)
    yield connection
    connection.close()


def test_unmet_deps_matches_a_recount_after_every_step(conn) -> None:
    _check_every_sequence(conn)


def _trigger_sql(name: str) -> str:
    """The trigger as the newest migration that (re)creates it defines it."""
    folder = resources.files("clavain.store") / "migrations"
    for script in sorted((f for f in folder.iterdir() if f.name.endswith(".sql")),
                         key=lambda f: f.name, reverse=True):
        match = re.search(rf"CREATE TRIGGER {name}\b.*?\nEND;", script.read_text(), re.DOTALL)
        if match:
            return match.group(0)
    raise AssertionError(f"trigger {name} not found in any migration")


def _apply_mutant(conn: sqlite3.Connection, trigger: str,
                  replacements: dict[str, str] | None) -> None:
    """Rebuild `trigger` from the migration's own text with `replacements` applied, or drop it
    (None), so the mutants follow the schema instead of a copy that could drift from it."""
    sql = _trigger_sql(trigger)
    run_sql(conn, f"DROP TRIGGER {trigger}")
    if replacements is None:
        return
    for old, new in replacements.items():
        assert old in sql, f"{trigger} no longer contains {old!r}; update the mutant"
        sql = sql.replace(old, new)
    run_sql(conn, sql)


MUTANTS = {
    "status change ignores settled edges": ("deps_count_status", {
        "(e.kind = 'settled' AND OLD.status = 'failed')": "0",
        "(e.kind = 'settled' AND NEW.status = 'failed')": "0"}),
    "edge delete ignores settled edges": ("deps_count_delete", {
        " OR (OLD.kind = 'settled' AND d.status = 'failed')": ""}),
    "edge insert ignores settled edges": ("deps_count_insert", {
        " OR (NEW.kind = 'settled' AND d.status = 'failed')": ""}),
    "node delete leaves its edges to the cascade": ("nodes_delete_edges", None),
    "edge insert counts against every graph's node": ("deps_count_insert", {
        "WHERE graph_id = NEW.graph_id AND id = NEW.node_id": "WHERE id = NEW.node_id"}),
    "status change counts against every graph's dependents": ("deps_count_status", {
        "WHERE graph_id = NEW.graph_id\n    AND id IN": "WHERE id IN"}),
}


@pytest.mark.parametrize("mutant", MUTANTS)
def test_the_property_catches_a_broken_trigger(conn, mutant: str) -> None:
    _apply_mutant(conn, *MUTANTS[mutant])
    with pytest.raises(AssertionError, match="after step"):
        # Derandomized, so the check cannot flake; no example database, so a mutant's
        # counterexample is never replayed against the real schema's test.
        _check_every_sequence(conn, max_examples=500, derandomize=True, database=None,
                              phases=[Phase.generate])


def test_unmet_deps_matches_a_recount_on_the_server(pg_url: str) -> None:
    """The same property on the PostgreSQL schema's PL/pgSQL triggers (which also skip the
    dependents of a change that moves no count)."""
    from clavain.store.graph_db import migrate_postgresql
    from clavain.store.postgres import PgConnection

    server = PgConnection(pg_url)
    migrate_postgresql(server)
    try:
        _check_every_sequence(server, max_examples=60)
    finally:
        server.close()


def test_the_server_property_catches_a_missing_trigger(pg_url: str) -> None:
    from clavain.store.graph_db import migrate_postgresql
    from clavain.store.postgres import PgConnection

    server = PgConnection(pg_url)
    migrate_postgresql(server)
    run_sql(server, "DROP TRIGGER deps_count_status ON nodes")
    try:
        with pytest.raises(AssertionError, match="after step"):
            _check_every_sequence(server, max_examples=200, derandomize=True, database=None,
                                  phases=[Phase.generate])
    finally:
        server.close()
