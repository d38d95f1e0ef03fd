-- PostgreSQL text of the `edits` queries that differ.

-- name: refresh_statistics
-- After a batch of BULK_ROWS nodes or more the planner learns the tables' new shape now, not at
-- the next automatic ANALYZE (a minute away): claims right after a big plan stay on the ready
-- index.
ANALYZE nodes, deps
