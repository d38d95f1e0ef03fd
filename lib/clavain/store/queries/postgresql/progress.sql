-- The progress queries whose PostgreSQL text differs: a JSON array of ids is read with
-- jsonb_array_elements_text (the same parameter as SQLite's json_each).

-- name: done_among
SELECT id FROM nodes WHERE graph_id = %s AND status = 'done'
   AND id IN (SELECT jsonb_array_elements_text(%s::jsonb))
