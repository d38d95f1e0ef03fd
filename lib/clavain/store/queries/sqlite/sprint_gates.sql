-- What a sprint step's gate reads of the sprint's graph (`sprint.gates`), on the workgraph
-- store (SQLite or PostgreSQL): tasks done and verified, nothing left open before ship.

-- name: live_tasks
-- The graph's tasks not cancelled, by id, with their status and what superseded them.
SELECT id, status, superseded_by FROM nodes WHERE graph_id = ? AND type = 'task'
   AND status <> 'cancelled' ORDER BY id

-- name: checks_of_task
-- The verify nodes that check a task: the one scaffolding made (`verifies`) and any other
-- that depends on it. Params: graph, task, task.
SELECT v.id, v.status FROM nodes v WHERE v.graph_id = ? AND v.type = 'verify'
   AND (v.verifies = ? OR EXISTS (SELECT 1 FROM deps d WHERE d.graph_id = v.graph_id
                                   AND d.node_id = v.id AND d.depends_on_id = ?))
 ORDER BY v.id

-- name: open_nodes
-- Every node not done (a failed node another superseded counts as settled), in rank order.
SELECT id, status FROM nodes WHERE graph_id = ? AND status <> 'done'
   AND NOT (status = 'failed' AND superseded_by IS NOT NULL) ORDER BY rank, id

-- name: has_task
-- Whether the graph has any task (none: nothing was built or checked).
SELECT 1 FROM nodes WHERE graph_id = ? AND type = 'task' LIMIT 1

-- name: last_done_run
-- The run that last moved the node to done (matched against the verifier's marker).
SELECT run_id FROM events WHERE graph_id = ? AND node_id = ? AND to_status = 'done'
 ORDER BY id DESC LIMIT 1
