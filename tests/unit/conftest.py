"""Library-level fixtures: a state folder in tmp_path, a real connection to its workgraph (the
project's SQLite file, and again on a real PostgreSQL server: the `backend` parameter), and the
default workgraph on it."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from clavain.paths import StatePaths
from clavain.store.graph_db import open_graph_db
from clavain.workgraph.graphs import DEFAULT_GRAPH, Graph


@pytest.fixture
def state(tmp_path: Path, backend: str | None) -> StatePaths:
    return StatePaths(tmp_path / ".clavain", store_url=backend)


@pytest.fixture
def conn(state: StatePaths) -> Iterator[sqlite3.Connection]:
    state.root.mkdir(parents=True, exist_ok=True)  # as for a real project (snapshot, config)
    connection = open_graph_db(state)
    yield connection
    connection.close()


@pytest.fixture
def g(conn: sqlite3.Connection, state: StatePaths) -> Graph:
    """The project's default workgraph on that connection (work added with no sprint)."""
    return Graph(conn, DEFAULT_GRAPH, state)
