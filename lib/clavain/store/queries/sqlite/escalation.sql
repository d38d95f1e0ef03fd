-- What happens after a node fails for good (`workgraph.escalation`): its planner node is created
-- or reopened, and what that planner adds replaces (or precedes) the failed node.
-- A list of ids is bound as one JSON array text: `IN (SELECT value FROM json_each(?))`.

-- name: node_status
-- The status of one node (the escalation node: still pending, finished, or not made yet).
SELECT status FROM nodes WHERE graph_id = ? AND id = ?

-- name: count_escalation
-- One more hand-over of the failed node to its escalation (`defaults.maxEscalations` caps it).
UPDATE nodes SET escalations = escalations + 1 WHERE graph_id = ? AND id = ?

-- name: inner_dependencies
-- What the added nodes (a JSON array) depend on: an added node in it is not a sink.
SELECT depends_on_id FROM deps WHERE graph_id = ?
   AND node_id IN (SELECT value FROM json_each(?))

-- name: reaches
-- Whether a node (the first parameter) depends on another (the third), directly or not. The
-- cast types the bound id for PostgreSQL.
WITH RECURSIVE up(id) AS (SELECT CAST(? AS TEXT)
  UNION SELECT d.depends_on_id FROM deps d JOIN up ON d.graph_id = ? AND d.node_id = up.id)
SELECT 1 FROM up WHERE id = ? LIMIT 1

-- name: children
-- The nodes a node added, over all its attempts (not the verify nodes scaffolding gave them,
-- which share their parent).
SELECT id FROM nodes WHERE graph_id = ? AND parent_id = ? AND verifies IS NULL ORDER BY id

-- name: close_pending
-- Close an escalation no planner holds yet (the failed node runs again first); a row when it
-- was closed.
UPDATE nodes SET status = 'done', completed_at = ?, updated_at = ?
 WHERE graph_id = ? AND id = ? AND status IN ('open', 'needs_human') AND lock_run_id IS NULL
RETURNING status

-- name: dependents_outside
-- The edges onto a plan from nodes other than the ones it added (a JSON array): what must
-- also wait for the plan's added work.
SELECT node_id, kind FROM deps WHERE graph_id = ? AND depends_on_id = ?
   AND node_id NOT IN (SELECT value FROM json_each(?))
 ORDER BY node_id

-- name: has_dependency
-- Whether a node already depends on another directly.
SELECT 1 FROM deps WHERE graph_id = ? AND node_id = ? AND depends_on_id = ?

-- name: add_dependency_of_kind
-- A dependent of a plan waits on the end of the plan's added work, with its edge's kind.
INSERT INTO deps (graph_id, node_id, depends_on_id, kind) VALUES (?, ?, ?, ?)

-- name: add_dependency_if_missing
-- A failed check runs again after what its escalation added.
INSERT INTO deps (graph_id, node_id, depends_on_id) VALUES (?, ?, ?) ON CONFLICT DO NOTHING

-- name: dependents_except
-- The edges onto the failed node, but its own escalation's: what is re-pointed.
SELECT node_id, kind FROM deps WHERE graph_id = ? AND depends_on_id = ? AND node_id <> ?
 ORDER BY node_id

-- name: drop_dependency
-- A dependent of the replaced node stops waiting on it.
DELETE FROM deps WHERE graph_id = ? AND node_id = ? AND depends_on_id = ?

-- name: add_dependency_of_kind_if_missing
-- A dependent of the replaced node waits on a replacement instead, with its edge's kind.
INSERT INTO deps (graph_id, node_id, depends_on_id, kind) VALUES (?, ?, ?, ?)
ON CONFLICT DO NOTHING

-- name: supersede
-- Mark the failed node replaced by its escalation: it blocks nothing any more.
UPDATE nodes SET superseded_by = ?, updated_at = ? WHERE graph_id = ? AND id = ?

-- name: inputs_of
-- A node's input references (JSON), to re-point those that read the replaced node.
SELECT inputs_json FROM nodes WHERE graph_id = ? AND id = ?

-- name: set_inputs
-- A dependent reads the replacement's keys instead of the replaced node's.
UPDATE nodes SET inputs_json = ? WHERE graph_id = ? AND id = ?
