-- What runs next and why nothing can (`workgraph.schedule`, `loop.iterate`): reads only.

-- name: status_counts
-- How many nodes of the graph are in each status.
SELECT status, count(*) FROM nodes WHERE graph_id = ? GROUP BY status

-- name: running
-- The graph's nodes in progress and the run holding each.
SELECT id, lock_run_id FROM nodes WHERE graph_id = ? AND status = 'in_progress' ORDER BY id

-- name: backoff
-- Ready nodes still waiting for their retry backoff at a moment (graph, now), soonest first.
SELECT id, blocked_until FROM nodes WHERE graph_id = ? AND status = 'open'
  AND unmet_deps = 0 AND lock_run_id IS NULL AND blocked_until > ?
  ORDER BY blocked_until, id

-- name: first_ready
-- The next ready node at a moment (graph, now): one given back since a claim found nothing.
SELECT id FROM nodes WHERE graph_id = ? AND status = 'open' AND unmet_deps = 0
  AND lock_run_id IS NULL AND (blocked_until IS NULL OR blocked_until <= ?)
  ORDER BY rank, id LIMIT 1

-- name: questions
-- Nodes waiting for a person's answer, with the question asked.
SELECT id, json_extract(human_question_json, '$.question') AS q
  FROM nodes WHERE graph_id = ? AND status = 'needs_human' ORDER BY id

-- name: first_unfinished
-- Any node still open or in progress (claimed or given back elsewhere while a look ran).
SELECT id FROM nodes WHERE graph_id = ? AND status IN ('open', 'in_progress') LIMIT 1

-- name: runnable
-- Every ready node of :graph at :now with what a loop's prompt shows of it, in claim order
-- (the ready predicate of `claims.ready_ownership`).
SELECT id, type, title, verify_json, ownership_json FROM nodes WHERE graph_id = :graph AND status = 'open' AND unmet_deps = 0
    AND lock_run_id IS NULL AND (blocked_until IS NULL OR blocked_until <= :now)
  ORDER BY rank, id
