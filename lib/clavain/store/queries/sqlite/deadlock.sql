-- Work that can never finish on its own (`workgraph.deadlock`): whether anything can still
-- move, the unmet edges of stuck nodes, and the blockers (failed nodes nothing takes care of,
-- nodes waiting on a person).

-- name: is_live
-- A row when something in the graph can still move without outside help: running, or open with
-- its dependencies met (runnable now or after its backoff).
SELECT 1 FROM nodes WHERE graph_id = ?
   AND (status = 'in_progress' OR (status = 'open' AND unmet_deps = 0)) LIMIT 1

-- name: unmet_edges
-- Edges from stuck open nodes to the dependencies that do not satisfy them yet (a settled edge
-- is satisfied by a failed dependency too), with the dependency's status.
SELECT d.node_id, d.depends_on_id, dn.status
  FROM deps d JOIN nodes n ON n.graph_id = d.graph_id AND n.id = d.node_id
    JOIN nodes dn ON dn.graph_id = d.graph_id AND dn.id = d.depends_on_id
 WHERE d.graph_id = ? AND n.status = 'open' AND n.unmet_deps > 0
   AND NOT (dn.status = 'done' OR (d.kind = 'settled' AND dn.status = 'failed'))
 ORDER BY d.node_id, d.depends_on_id

-- name: unresolved_failed
-- Failed nodes nothing will take care of: not replaced, and no escalation pending for them (its
-- node `plan-escalate-<id>`, escalation.ESCALATION_PREFIX, unfinished: escalation.PENDING);
-- with the error they failed with.
SELECT n.id, n.escalations, e.status AS escalation_status,
       (SELECT value_text FROM kv_latest k WHERE k.graph_id = n.graph_id AND k.node_id = n.id
           AND k.key = 'err.summary') AS error
  FROM nodes n LEFT JOIN nodes e
    ON e.graph_id = n.graph_id AND e.id = 'plan-escalate-' || n.id
 WHERE n.graph_id = ? AND n.status = 'failed' AND n.superseded_by IS NULL
   AND (e.id IS NULL OR e.status NOT IN ('open', 'in_progress', 'needs_human'))
 ORDER BY n.id

-- name: waiting_on_people
-- Nodes waiting for a person's answer, with their question.
SELECT id, json_extract(human_question_json, '$.question') AS question
  FROM nodes WHERE graph_id = ? AND status = 'needs_human' ORDER BY id

-- name: auto_resets
-- How often a node was reopened automatically (defaults.autoResetFailedMax bounds it).
SELECT auto_resets FROM nodes WHERE graph_id = ? AND id = ?
