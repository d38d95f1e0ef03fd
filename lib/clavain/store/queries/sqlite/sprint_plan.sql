-- A plan recorded again (`sprint.plan`): tasks it drops leave the graph, tasks it changes take
-- the new definition, on the workgraph store (SQLite or PostgreSQL).
-- A list of ids is bound as one JSON array text: `IN (SELECT value FROM json_each(?))`.

-- name: task_started
-- Whether the node ever moved out of `open` (a runner held it): a started task stays.
SELECT 1 FROM events WHERE graph_id = ? AND node_id = ? AND to_status IS NOT NULL
   AND to_status <> 'open' LIMIT 1

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

-- name: update_task
-- A task that never started takes the plan's new definition.
UPDATE nodes SET title = ?, verify_json = ?, ownership_json = ?, acceptance_json = ?,
       inputs_json = ?, runner = ?, retry_policy_json = ?, commands_json = ?, updated_at = ?
 WHERE graph_id = ? AND id = ?

-- name: depends_on
-- What a node depends on now.
SELECT depends_on_id FROM deps WHERE graph_id = ? AND node_id = ?

-- name: delete_dep
-- A dependency the plan no longer lists.
DELETE FROM deps WHERE graph_id = ? AND node_id = ? AND depends_on_id = ?

-- name: known_nodes
-- Which of the ids (a JSON array) are nodes of the graph: a new dependency must name one.
SELECT id FROM nodes WHERE graph_id = ? AND id IN (SELECT value FROM json_each(?))

-- name: add_dep
-- A dependency the plan adds.
INSERT INTO deps (graph_id, node_id, depends_on_id) VALUES (?, ?, ?)

-- name: in_cycle
-- Whether the node is among its own (transitive) dependencies: the new ones closed a cycle.
WITH RECURSIVE up(id) AS (SELECT depends_on_id FROM deps WHERE graph_id = ? AND node_id = ?
                          UNION SELECT d.depends_on_id FROM deps d JOIN up
                                   ON d.graph_id = ? AND d.node_id = up.id)
SELECT 1 FROM up WHERE id = ? LIMIT 1

-- name: update_verify_node
-- A task's verify node that has not run takes the task's new title, checks and acceptance.
UPDATE nodes SET title = ?, verify_json = ?, acceptance_json = ?, updated_at = ?
 WHERE graph_id = ? AND id = ? AND status = 'open'
