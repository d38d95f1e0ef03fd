-- The escalation queries whose PostgreSQL text differs: a JSON array of ids is read with
-- jsonb_array_elements_text (the same parameter as SQLite's json_each).

-- name: inner_dependencies
SELECT depends_on_id FROM deps WHERE graph_id = %s
   AND node_id IN (SELECT jsonb_array_elements_text(%s::jsonb))

-- name: dependents_outside
SELECT node_id, kind FROM deps WHERE graph_id = %s AND depends_on_id = %s
   AND node_id NOT IN (SELECT jsonb_array_elements_text(%s::jsonb))
 ORDER BY node_id
