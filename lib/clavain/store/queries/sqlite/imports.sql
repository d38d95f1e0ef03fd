-- `clavain graph import` (`workgraph.imports`): what an import checks before it writes.

-- name: node_ids
-- Every node id of the graph, by id: the ids a spec may depend on (plan lint's known ids).
SELECT id FROM nodes WHERE graph_id = ? ORDER BY id
