-- 0016: an imported node keeps where it came from (`clavain graph import --from`): `origin_json`
-- is {"format", "source_id", "status", "priority", "url", "unresolved"} as the import wrote it,
-- NULL for a node made any other way. A re-import finds its nodes by it (same id, same format
-- and source id) and updates them instead of adding them twice. `node_objects` shows it as
-- `origin` (null when there is none), last, after `depends_on`; the view is made again to add
-- it (SQLite cannot alter a view). migrations_postgresql/0004_node_origin.sql is its twin.
ALTER TABLE nodes ADD COLUMN origin_json TEXT;

DROP VIEW node_objects;

CREATE VIEW node_objects AS
  SELECT n.graph_id AS graph_id, n.id AS id, n.status AS status, n.rank AS rank,
    json_object('graph_id', n.graph_id, 'id', n.id, 'title', n.title, 'type', n.type,
      'status', n.status, 'parent_id', n.parent_id, 'runner', n.runner,
      'inputs', json(n.inputs_json), 'ownership', json(n.ownership_json),
      'acceptance', json(n.acceptance_json), 'verify', json(n.verify_json),
      'commands', json(n.commands_json), 'retry_policy', json(n.retry_policy_json),
      'attempts', n.attempts, 'auto_resets', n.auto_resets, 'escalations', n.escalations,
      'superseded_by', n.superseded_by, 'verifies', n.verifies, 'unmet_deps', n.unmet_deps,
      'blocked_until', n.blocked_until, 'lock_run_id', n.lock_run_id,
      'lock_generation', n.lock_generation, 'lock_started_at', n.lock_started_at,
      'lock_renewed_at', n.lock_renewed_at, 'lock_pid', n.lock_pid, 'lock_host', n.lock_host,
      'lock_lease_ms', n.lock_lease_ms, 'lock_runner_pid', n.lock_runner_pid,
      'lock_runner_identity', n.lock_runner_identity, 'crashes', n.crashes,
      'human_question', json(n.human_question_json), 'created_at', n.created_at,
      'updated_at', n.updated_at, 'completed_at', n.completed_at,
      'depends_on', (SELECT json_group_array(d.depends_on_id) FROM deps d
                     WHERE d.graph_id = n.graph_id AND d.node_id = n.id),
      'origin', json(n.origin_json)) AS node
  FROM nodes n;
