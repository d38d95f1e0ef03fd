-- Runner packets (`workgraph.packets`): what a fresh agent's prompt for one node reads besides
-- the node itself.

-- name: latest_text
-- An input's newest inline text (NULL when the value lives in an artifact file); no row when
-- it was never written.
SELECT value_text FROM kv_latest WHERE graph_id = ? AND node_id = ? AND key = ?

-- name: upstream
-- The nodes a node depends on, by id, with the task each verify node among them checks.
SELECT n.id, n.type, n.verifies FROM deps d JOIN nodes n
    ON n.graph_id = d.graph_id AND n.id = d.depends_on_id
 WHERE d.graph_id = ? AND d.node_id = ? ORDER BY n.id

-- name: ancestors
-- A node's chain of parents, root first (graph, node, graph); the depth guard keeps a corrupt
-- parent cycle from looping forever.
WITH RECURSIVE up(id, parent_id, type, title, depth) AS (
  SELECT id, parent_id, type, title, 0 FROM nodes WHERE graph_id = ? AND id = ?
  UNION ALL SELECT n.id, n.parent_id, n.type, n.title, up.depth + 1
  FROM nodes n JOIN up ON n.graph_id = ? AND n.id = up.parent_id WHERE up.depth < 64)
SELECT id, type, title FROM up WHERE depth > 0 ORDER BY depth DESC
