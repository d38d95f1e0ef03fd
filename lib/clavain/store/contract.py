"""The workgraph store contract: what the workgraph asks of a store, and where each operation is.

Two backends implement it side by side: `store.db.SqliteStore` (the project's SQLite file, one
writer at a time) and `store.postgres.PgConnection` (a team's server: claimers side by side,
the server's clock, notifications). What differs between them is said by their attributes and
their named queries (`store/queries/<backend>/`), never by a branch in the library above:

- `dialect` picks the named queries' text; `shared` says several machines write at once (claims
  then skip rows others are taking instead of taking turns; a holder is told apart by boot id).
- `begin(exclusive=)` opens a transaction: SQLite's BEGIN IMMEDIATE; on the server an advisory
  writer lock, exclusive for read-then-write, shared for claims and renewals (each locks only
  its row). `store.db.transaction` wraps it (commit, or roll back whole).
- `now()` is the store's clock: a lease must be judged by one clock when machines disagree.
- `lost(exc)` says whether a failed transaction may simply run again (`graph_db.reconnecting`).
- `wait_for_ready(graph, timeout)` sleeps until a node may have become ready: a notification
  on the server, the timeout for a file.

The operations below are the workgraph's whole use of a store. Each is one named query group
plus the one library function that decides around it (transaction, fence, retries);
tests/unit/test_store_contract.py checks that every name here exists, and
tests/contract/ runs the same assertions on both backends.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol


class GraphStore(Protocol):
    """A connection to a workgraph store (see the module docstring for each member)."""

    dialect: str
    shared: bool

    @property
    def in_transaction(self) -> bool: ...

    def begin(self, *, exclusive: bool = True) -> None:
        """Open a transaction that writes (exclusive) or only claims or renews its own row."""

    def execute(self, statement: str, params: Any = ()) -> Any:
        """Run one statement (a named query's text, `store.queries.run`)."""

    def executemany(self, statement: str, rows: Any) -> Any:
        """Run one statement once per row of parameters."""

    def now(self) -> datetime:
        """The store's clock, in UTC."""

    def lost(self, exc: BaseException) -> bool:
        """Whether `exc` ended a transaction that may run again as it was (nothing applied)."""

    def wait_for_ready(self, graph_id: str, timeout: float) -> bool:
        """Wait until a node of `graph_id` may be ready, at most `timeout` s; True if woken."""

    def close(self) -> None:
        """Close the connection."""


# operation → (what it does, the library function that decides around it, its named queries'
# group). The function is where its transaction, fence and retry rule are decided, once.
OPERATIONS: dict[str, tuple[str, str, str]] = {
    "transaction": ("open, commit or roll back whole; exclusive or claim-only",
                    "clavain.store.db:transaction", "store"),
    "clock": ("now, by the store's clock", "clavain.store.graph_db:store_now", "store"),
    "get a node": ("one node as its JSON object", "clavain.workgraph.nodes:get_node", "nodes"),
    "add nodes": ("validated specs in one batch, edges and counts kept by triggers",
                  "clavain.workgraph.nodes:insert_nodes", "nodes"),
    "claim next": ("lock the next runnable node for a run, clear of running ownership",
                   "clavain.workgraph.claims:claim_next", "claims"),
    "claim named": ("lock one named node for a run, or say why not",
                    "clavain.workgraph.claims:claim_named", "claims"),
    "renew": ("renew the lease of a claim under its fence", "clavain.workgraph.claims:renew",
              "claims"),
    "release": ("give a claim back with its reason: finished, given back, crashed, stale",
                "clavain.workgraph.claims:release", "claims"),
    "give back a run's claims": ("every claim a run holds, given back with one reason",
                                 "clavain.workgraph.claims:give_back_run", "claims"),
    "finish": ("apply a runner's result under the claim's fence",
               "clavain.workgraph.results:apply_result", "results"),
    "record an event": ("one status change in the node's history",
                        "clavain.workgraph.nodes:record_event", "nodes"),
    "kv": ("a node's latest value per key and its history", "clavain.workgraph.kv:put",
           "kv"),
    "snapshot": ("the graph as one JSON file beside the store",
                 "clavain.workgraph.export:write_snapshot", "export"),
    "copy": ("graphs from one store to another, checked before commit",
             "clavain.store.transfer:copy_graphs", "transfer"),
}
