-- What starting a sprint reads of the workgraph store (`sprint.lifecycle`; SQLite or
-- PostgreSQL).

-- name: active_sprint_graphs
-- The sprint graphs still active, by id: with no sprint active, each is an orphan to close.
SELECT id FROM graphs WHERE kind = 'sprint' AND status = 'active' ORDER BY id
