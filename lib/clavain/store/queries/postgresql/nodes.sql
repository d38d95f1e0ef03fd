-- PostgreSQL text of the `nodes` queries that differ: a JSON array of ids is read with
-- jsonb_array_elements_text.

-- name: existing_ids
-- Which of the ids (a JSON array) are nodes of the graph already.
SELECT id FROM nodes WHERE graph_id = %s AND id IN (SELECT jsonb_array_elements_text(%s::jsonb))
