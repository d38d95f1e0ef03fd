"""How a node looks outside the database: one JSON object per node, built by SQLite so
`graph show`, `graph ls` and the snapshot share one shape and no per-node Python runs."""

NODE_JSON = """json_object(
  'id', n.id, 'title', n.title, 'type', n.type, 'status', n.status, 'parentId', n.parent_id,
  'runner', n.runner, 'inputs', json(n.inputs_json), 'ownership', json(n.ownership_json),
  'acceptance', json(n.acceptance_json), 'verify', json(n.verify_json),
  'retryPolicy', json(n.retry_policy_json), 'attempts', n.attempts, 'autoResets', n.auto_resets,
  'unmetDeps', n.unmet_deps, 'blockedUntil', n.blocked_until, 'lockRunId', n.lock_run_id,
  'lockStartedAt', n.lock_started_at, 'lockPid', n.lock_pid, 'lockHost', n.lock_host,
  'checkpoint', json(n.checkpoint_json), 'createdAt', n.created_at, 'updatedAt', n.updated_at,
  'completedAt', n.completed_at,
  'dependsOn', (SELECT json_group_array(d.depends_on_id) FROM deps d WHERE d.node_id = n.id))"""

