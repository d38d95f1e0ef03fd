-- A node that has not started takes a new definition (`workgraph.redefine`): a sprint's plan
-- recorded again, an import run again. Every statement is scoped to one graph.
-- A list of ids is bound as one JSON array text: `IN (SELECT value FROM json_each(?))`.

-- name: task_started
-- Whether the node ever moved out of `open` (a runner held it): a started node keeps its
-- definition.
SELECT 1 FROM events WHERE graph_id = ? AND node_id = ? AND to_status IS NOT NULL
   AND to_status <> 'open' LIMIT 1

-- name: update_task
-- A node that never started takes its new definition.
UPDATE nodes SET title = ?, verify_json = ?, ownership_json = ?, acceptance_json = ?,
       inputs_json = ?, runner = ?, retry_policy_json = ?, commands_json = ?, updated_at = ?
 WHERE graph_id = ? AND id = ?

-- name: set_origin
-- An imported node's origin as its source says now (status, priority, url may move at any
-- time, started or not: they are not its definition).
UPDATE nodes SET origin_json = ?, updated_at = ? WHERE graph_id = ? AND id = ?

-- name: depends_on
-- What a node depends on now.
SELECT depends_on_id FROM deps WHERE graph_id = ? AND node_id = ?

-- name: delete_dep
-- A dependency the new definition no longer lists.
DELETE FROM deps WHERE graph_id = ? AND node_id = ? AND depends_on_id = ?

-- name: known_nodes
-- Which of the ids (a JSON array) are nodes of the graph: a new dependency must name one.
SELECT id FROM nodes WHERE graph_id = ? AND id IN (SELECT value FROM json_each(?))

-- name: add_dep
-- A dependency the new definition adds.
INSERT INTO deps (graph_id, node_id, depends_on_id) VALUES (?, ?, ?)

-- name: in_cycle
-- Whether the node is among its own (transitive) dependencies: the new ones closed a cycle.
WITH RECURSIVE up(id) AS (SELECT depends_on_id FROM deps WHERE graph_id = ? AND node_id = ?
                          UNION SELECT d.depends_on_id FROM deps d JOIN up
                                   ON d.graph_id = ? AND d.node_id = up.id)
SELECT 1 FROM up WHERE id = ? LIMIT 1

-- name: verify_nodes_of
-- The verify nodes scaffolding made for a task (`verifies`).
SELECT id FROM nodes WHERE graph_id = ? AND type = 'verify' AND verifies = ?

-- name: update_verify_node
-- A task's verify node that has not run takes the task's new title, checks and acceptance.
UPDATE nodes SET title = ?, verify_json = ?, acceptance_json = ?, updated_at = ?
 WHERE graph_id = ? AND id = ? AND status = 'open'

-- name: mark_done
-- An open node whose item its source marks done: done without running (its dependents can run;
-- the status trigger counts them down).
UPDATE nodes SET status = 'done', completed_at = ?, updated_at = ?
 WHERE graph_id = ? AND id = ? AND status = 'open'
