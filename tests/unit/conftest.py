"""Library-level fixtures: a state folder in tmp_path, a real SQLite connection to it, and the
default workgraph on it."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from clavain.paths import StatePaths
from clavain.store import db
from clavain.workgraph.graphs import DEFAULT_GRAPH, Graph


@pytest.fixture
def state(tmp_path: Path) -> StatePaths:
    return StatePaths(tmp_path / ".clavain")


@pytest.fixture
def conn(state: StatePaths) -> Iterator[sqlite3.Connection]:
    connection = db.connect(state.db)
    yield connection
    connection.close()


@pytest.fixture
def g(conn: sqlite3.Connection, state: StatePaths) -> Graph:
    """The project's default workgraph on that connection (work added with no sprint)."""
    return Graph(conn, DEFAULT_GRAPH, state)
