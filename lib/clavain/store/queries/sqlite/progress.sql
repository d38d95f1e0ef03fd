-- Did a loop iteration move the work forward (`loop.progress`): the workgraph's done nodes.
-- A list of ids is bound as one JSON array text: `IN (SELECT value FROM json_each(?))`.

-- name: done_count
-- How many of the graph's nodes are done (compared before and after an iteration).
SELECT count(*) FROM nodes WHERE graph_id = ? AND status = 'done'

-- name: done_among
-- Which of the given node ids (a JSON array) the graph says are done.
SELECT id FROM nodes WHERE graph_id = ? AND status = 'done'
   AND id IN (SELECT value FROM json_each(?))
