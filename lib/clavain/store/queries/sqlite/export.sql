-- Read-only views of the workgraphs (`workgraph.export`): the `.clavain/workgraph.json`
-- snapshot, assembled by the database in one statement (no per-node Python), and the rows of
-- a Mermaid chart. A snapshot holds every active graph (`:graph` NULL) or the one named.

-- name: snapshot
-- The snapshot document as text: version, time, the graphs (oldest first) and their nodes
-- (`node_objects`), one node per line so the file stays diffable by people.
SELECT '{"version": ' || :version || ', "exported_at": ' || json_quote(:at)
  || ', "graphs": ' || (SELECT json_group_array(json_object('id', id, 'kind', kind,
       'status', status, 'title', title)) FROM (SELECT g.* FROM graphs g
       WHERE (g.status = 'active' AND CAST(:graph AS TEXT) IS NULL OR g.id = :graph)
       ORDER BY g.created_at, g.id))
  || ', "nodes": [' || coalesce(char(10) || group_concat(node, ',' || char(10)), '')
  || char(10) || ']}'
  FROM (SELECT o.node AS node FROM node_objects o JOIN graphs g ON g.id = o.graph_id
        WHERE (g.status = 'active' AND CAST(:graph AS TEXT) IS NULL OR g.id = :graph)
        ORDER BY g.created_at, o.graph_id, o.id)

-- name: chart_nodes
-- The graph's nodes for a chart box each, by id.
SELECT id, title, type, status FROM nodes WHERE graph_id = ? ORDER BY id

-- name: chart_dependencies
-- The graph's dependency edges for a chart arrow each.
SELECT node_id, depends_on_id, kind FROM deps WHERE graph_id = ? ORDER BY node_id, depends_on_id
