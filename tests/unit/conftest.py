"""Library-level fixtures: a state folder in tmp_path and a real SQLite connection to it."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from clavain.paths import StatePaths
from clavain.store import db


@pytest.fixture
def state(tmp_path: Path) -> StatePaths:
    return StatePaths(tmp_path / ".clavain")


@pytest.fixture
def conn(state: StatePaths) -> Iterator[sqlite3.Connection]:
    connection = db.connect(state.db)
    yield connection
    connection.close()
