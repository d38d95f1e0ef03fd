-- PostgreSQL text of the claim queries that differ from SQLite's (`sqlite/claims.sql` says what
-- each does). Claimers on several machines run at once: each takes the first ready row nobody
-- else is taking (FOR UPDATE SKIP LOCKED) instead of queueing behind one write lock. A named
-- node another claimer is locking is skipped too, never waited for: a claimer holding the
-- ownership lock must not wait on a row another claimer holds (a deadlock). No INDEXED BY: the
-- planner picks `nodes_ready` itself.

-- name: next_unowned
UPDATE nodes SET status = 'in_progress', lock_run_id = %(run_id)s, lock_started_at = %(now)s,
      lock_renewed_at = %(now)s, lock_pid = %(pid)s, lock_host = %(host)s,
      lock_lease_ms = %(lease_ms)s, lock_runner_pid = NULL, lock_runner_identity = NULL,
      updated_at = %(now)s, lock_generation = lock_generation + 1
  WHERE graph_id = %(graph)s AND id = (SELECT id FROM nodes
  WHERE graph_id = %(graph)s AND status = 'open' AND unmet_deps = 0
    AND lock_run_id IS NULL AND (blocked_until IS NULL OR blocked_until <= %(now)s)
  ORDER BY rank, id LIMIT 1 FOR UPDATE SKIP LOCKED)
    AND status = 'open' AND unmet_deps = 0 AND lock_run_id IS NULL AND ownership_json = '[]'
  RETURNING id

-- name: next_unowned_taken
-- One round trip instead of three: PostgreSQL runs data-changing CTEs. The node's JSON is the
-- expression of the `node_objects` view (migrations_postgresql/0003_node_objects.sql), written
-- out over the claimed row: the view would show the row as it was before this UPDATE (every
-- part of one statement reads the same snapshot). tests/unit/test_claims.py keeps the two equal.
WITH claimed AS (UPDATE nodes SET status = 'in_progress', lock_run_id = %(run_id)s, lock_started_at = %(now)s,
      lock_renewed_at = %(now)s, lock_pid = %(pid)s, lock_host = %(host)s,
      lock_lease_ms = %(lease_ms)s, lock_runner_pid = NULL, lock_runner_identity = NULL,
      updated_at = %(now)s, lock_generation = lock_generation + 1
  WHERE graph_id = %(graph)s AND id = (SELECT id FROM nodes
  WHERE graph_id = %(graph)s AND status = 'open' AND unmet_deps = 0
    AND lock_run_id IS NULL AND (blocked_until IS NULL OR blocked_until <= %(now)s)
  ORDER BY rank, id LIMIT 1 FOR UPDATE SKIP LOCKED)
    AND status = 'open' AND unmet_deps = 0 AND lock_run_id IS NULL AND ownership_json = '[]'
  RETURNING *),
noted AS (INSERT INTO events (graph_id, node_id, from_status, to_status, run_id, at, note)
  SELECT graph_id, id, 'open', 'in_progress', %(run_id)s, %(now)s, 'claimed' FROM claimed)
SELECT
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
    'depends_on', coalesce((SELECT json_agg(d.depends_on_id ORDER BY d.depends_on_id) FROM deps d WHERE d.graph_id = n.graph_id AND d.node_id = n.id),
    '[]'::json),
    'origin', n.origin_json::json)::text
  FROM claimed n

-- name: next
UPDATE nodes SET status = 'in_progress', lock_run_id = %(run_id)s, lock_started_at = %(now)s,
      lock_renewed_at = %(now)s, lock_pid = %(pid)s, lock_host = %(host)s,
      lock_lease_ms = %(lease_ms)s, lock_runner_pid = NULL, lock_runner_identity = NULL,
      updated_at = %(now)s, lock_generation = lock_generation + 1
  WHERE graph_id = %(graph)s AND id = (SELECT id FROM nodes
  WHERE graph_id = %(graph)s AND status = 'open' AND unmet_deps = 0
    AND lock_run_id IS NULL AND (blocked_until IS NULL OR blocked_until <= %(now)s)
  ORDER BY rank, id LIMIT 1 FOR UPDATE SKIP LOCKED)
    AND status = 'open' AND unmet_deps = 0 AND lock_run_id IS NULL
  RETURNING id

-- name: one
UPDATE nodes SET status = 'in_progress', lock_run_id = %(run_id)s, lock_started_at = %(now)s,
      lock_renewed_at = %(now)s, lock_pid = %(pid)s, lock_host = %(host)s,
      lock_lease_ms = %(lease_ms)s, lock_runner_pid = NULL, lock_runner_identity = NULL,
      updated_at = %(now)s, lock_generation = lock_generation + 1
  WHERE graph_id = %(graph)s
    AND id = (SELECT id FROM nodes WHERE graph_id = %(graph)s AND id = %(id)s
              FOR UPDATE SKIP LOCKED)
    AND status = 'open' AND unmet_deps = 0
    AND lock_run_id IS NULL AND (blocked_until IS NULL OR blocked_until <= %(now)s)
  RETURNING id

-- name: hold_ownership
SELECT pg_advisory_xact_lock(hashtext('clavain-ownership:' || %s))

-- name: ready_ownership
SELECT id, ownership_json FROM nodes
  WHERE graph_id = %(graph)s AND status = 'open' AND unmet_deps = 0
    AND lock_run_id IS NULL AND (blocked_until IS NULL OR blocked_until <= %(now)s)
  ORDER BY rank, id

-- name: first_ready_ownership
SELECT id, ownership_json FROM nodes
  WHERE graph_id = %(graph)s AND status = 'open' AND unmet_deps = 0
    AND lock_run_id IS NULL AND (blocked_until IS NULL OR blocked_until <= %(now)s)
  ORDER BY rank, id LIMIT 1
