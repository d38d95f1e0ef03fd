-- A plan recorded again (`sprint.plan`): tasks it drops leave the graph, on the workgraph store
-- (SQLite or PostgreSQL); tasks it changes take the new definition through `redefine`.

-- name: top_level_tasks
-- The graph's tasks the plan made (not those a runner added under one), by id.
SELECT id FROM nodes WHERE graph_id = ? AND type = 'task' AND parent_id IS NULL ORDER BY id

-- name: verify_nodes_of
-- The verify nodes scaffolding made for a task (`verifies`).
SELECT id FROM nodes WHERE graph_id = ? AND type = 'verify' AND verifies = ?

-- name: dependents
-- The nodes that depend on a node, by id (a dropped task must have none but its verify node).
SELECT node_id FROM deps WHERE graph_id = ? AND depends_on_id = ? ORDER BY node_id

-- name: delete_kv_latest
-- A removed node's latest context values: a task added again under its id starts with none.
DELETE FROM kv_latest WHERE graph_id = ? AND node_id = ?

-- name: delete_kv_history
-- A removed node's context history, for the same reason.
DELETE FROM kv_history WHERE graph_id = ? AND node_id = ?

-- name: delete_node
-- The removed node itself.
DELETE FROM nodes WHERE graph_id = ? AND id = ?
