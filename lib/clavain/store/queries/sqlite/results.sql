-- Applying a runner's result (`workgraph.results`): may it be applied, and the transition that
-- finishes the claim (reason `finished`, `workgraph.claims`).

-- name: unmet_dependencies
-- The dependencies of a node (graph, node) that are not satisfied: not done, or for a
-- `settled` edge neither done nor failed.
SELECT d.depends_on_id FROM deps d
  JOIN nodes dn ON dn.graph_id = d.graph_id AND dn.id = d.depends_on_id
  WHERE d.graph_id = ? AND d.node_id = ? AND NOT (dn.status = 'done'
    OR (d.kind = 'settled' AND dn.status = 'failed')) ORDER BY d.depends_on_id

-- name: record
-- The node after its result: its new status, attempts, backoff, completion and question, and
-- every claim column cleared but the generation (the claim is finished).
UPDATE nodes SET status = :status, attempts = :attempts, blocked_until = :blocked_until,
      completed_at = :completed_at, human_question_json = :question, lock_run_id = NULL,
      lock_started_at = NULL, lock_renewed_at = NULL, lock_pid = NULL, lock_host = NULL,
      lock_lease_ms = NULL, lock_runner_pid = NULL, lock_runner_identity = NULL,
      updated_at = :at
  WHERE graph_id = :graph AND id = :id

-- name: any_task
-- Whether any of the ids (a JSON array) is a task of the graph: added work then gets its
-- verify gate.
SELECT 1 FROM nodes WHERE graph_id = ? AND type = 'task'
  AND id IN (SELECT value FROM json_each(?)) LIMIT 1

-- name: children
-- The nodes a node (graph, node) added, by id.
SELECT id FROM nodes WHERE graph_id = ? AND parent_id = ?
