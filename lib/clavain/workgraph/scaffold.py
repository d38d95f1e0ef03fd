"""Gates every plan needs, created by Clavain rather than by planners: one verify node per task,
exactly one integrate node after all verify nodes, exactly one final_verify after it.

Idempotent: running it twice changes nothing. Escalation nodes are plans, so they never add
integrate or final nodes; tasks they add get their verify node and join the one integrate.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import Any

from clavain import config as config_mod
from clavain.clock import now_iso
from clavain.store import queries
from clavain.store.db import transaction
from clavain.workgraph.export import after_commit
from clavain.workgraph.graphs import Graph
from clavain.workgraph.nodes import insert_nodes, reopen
from clavain.workgraph.statuses import NodeStatus

INTEGRATE_ID = "integrate"
FINAL_ID = "final-verify"


def _free_id(g: Graph, wanted: str, taken: set[str]) -> str:
    candidate, n = wanted, 1
    while candidate in taken or queries.run(g.conn, "scaffold.node_exists",
                                            (g.id, candidate)).fetchone():
        n += 1
        candidate = f"{wanted}-{n}"
    taken.add(candidate)
    return candidate


def _spec(**fields: Any) -> Any:
    """A NodeSpec for a generated node (ids derive from user ids, so skip the length check)."""
    from clavain.models.node import NodeInput, NodeSpec

    inputs = [NodeInput.model_validate(i) for i in fields.pop("inputs", [])]
    defaults = {"title": "", "dependsOn": [], "parent": None, "runner": None, "ownership": [],
                "acceptance": [], "verify": [], "commands": [], "retryPolicy": None}
    return NodeSpec.model_construct(**{**defaults, **fields, "inputs": inputs})


def verify_specs(g: Graph, runner: str | None, taken: set[str]) -> list[Any]:
    specs = []
    for task in queries.run(g.conn, "scaffold.tasks_without_verify", (g.id,)).fetchall():
        specs.append(_spec(
            id=_free_id(g, f"verify-{task['id']}", taken), type="verify",
            title=f"Verify {task['title'] or task['id']}", dependsOn=[task["id"]],
            parent=task["parent_id"], runner=runner,
            acceptance=json.loads(task["acceptance_json"]),
            verify=json.loads(task["verify_json"]),
            inputs=[{"nodeId": task["id"], "key": "out.summary", "as": "taskSummary"}],
        ))
    return specs


def singleton(g: Graph, node_type: str) -> sqlite3.Row | None:
    """The graph's one integrate or final_verify node (id, status), or None."""
    return queries.run(g.conn, "scaffold.singleton", (g.id, node_type)).fetchone()


def _link(g: Graph, query: str, **ids: str) -> int:
    """Add the missing deps a `scaffold.link_*` query selects; returns how many were added."""
    return queries.run(g.conn, query, {"graph": g.id, **ids}).rowcount


# Past this many new verify nodes a person waits long enough to be told what is happening.
PROGRESS_FROM = 2000


def ensure_scaffolding(g: Graph, *,
                       progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Create whatever gates are missing, in one transaction, then refresh the snapshot.
    Returns {verify: [...], integrate, final, linked, reopened}. `progress` hears a line at
    each phase of a large scaffold (PROGRESS_FROM new verify nodes or more)."""
    cfg = config_mod.load(g.state.config)
    with transaction(g.conn):
        report = scaffold_in_transaction(g, cfg, now_iso(), progress=progress)
    if progress and len(report["verify"]) >= PROGRESS_FROM:
        progress("scaffold: committed; writing the snapshot")
    after_commit(g, cfg)
    return report


def scaffold_in_transaction(g: Graph, cfg: dict[str, Any], at: str, *,
                            progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """`ensure_scaffolding` inside the caller's transaction: what `results` runs whenever a
    result adds tasks, so every task has a verify node before integration."""
    runner = config_mod.get(cfg, "defaults.verifyRunner")
    report: dict[str, Any] = {"verify": [], "integrate": None, "final": None, "linked": 0,
                              "reopened": []}
    taken: set[str] = set()
    verify = verify_specs(g, runner, taken)
    if progress and len(verify) >= PROGRESS_FROM:
        progress(f"scaffold: adding {len(verify):,} verify node(s)")
    else:
        progress = None
    if verify:
        report["verify"] = insert_nodes(g, cfg, verify, at=at, note="added by scaffold")
        queries.run_many(g.conn, "scaffold.set_verifies",
                         [(spec.dependsOn[0], g.id, spec.id) for spec in verify])
    if not queries.run(g.conn, "scaffold.has_task", (g.id,)).fetchone():
        return report
    integrate = singleton(g, "integrate")
    if progress:
        progress("scaffold: linking the integrate and final gates")
    if integrate is None:
        spec = _spec(id=_free_id(g, INTEGRATE_ID, taken), type="integrate",
                     title="Integrate all verified tasks")
        report["integrate"] = insert_nodes(g, cfg, [spec], at=at, note="added by scaffold")[0]
        integrate = singleton(g, "integrate")
    # Never a verify node that itself waits for integration: that edge would close a cycle.
    linked = _link(g, "scaffold.link_integrate", integrate=integrate["id"])
    final = singleton(g, "final_verify")
    final_linked = 0
    if final is None:
        spec = _spec(id=_free_id(g, FINAL_ID, taken), type="final_verify",
                     title="Final verification of the whole goal",
                     dependsOn=[integrate["id"]], runner=runner)
        report["final"] = insert_nodes(g, cfg, [spec], at=at, note="added by scaffold")[0]
        final = singleton(g, "final_verify")
    else:
        final_linked = _link(g, "scaffold.link_final_to_integrate", final=final["id"],
                             integrate=integrate["id"])
    final_linked += _link(g, "scaffold.link_final_to_late_verify", final=final["id"],
                          integrate=integrate["id"])
    report["linked"] = linked + final_linked
    gather_final_checks(g, final["id"], at)
    gates = [integrate, final] if linked else [final] if final_linked else []
    report["reopened"] = _reopen_finished_gates(g, gates, at)
    return report


def gather_final_checks(g: Graph, final_id: str, at: str, *, rebuild: bool = False) -> bool:
    """The final gate re-runs every task's checks after integration, so the shell verifier can
    run it like any verify node: its own commands first, then each verify node's, once each.
    `rebuild` drops what no verify node holds any more (a plan re-recorded with new checks).
    Returns whether its commands changed."""
    row = queries.run(g.conn, "scaffold.verify_json_of", (g.id, final_id)).fetchone()
    current: list[str] = json.loads(row["verify_json"])
    gathered: dict[str, None] = {} if rebuild else dict.fromkeys(current)
    for (verify_json,) in queries.run(g.conn, "scaffold.verify_commands", (g.id,)):
        gathered.update(dict.fromkeys(json.loads(verify_json)))
    if list(gathered) == current:
        return False
    queries.run(g.conn, "scaffold.set_verify_json",
                (json.dumps(list(gathered)), at, g.id, final_id))
    return True


def _reopen_finished_gates(g: Graph, gates: list[sqlite3.Row], at: str) -> list[str]:
    """New verify nodes after integration ran mean integration must run again."""
    reopened = []
    for gate in gates:
        status = queries.run(g.conn, "scaffold.node_status", (g.id, gate["id"])).fetchone()[0]
        if status in (NodeStatus.DONE, NodeStatus.FAILED):
            reopen(g, gate["id"], status, at=at, note="scaffold: new verify nodes to integrate")
            reopened.append(gate["id"])
    return reopened
