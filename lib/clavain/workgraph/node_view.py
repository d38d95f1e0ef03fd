"""How a node looks outside the database: one JSON object per node (snake_case keys, like every
file and `--json` output Clavain writes), built by the database so `graph show`, `graph ls` and
the snapshot share one shape and no per-node Python runs. One text per dialect, same keys."""

from __future__ import annotations

import re
from typing import Any

_FIELDS = (
    "'graph_id', n.graph_id, 'id', n.id, 'title', n.title, 'type', n.type, 'status', n.status,"
    " 'parent_id', n.parent_id, 'runner', n.runner, 'inputs', {j}(n.inputs_json),"
    " 'ownership', {j}(n.ownership_json), 'acceptance', {j}(n.acceptance_json),"
    " 'verify', {j}(n.verify_json), 'commands', {j}(n.commands_json),"
    " 'retry_policy', {j}(n.retry_policy_json), 'attempts', n.attempts,"
    " 'auto_resets', n.auto_resets, 'escalations', n.escalations,"
    " 'superseded_by', n.superseded_by, 'verifies', n.verifies,"
    " 'unmet_deps', n.unmet_deps, 'blocked_until', n.blocked_until,"
    " 'lock_run_id', n.lock_run_id, 'lock_generation', n.lock_generation,"
    " 'lock_started_at', n.lock_started_at, 'lock_renewed_at', n.lock_renewed_at,"
    " 'lock_pid', n.lock_pid, 'lock_host', n.lock_host,"
    " 'lock_lease_ms', n.lock_lease_ms, 'lock_runner_pid', n.lock_runner_pid,"
    " 'lock_runner_identity', n.lock_runner_identity, 'crashes', n.crashes,"
    " 'human_question', {j}(n.human_question_json), 'created_at', n.created_at,"
    " 'updated_at', n.updated_at, 'completed_at', n.completed_at,"
)

NODE_JSON = ("json_object(" + _FIELDS.format(j="json")
             + " 'depends_on', (SELECT json_group_array(d.depends_on_id) FROM deps d"
               " WHERE d.graph_id = n.graph_id AND d.node_id = n.id))")

# json_build_object keeps key order (jsonb would sort it); text out, as SQLite gives it.
NODE_JSON_POSTGRESQL = ("json_build_object(" + re.sub(r"\((n\.\w+_json)\)", r"\1::json",
                                                      _FIELDS.format(j=""))
                        + " 'depends_on', coalesce((SELECT json_agg(d.depends_on_id"
                          " ORDER BY d.depends_on_id) FROM deps d"
                          " WHERE d.graph_id = n.graph_id AND d.node_id = n.id),"
                          " '[]'::json))::text")


def node_json(conn: Any) -> str:
    """The node-object expression for this connection's dialect (alias `n` for nodes)."""
    from clavain.store.graph_db import dialect

    return NODE_JSON if dialect(conn) == "sqlite" else NODE_JSON_POSTGRESQL
