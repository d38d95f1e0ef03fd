-- The results queries whose PostgreSQL text differs: a JSON array of ids is read with
-- jsonb_array_elements_text (the same parameter as SQLite's json_each).

-- name: any_task
SELECT 1 FROM nodes WHERE graph_id = %s AND type = 'task'
  AND id IN (SELECT jsonb_array_elements_text(%s::jsonb)) LIMIT 1
