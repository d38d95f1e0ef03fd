-- 0014: how a node looks outside the database, defined once. `node_objects.node` is one JSON
-- object per node (snake_case keys, like every file and `--json` output Clavain writes; the JSON
-- columns decoded; `depends_on` in id order, as the deps primary key reads them), built by the
-- database so `graph show`, `graph ls`, a claim and the snapshot share one shape and no per-node
-- Python runs. `status` and `rank` are there to filter and order by; SQLite flattens the view
-- into each query, so a query reading it uses the nodes indexes as if it read `nodes`.
-- migrations_postgresql/0003_node_objects.sql is the same view, key for key, in PostgreSQL's
-- functions. A later migration that rebuilds `nodes` (copy, drop, rename) drops this view first
-- and makes it again after.
CREATE VIEW node_objects AS
  SELECT n.graph_id AS graph_id, n.id AS id, n.status AS status, n.rank AS rank,
    json_object('graph_id', n.graph_id, 'id', n.id, 'title', n.title, 'type', n.type,
      'status', n.status, 'parent_id', n.parent_id, 'runner', n.runner,
      'inputs', json(n.inputs_json), 'ownership', json(n.ownership_json),
      'acceptance', json(n.acceptance_json), 'verify', json(n.verify_json),
      'commands', json(n.commands_json), 'retry_policy', json(n.retry_policy_json),
      'attempts', n.attempts, 'auto_resets', n.auto_resets, 'escalations', n.escalations,
      'superseded_by', n.superseded_by, 'verifies', n.verifies, 'unmet_deps', n.unmet_deps,
      'blocked_until', n.blocked_until, 'lock_run_id', n.lock_run_id,
      'lock_generation', n.lock_generation, 'lock_started_at', n.lock_started_at,
      'lock_renewed_at', n.lock_renewed_at, 'lock_pid', n.lock_pid, 'lock_host', n.lock_host,
      'lock_lease_ms', n.lock_lease_ms, 'lock_runner_pid', n.lock_runner_pid,
      'lock_runner_identity', n.lock_runner_identity, 'crashes', n.crashes,
      'human_question', json(n.human_question_json), 'created_at', n.created_at,
      'updated_at', n.updated_at, 'completed_at', n.completed_at,
      'depends_on', (SELECT json_group_array(d.depends_on_id) FROM deps d
                     WHERE d.graph_id = n.graph_id AND d.node_id = n.id)) AS node
  FROM nodes n;
