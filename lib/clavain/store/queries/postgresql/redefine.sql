-- The redefine queries whose PostgreSQL text differs: a JSON array of ids is read with
-- jsonb_array_elements_text (the same parameter as SQLite's json_each).

-- name: known_nodes
SELECT id FROM nodes WHERE graph_id = %s AND id IN (SELECT jsonb_array_elements_text(%s::jsonb))
