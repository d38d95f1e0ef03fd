-- 0002: what an orchestrator needs for failures to converge.

-- A live runner renews its lease (`clavain graph heartbeat`); a lock is stale once
-- coalesce(lock_renewed_at, lock_started_at) is older than defaults.lockLeaseSeconds.
ALTER TABLE nodes ADD COLUMN lock_renewed_at TEXT;

-- How many times this node, failed for good, was handed to its escalation node
-- (bounded by defaults.maxEscalations; past that it is reported as blocking).
ALTER TABLE nodes ADD COLUMN escalations INTEGER NOT NULL DEFAULT 0;

-- The escalation node whose added nodes replaced this failed node: its dependents now wait on
-- those nodes instead, so it blocks nothing (events record each re-pointed edge).
ALTER TABLE nodes ADD COLUMN superseded_by TEXT;

-- The task a scaffolded verify node checks. Its dependency may later be re-pointed to the nodes
-- that replaced the task; the replacements still need verify nodes of their own.
ALTER TABLE nodes ADD COLUMN verifies TEXT;
CREATE INDEX nodes_verifies ON nodes (verifies) WHERE verifies IS NOT NULL;

-- A node's question to a person is not the sprint checkpoint: name it for what it holds.
ALTER TABLE nodes RENAME COLUMN checkpoint_json TO human_question_json;

-- Stored JSON follows the one output style (snake_case), like every file Clavain writes.
UPDATE nodes SET retry_policy_json = json_object(
    'max_attempts', json_extract(retry_policy_json, '$.maxAttempts'))
  WHERE json_extract(retry_policy_json, '$.maxAttempts') IS NOT NULL;

UPDATE nodes SET inputs_json = (
    SELECT json_group_array(json_patch(
      json_object('node_id', json_extract(ref.value, '$.nodeId'),
                  'key', json_extract(ref.value, '$.key')),
      CASE WHEN json_extract(ref.value, '$.as') IS NULL THEN '{}'
           ELSE json_object('as', json_extract(ref.value, '$.as')) END))
    FROM json_each(nodes.inputs_json) AS ref)
  WHERE inputs_json <> '[]';

UPDATE nodes SET human_question_json = json_object(
    'question', json_extract(human_question_json, '$.question'),
    'summary', json_extract(human_question_json, '$.summary'),
    'run_id', json_extract(human_question_json, '$.runId'),
    'asked_at', json_extract(human_question_json, '$.askedAt'),
    'answer', json_extract(human_question_json, '$.answer'),
    'answered_at', json_extract(human_question_json, '$.answeredAt'))
  WHERE human_question_json IS NOT NULL;

UPDATE nodes SET verifies = json_extract(inputs_json, '$[0].node_id')
  WHERE type = 'verify' AND json_extract(inputs_json, '$[0].key') = 'out.summary'
    AND json_extract(inputs_json, '$[0].as') = 'taskSummary';

-- Escalations the old code created count as one hand-over each.
UPDATE nodes SET escalations = 1
  WHERE EXISTS (SELECT 1 FROM nodes e WHERE e.id = 'plan-escalate-' || nodes.id);
