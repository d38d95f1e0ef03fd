-- Copying workgraphs between stores (`store.transfer`, `clavain db migrate --to`): each
-- table's rows of one graph read in a stable order, deleted, and inserted.

-- name: read_graphs
-- The graphs rows of graph ? in the columns a copy carries (sorted by the caller).
SELECT id, kind, status, title, created_at, closed_at
  FROM graphs WHERE id = ?

-- name: read_nodes
-- The nodes rows of graph ? in the columns a copy carries (sorted by the caller).
SELECT graph_id, id, title, type, status, parent_id, runner, inputs_json, ownership_json,
       acceptance_json, verify_json, retry_policy_json, attempts, auto_resets, unmet_deps,
       blocked_until, lock_run_id, lock_started_at, lock_pid, lock_host, human_question_json,
       created_at, updated_at, completed_at, lock_renewed_at, escalations, superseded_by,
       verifies, commands_json, lock_generation, lock_lease_ms, lock_runner_pid,
       lock_runner_identity, crashes, origin_json
  FROM nodes WHERE graph_id = ?

-- name: read_deps
-- The deps rows of graph ? in the columns a copy carries (sorted by the caller).
SELECT graph_id, node_id, depends_on_id, kind
  FROM deps WHERE graph_id = ?

-- name: read_kv_latest
-- The kv_latest rows of graph ? in the columns a copy carries (sorted by the caller).
SELECT graph_id, node_id, key, value_text, artifact_path, artifact_sha256, fingerprint_json,
       run_id, attempt, updated_at
  FROM kv_latest WHERE graph_id = ?

-- name: read_kv_history
-- The kv_history rows of graph ? in the columns a copy carries, by id.
SELECT graph_id, node_id, key, value_text, artifact_path, artifact_sha256, fingerprint_json,
       run_id, attempt, created_at
  FROM kv_history WHERE graph_id = ? ORDER BY id

-- name: read_events
-- The events rows of graph ? in the columns a copy carries, by id.
SELECT graph_id, node_id, from_status, to_status, run_id, at, note
  FROM events WHERE graph_id = ? ORDER BY id

-- name: delete_deps
-- A graph's deps rows, before its nodes go.
DELETE FROM deps WHERE graph_id = ?

-- name: delete_kv_latest
-- A graph's kv_latest rows, before its nodes go.
DELETE FROM kv_latest WHERE graph_id = ?

-- name: delete_kv_history
-- A graph's kv_history rows, before its nodes go.
DELETE FROM kv_history WHERE graph_id = ?

-- name: delete_events
-- A graph's events rows, before its nodes go.
DELETE FROM events WHERE graph_id = ?

-- name: unlink_parents
-- A graph's nodes point at no parent, so they can go in any order.
UPDATE nodes SET parent_id = NULL WHERE graph_id = ?

-- name: delete_nodes
DELETE FROM nodes WHERE graph_id = ?

-- name: delete_graph
DELETE FROM graphs WHERE id = ?

-- name: insert_graphs
-- One graphs row as read by read_graphs.
INSERT INTO graphs (id, kind, status, title, created_at, closed_at)
  VALUES (?, ?, ?, ?, ?, ?)

-- name: insert_nodes
-- One nodes row as read by read_nodes.
INSERT INTO nodes (graph_id, id, title, type, status, parent_id, runner, inputs_json,
    ownership_json, acceptance_json, verify_json, retry_policy_json, attempts, auto_resets,
    unmet_deps, blocked_until, lock_run_id, lock_started_at, lock_pid, lock_host,
    human_question_json, created_at, updated_at, completed_at, lock_renewed_at, escalations,
    superseded_by, verifies, commands_json, lock_generation, lock_lease_ms, lock_runner_pid,
    lock_runner_identity, crashes, origin_json)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,
          ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)

-- name: insert_deps
-- One deps row as read by read_deps.
INSERT INTO deps (graph_id, node_id, depends_on_id, kind)
  VALUES (?, ?, ?, ?)

-- name: insert_kv_latest
-- One kv_latest row as read by read_kv_latest.
INSERT INTO kv_latest (graph_id, node_id, key, value_text, artifact_path, artifact_sha256,
    fingerprint_json, run_id, attempt, updated_at)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)

-- name: insert_kv_history
-- One kv_history row as read by read_kv_history.
INSERT INTO kv_history (graph_id, node_id, key, value_text, artifact_path, artifact_sha256,
    fingerprint_json, run_id, attempt, created_at)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)

-- name: insert_events
-- One events row as read by read_events.
INSERT INTO events (graph_id, node_id, from_status, to_status, run_id, at, note)
  VALUES (?, ?, ?, ?, ?, ?, ?)

-- name: graph_ids
-- Every graph of the store, oldest first.
SELECT id FROM graphs ORDER BY created_at, id
