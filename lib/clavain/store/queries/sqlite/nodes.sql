-- Workgraph rows (`workgraph.nodes`): read nodes as their JSON objects (the `node_objects`
-- view, migrations 0014), insert a checked batch, record events, reopen a node. Every
-- statement is scoped to one graph, except the all-graphs listings.
-- A list of ids is bound as one JSON array text: `IN (SELECT value FROM json_each(?))`.

-- name: record_event
-- One status change (or note) in a node's history.
INSERT INTO events (graph_id, node_id, from_status, to_status, run_id, at, note)
VALUES (?, ?, ?, ?, ?, ?, ?)

-- name: get
-- One node as its JSON object (every column, JSON columns decoded, plus `depends_on`).
SELECT node FROM node_objects WHERE graph_id = ? AND id = ?

-- name: list
-- The graph's nodes as JSON objects, in selection order (rank, then id).
SELECT node FROM node_objects WHERE graph_id = ? ORDER BY rank, id

-- name: list_with_status
-- The graph's nodes with one status, as JSON objects, in selection order.
SELECT node FROM node_objects WHERE graph_id = ? AND status = ? ORDER BY rank, id

-- name: list_all
-- Every graph's nodes as JSON objects, graph by graph (oldest first), in selection order.
SELECT o.node FROM node_objects o JOIN graphs g ON g.id = o.graph_id
 ORDER BY g.created_at, o.graph_id, o.rank, o.id

-- name: list_all_with_status
-- Every graph's nodes with one status, graph by graph, in selection order.
SELECT o.node FROM node_objects o JOIN graphs g ON g.id = o.graph_id
 WHERE o.status = ?
 ORDER BY g.created_at, o.graph_id, o.rank, o.id

-- name: existing_ids
-- Which of the ids (a JSON array) are nodes of the graph already.
SELECT id FROM nodes WHERE graph_id = ? AND id IN (SELECT value FROM json_each(?))

-- name: first_of_type
-- A node of the type, if the graph has one (integrate and final_verify are singletons).
SELECT id FROM nodes WHERE graph_id = ? AND type = ? LIMIT 1

-- name: insert
-- A new node, open, with its checked fields (one row per node of a batch); `origin_json` is
-- NULL unless an import made it.
INSERT INTO nodes (graph_id, id, title, type, parent_id, runner, inputs_json, ownership_json,
                   acceptance_json, verify_json, commands_json, retry_policy_json, created_at,
                   updated_at, origin_json)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)

-- name: insert_dependency
-- One dependency edge of a new node (its kind: done, or settled).
INSERT INTO deps (graph_id, node_id, depends_on_id, kind) VALUES (?, ?, ?, ?)

-- name: record_added
-- The history's first event of a new node: created open.
INSERT INTO events (graph_id, node_id, from_status, to_status, run_id, at, note)
VALUES (?, ?, NULL, 'open', ?, ?, ?)

-- name: reopen
-- Back to open with a clean slate: attempts, crashes, backoff, the whole claim (its generation,
-- the fence, stays), supersession; one more automatic reset when the first parameter is 1.
UPDATE nodes SET status = 'open', attempts = 0, crashes = 0, blocked_until = NULL,
       completed_at = NULL, lock_run_id = NULL, lock_started_at = NULL, lock_renewed_at = NULL,
       lock_pid = NULL, lock_host = NULL, lock_lease_ms = NULL, lock_runner_pid = NULL,
       lock_runner_identity = NULL, superseded_by = NULL, auto_resets = auto_resets + ?,
       updated_at = ?
 WHERE graph_id = ? AND id = ?
