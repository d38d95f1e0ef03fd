-- Where the work stands (`clavain status`, the report page, the status line, a session's
-- start): read-only questions of the workgraph. `json_extract` runs on PostgreSQL too, as the
-- function its first migration defines.

-- name: counts
-- Nodes per status, a failed node another replaced counted as `replaced` (it blocks nothing).
SELECT CASE WHEN superseded_by IS NOT NULL THEN 'replaced' ELSE status END, count(*)
  FROM nodes WHERE graph_id = ? GROUP BY 1

-- name: running
-- The graph's claimed nodes, the longest held first: who holds each, since when.
SELECT id, lock_run_id, lock_started_at FROM nodes WHERE graph_id = ? AND status = 'in_progress'
 ORDER BY lock_started_at, id

-- name: waiting
-- Open nodes in a retry backoff at the given time, the soonest free first.
SELECT id, blocked_until, attempts FROM nodes WHERE graph_id = ? AND status = 'open'
   AND blocked_until > ?
 ORDER BY blocked_until, id

-- name: needs_human
-- The graph's nodes waiting for a person's answer, with their question.
SELECT id, json_extract(human_question_json, '$.question') AS question FROM nodes
 WHERE graph_id = ? AND status = 'needs_human'
 ORDER BY id

-- name: last_error
-- One node's last error: the `err.summary` its last failed attempt recorded.
SELECT value_text FROM kv_latest WHERE graph_id = ? AND node_id = ? AND key = 'err.summary'

-- name: last_errors
-- Every node's last error in the graph (node_id, text), for the report page.
SELECT node_id, value_text FROM kv_latest WHERE graph_id = ? AND key = 'err.summary'

-- name: active_node_count
-- How many nodes the active graphs hold (what `clavain graph export` wrote).
SELECT count(*) FROM nodes n JOIN graphs x ON x.id = n.graph_id WHERE x.status = 'active'

-- name: questions_waiting
-- How many nodes of active graphs wait for a person's answer (the status line's count).
SELECT COUNT(*) FROM nodes JOIN graphs ON graphs.id = nodes.graph_id
 WHERE nodes.status = 'needs_human' AND graphs.status = 'active'

-- name: claimed_shown
-- A graph's claimed nodes in id order, at most the given number (a session's start shows them).
SELECT id, title, lock_run_id, attempts FROM nodes WHERE graph_id = ? AND status = 'in_progress'
 ORDER BY id LIMIT ?
