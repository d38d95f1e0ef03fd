-- The gates every plan needs (`workgraph.scaffold`): a verify node per task, one integrate node
-- after every verify node, one final_verify after it. The casts type bound ids for PostgreSQL.

-- name: tasks_without_verify
-- Live tasks that no verify node checks yet: neither one scaffolding made (`verifies`) nor one
-- a person or planner made that depends on the task.
SELECT t.id, t.title, t.parent_id, t.acceptance_json, t.verify_json
  FROM nodes t
 WHERE t.graph_id = ? AND t.type = 'task' AND t.superseded_by IS NULL
   AND t.status <> 'cancelled'
   AND NOT EXISTS (SELECT 1 FROM nodes v WHERE v.graph_id = t.graph_id AND v.type = 'verify'
                   AND v.verifies = t.id)
   AND NOT EXISTS (
     -- From the task's dependents (deps_depends_on), never a scan of the graph's nodes per
     -- task: that made `graph scaffold` quadratic (23 s at 10k tasks).
     SELECT 1 FROM deps d INDEXED BY deps_depends_on
      CROSS JOIN nodes v ON v.graph_id = d.graph_id AND v.id = d.node_id
      WHERE d.graph_id = t.graph_id AND d.depends_on_id = t.id AND v.type = 'verify'
        AND v.verifies IS NULL)
 ORDER BY t.id

-- name: node_exists
-- Whether an id is taken in the graph (a generated id then gets a number).
SELECT 1 FROM nodes WHERE graph_id = ? AND id = ?

-- name: singleton
-- The graph's one node of a type (integrate, final_verify): its id and status.
SELECT id, status FROM nodes WHERE graph_id = ? AND type = ? ORDER BY id LIMIT 1

-- name: set_verifies
-- Which task a generated verify node checks.
UPDATE nodes SET verifies = ? WHERE graph_id = ? AND id = ?

-- name: has_task
-- Whether the graph has any task (no task: no integrate or final gate).
SELECT 1 FROM nodes WHERE graph_id = ? AND type = 'task' LIMIT 1

-- name: link_integrate
-- The integrate node waits on every verify node that does not itself wait for integration
-- (that edge would close a cycle): `down` is the integrate node and everything after it.
-- Its row count: how many edges were added.
INSERT INTO deps (graph_id, node_id, depends_on_id)
SELECT :graph, :integrate, x.id FROM (
  WITH RECURSIVE down(id) AS (SELECT CAST(:integrate AS TEXT) UNION
    SELECT d.node_id FROM deps d JOIN down ON d.graph_id = :graph AND d.depends_on_id = down.id)
  SELECT id FROM nodes WHERE graph_id = :graph AND type = 'verify'
     AND id NOT IN (SELECT id FROM down)) x
 WHERE x.id <> :integrate
ON CONFLICT DO NOTHING

-- name: link_final_to_integrate
-- An existing final gate waits on the integrate node, unless the integrate node comes after
-- it (`down`: the final node and everything after it). Its row count: edges added.
INSERT INTO deps (graph_id, node_id, depends_on_id)
SELECT :graph, :final, x.id FROM (
  WITH RECURSIVE down(id) AS (SELECT CAST(:final AS TEXT) UNION
    SELECT d.node_id FROM deps d JOIN down ON d.graph_id = :graph AND d.depends_on_id = down.id)
  SELECT CAST(:integrate AS TEXT) AS id
   WHERE CAST(:integrate AS TEXT) NOT IN (SELECT id FROM down)) x
 WHERE x.id <> :final
ON CONFLICT DO NOTHING

-- name: link_final_to_late_verify
-- Verify nodes that come after integration (a task that depends on it) but not after the final
-- gate: integration cannot wait for them (a cycle), so the final gate, which re-runs their
-- checks, does. Its row count: edges added.
INSERT INTO deps (graph_id, node_id, depends_on_id)
SELECT :graph, :final, x.id FROM (
  WITH RECURSIVE
    after_integrate(id) AS (SELECT CAST(:integrate AS TEXT) UNION
      SELECT d.node_id FROM deps d JOIN after_integrate a
        ON d.graph_id = :graph AND d.depends_on_id = a.id),
    after_final(id) AS (SELECT CAST(:final AS TEXT) UNION
      SELECT d.node_id FROM deps d JOIN after_final a
        ON d.graph_id = :graph AND d.depends_on_id = a.id)
  SELECT id FROM nodes WHERE graph_id = :graph AND type = 'verify'
     AND id IN (SELECT id FROM after_integrate) AND id NOT IN (SELECT id FROM after_final)) x
 WHERE x.id <> :final
ON CONFLICT DO NOTHING

-- name: verify_json_of
-- A node's own check commands (JSON).
SELECT verify_json FROM nodes WHERE graph_id = ? AND id = ?

-- name: verify_commands
-- Every live verify node's check commands (JSON), in id order: what the final gate re-runs.
SELECT verify_json FROM nodes WHERE graph_id = ? AND type = 'verify' AND verify_json <> '[]'
   AND status <> 'cancelled'
 ORDER BY id

-- name: set_verify_json
-- The final gate's gathered check commands.
UPDATE nodes SET verify_json = ?, updated_at = ? WHERE graph_id = ? AND id = ?

-- name: node_status
-- One node's status (a gate: finished gates reopen for new verify nodes).
SELECT status FROM nodes WHERE graph_id = ? AND id = ?
