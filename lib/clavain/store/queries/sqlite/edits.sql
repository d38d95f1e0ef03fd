-- Changing a workgraph by hand (`workgraph.edits`): a person's answer, and the planner's
-- statistics after a large batch.

-- name: answer
-- A needs_human node back to open, its question kept with the answer beside it (JSON text),
-- backoff and claim cleared.
UPDATE nodes SET status = 'open', human_question_json = ?, blocked_until = NULL,
       lock_run_id = NULL, lock_started_at = NULL, lock_renewed_at = NULL, lock_pid = NULL,
       lock_host = NULL, lock_lease_ms = NULL, lock_runner_pid = NULL,
       lock_runner_identity = NULL, updated_at = ?
 WHERE graph_id = ? AND id = ?

-- name: refresh_statistics
-- After a batch of BULK_ROWS nodes or more: nothing on SQLite, whose planner reads the indexes
-- as they are (and no ANALYZE was ever run on a project's file).
