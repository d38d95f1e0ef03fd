-- 0004 (PostgreSQL): SQLite's version 16 — an imported node's `origin_json` (see
-- migrations/0016_node_origin.sql), and `node_objects` made again with `origin` last, key for
-- key the text SQLite's view gives. queries/postgresql/claims.sql (next_unowned_taken) writes the
-- same object out and gains the key too.
ALTER TABLE nodes ADD COLUMN origin_json TEXT;

DROP VIEW node_objects;

CREATE VIEW node_objects AS
  SELECT n.graph_id AS graph_id, n.id AS id, n.status AS status, n.rank AS rank,
    json_build_object('graph_id', n.graph_id, 'id', n.id, 'title', n.title, 'type', n.type,
      'status', n.status, 'parent_id', n.parent_id, 'runner', n.runner,
      'inputs', n.inputs_json::json, 'ownership', n.ownership_json::json,
      'acceptance', n.acceptance_json::json, 'verify', n.verify_json::json,
      'commands', n.commands_json::json, 'retry_policy', n.retry_policy_json::json,
      'attempts', n.attempts, 'auto_resets', n.auto_resets, 'escalations', n.escalations,
      'superseded_by', n.superseded_by, 'verifies', n.verifies, 'unmet_deps', n.unmet_deps,
      'blocked_until', n.blocked_until, 'lock_run_id', n.lock_run_id,
      'lock_generation', n.lock_generation, 'lock_started_at', n.lock_started_at,
      'lock_renewed_at', n.lock_renewed_at, 'lock_pid', n.lock_pid, 'lock_host', n.lock_host,
      'lock_lease_ms', n.lock_lease_ms, 'lock_runner_pid', n.lock_runner_pid,
      'lock_runner_identity', n.lock_runner_identity, 'crashes', n.crashes,
      'human_question', n.human_question_json::json, 'created_at', n.created_at,
      'updated_at', n.updated_at, 'completed_at', n.completed_at,
      'depends_on', coalesce((SELECT json_agg(d.depends_on_id ORDER BY d.depends_on_id)
                              FROM deps d WHERE d.graph_id = n.graph_id AND d.node_id = n.id),
                             '[]'::json),
      'origin', n.origin_json::json)::text AS node
  FROM nodes n;
