"""The store contract (`store.contract`) tells the truth: both backends' connections offer
every member of `GraphStore`, and every operation it lists names a library function that exists
and a named-query group that exists."""

from __future__ import annotations

import importlib
import inspect

import pytest

from clavain.store import contract, queries
from clavain.store.db import SqliteStore
from clavain.store.postgres import PgConnection

MEMBERS = [name for name in vars(contract.GraphStore)
           if not name.startswith("_") and name not in ("dialect", "shared")] + [
    "dialect", "shared"]


@pytest.mark.parametrize("backend", [SqliteStore, PgConnection], ids=["sqlite", "postgresql"])
def test_each_backend_offers_the_whole_contract(backend: type) -> None:
    missing = [name for name in MEMBERS if not hasattr(backend, name)]
    assert not missing, f"{backend.__name__} lacks {missing}"
    for name in ("begin", "now", "lost", "wait_for_ready"):
        wanted = list(inspect.signature(getattr(contract.GraphStore, name)).parameters)
        have = list(inspect.signature(getattr(backend, name)).parameters)
        assert have == wanted, (backend.__name__, name, have)


@pytest.mark.parametrize("operation", sorted(contract.OPERATIONS))
def test_every_operation_names_a_function_and_a_query_group_that_exist(operation: str) -> None:
    _, where, group = contract.OPERATIONS[operation]
    module, _, function = where.partition(":")
    assert callable(getattr(importlib.import_module(module), function)), where
    assert group in queries.groups(), group
