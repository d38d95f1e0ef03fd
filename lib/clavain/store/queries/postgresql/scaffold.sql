-- name: tasks_without_verify
-- Live tasks that no verify node checks yet (the SQLite text names its index; the server's
-- planner finds deps_depends_on itself).
SELECT t.id, t.title, t.parent_id, t.acceptance_json, t.verify_json
  FROM nodes t
 WHERE t.graph_id = %s AND t.type = 'task' AND t.superseded_by IS NULL
   AND t.status <> 'cancelled'
   AND NOT EXISTS (SELECT 1 FROM nodes v WHERE v.graph_id = t.graph_id AND v.type = 'verify'
                   AND v.verifies = t.id)
   AND NOT EXISTS (
     SELECT 1 FROM deps d JOIN nodes v ON v.graph_id = d.graph_id AND v.id = d.node_id
      WHERE d.graph_id = t.graph_id AND d.depends_on_id = t.id AND v.type = 'verify'
        AND v.verifies IS NULL)
 ORDER BY t.id
