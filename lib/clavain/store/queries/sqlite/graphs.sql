-- A project's workgraphs (`workgraph.graphs`): a graph's row, the listing with node counts, and
-- closing a graph (shipped or abandoned) with its unfinished nodes cancelled.

-- name: ensure
-- Make the graph's row if it is missing (its kind: default, sprint or run).
INSERT INTO graphs (id, kind, title, created_at) VALUES (?, ?, ?, ?)
ON CONFLICT (id) DO NOTHING

-- name: status
-- The graph's status (active, shipped or abandoned).
SELECT status FROM graphs WHERE id = ?

-- name: get
-- One graph's row.
SELECT id, kind, status, title, created_at, closed_at FROM graphs WHERE id = ?

-- name: list
-- Every graph, oldest first, with its node count and how many of them are done.
SELECT g.id, g.kind, g.status, g.title, g.created_at, g.closed_at,
       (SELECT count(*) FROM nodes n WHERE n.graph_id = g.id) AS nodes,
       (SELECT count(*) FROM nodes n WHERE n.graph_id = g.id AND n.status = 'done') AS done
  FROM graphs g ORDER BY g.created_at, g.id

-- name: unfinished
-- The graph's unfinished nodes (statuses.UNFINISHED) and their statuses: what closing cancels.
SELECT id, status FROM nodes
 WHERE graph_id = ? AND status IN ('open', 'in_progress', 'needs_human') ORDER BY id

-- name: cancel_unfinished
-- Cancel the graph's unfinished nodes, their claims and backoffs cleared: they never run.
UPDATE nodes SET status = 'cancelled', lock_run_id = NULL, lock_started_at = NULL,
       lock_renewed_at = NULL, lock_pid = NULL, lock_host = NULL, lock_lease_ms = NULL,
       lock_runner_pid = NULL, lock_runner_identity = NULL, blocked_until = NULL, updated_at = ?
 WHERE graph_id = ? AND status IN ('open', 'in_progress', 'needs_human')

-- name: close
-- Mark the graph shipped or abandoned.
UPDATE graphs SET status = ?, closed_at = ? WHERE id = ?
