-- PostgreSQL text of the `export` queries that differ.

-- name: snapshot
-- The snapshot document as text, as SQLite's block gives it: the nodes joined in the order
-- string_agg is told (an ORDER BY in a subquery does not bind an aggregate here); the graphs
-- list as json_agg writes it.
SELECT '{"version": ' || %(version)s::text || ', "exported_at": ' || to_json(%(at)s::text)::text
  || ', "graphs": ' || (SELECT coalesce(json_agg(json_build_object('id', g.id, 'kind', g.kind,
       'status', g.status, 'title', g.title) ORDER BY g.created_at, g.id), '[]'::json)::text
       FROM graphs g
       WHERE (g.status = 'active' AND CAST(%(graph)s AS TEXT) IS NULL OR g.id = %(graph)s))
  || ', "nodes": [' || coalesce(chr(10) || string_agg(o.node, ',' || chr(10)
                                        ORDER BY g.created_at, o.graph_id, o.id), '')
  || chr(10) || ']}'
  FROM node_objects o JOIN graphs g ON g.id = o.graph_id
 WHERE (g.status = 'active' AND CAST(%(graph)s AS TEXT) IS NULL OR g.id = %(graph)s)
