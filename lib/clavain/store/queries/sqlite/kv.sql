-- Node-scoped key/value context (`workgraph.kv`): `kv_latest` is the current value of each
-- (graph, node, key), `kv_history` the newest few. A value stored in an artifact file has no
-- text; its row keeps the file's path and sha256.

-- name: insert_history
-- One more written value in the key's history.
INSERT INTO kv_history (graph_id, node_id, key, value_text, artifact_path, artifact_sha256,
                        fingerprint_json, run_id, attempt, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)

-- name: upsert_latest
-- The key's current value: made, or replaced by the newer one.
INSERT INTO kv_latest (graph_id, node_id, key, value_text, artifact_path, artifact_sha256,
                       fingerprint_json, run_id, attempt, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (graph_id, node_id, key) DO UPDATE SET value_text = excluded.value_text,
  artifact_path = excluded.artifact_path, artifact_sha256 = excluded.artifact_sha256,
  fingerprint_json = excluded.fingerprint_json, run_id = excluded.run_id,
  attempt = excluded.attempt, updated_at = excluded.updated_at

-- name: prune_history
-- Keep only the key's newest values (graph, node, key, then the same again, then how many).
DELETE FROM kv_history WHERE graph_id = ? AND node_id = ? AND key = ? AND id NOT IN
  (SELECT id FROM kv_history WHERE graph_id = ? AND node_id = ? AND key = ?
    ORDER BY id DESC LIMIT ?)

-- name: get
-- The key's current value.
SELECT node_id, key, value_text, artifact_path, artifact_sha256, fingerprint_json, run_id,
       attempt, updated_at
  FROM kv_latest WHERE graph_id = ? AND node_id = ? AND key = ?

-- name: list_graph
-- The graph's current values, by node then key; only the keys starting with `:prefix` unless
-- it is NULL (substr, not LIKE: keys often hold `_` and `%`, LIKE's wildcards).
SELECT node_id, key, value_text, artifact_path, artifact_sha256, fingerprint_json, run_id,
       attempt, updated_at
  FROM kv_latest
 WHERE graph_id = :graph
   AND (CAST(:prefix AS TEXT) IS NULL OR substr(key, 1, :prefix_length) = :prefix)
 ORDER BY node_id, key

-- name: list_node
-- One node's (or the run namespace's) current values, by key; only the keys starting with
-- `:prefix` unless it is NULL.
SELECT node_id, key, value_text, artifact_path, artifact_sha256, fingerprint_json, run_id,
       attempt, updated_at
  FROM kv_latest
 WHERE graph_id = :graph AND node_id = :node
   AND (CAST(:prefix AS TEXT) IS NULL OR substr(key, 1, :prefix_length) = :prefix)
 ORDER BY node_id, key

-- name: history
-- The key's retained values, newest first.
SELECT node_id, key, value_text, artifact_path, artifact_sha256, fingerprint_json, run_id,
       attempt, created_at
  FROM kv_history WHERE graph_id = ? AND node_id = ? AND key = ? ORDER BY id DESC
