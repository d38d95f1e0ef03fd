"""How a node looks outside the database: one JSON object per node (snake_case keys, like every
file and `--json` output Clavain writes), built by SQLite so `graph show`, `graph ls` and the
snapshot share one shape and no per-node Python runs."""

NODE_JSON = """json_object(
  'graph_id', n.graph_id, 'id', n.id, 'title', n.title, 'type', n.type, 'status', n.status,
  'parent_id', n.parent_id, 'runner', n.runner, 'inputs', json(n.inputs_json),
  'ownership', json(n.ownership_json), 'acceptance', json(n.acceptance_json),
  'verify', json(n.verify_json), 'commands', json(n.commands_json),
  'retry_policy', json(n.retry_policy_json), 'attempts', n.attempts,
  'auto_resets', n.auto_resets, 'escalations', n.escalations, 'superseded_by', n.superseded_by,
  'verifies', n.verifies,
  'unmet_deps', n.unmet_deps, 'blocked_until', n.blocked_until, 'lock_run_id', n.lock_run_id,
  'lock_started_at', n.lock_started_at, 'lock_renewed_at', n.lock_renewed_at,
  'lock_pid', n.lock_pid, 'lock_host', n.lock_host,
  'human_question', json(n.human_question_json), 'created_at', n.created_at,
  'updated_at', n.updated_at, 'completed_at', n.completed_at,
  'depends_on', (SELECT json_group_array(d.depends_on_id) FROM deps d
                  WHERE d.graph_id = n.graph_id AND d.node_id = n.id))"""
