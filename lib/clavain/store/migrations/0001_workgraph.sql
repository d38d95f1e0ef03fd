-- 0001: the workgraph — nodes, their dependencies, node-scoped KV and an audit trail of status changes.
-- Timestamps are ISO-8601 UTC text ('2026-11-21T20:30:00.123Z'), so they sort as text.

CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);

CREATE TABLE nodes (
  id                TEXT PRIMARY KEY,
  title             TEXT NOT NULL DEFAULT '',
  type              TEXT NOT NULL
                    CHECK (type IN ('plan', 'epic', 'task', 'verify', 'integrate', 'final_verify')),
  status            TEXT NOT NULL DEFAULT 'open'
                    CHECK (status IN ('open', 'in_progress', 'done', 'failed', 'needs_human')),
  parent_id         TEXT REFERENCES nodes(id) ON DELETE SET NULL,
  runner            TEXT,
  inputs_json       TEXT NOT NULL DEFAULT '[]',
  ownership_json    TEXT NOT NULL DEFAULT '[]',
  acceptance_json   TEXT NOT NULL DEFAULT '[]',
  verify_json       TEXT NOT NULL DEFAULT '[]',
  retry_policy_json TEXT NOT NULL DEFAULT '{"maxAttempts":3}',
  attempts          INTEGER NOT NULL DEFAULT 0,
  -- How many times the deadlock breaker reopened this node (bounded by autoResetFailedMax).
  auto_resets       INTEGER NOT NULL DEFAULT 0,
  -- Dependencies not yet satisfied: readiness is `unmet_deps = 0`. The triggers below keep it
  -- current on every status change and dep insert/delete, so selecting the next node never scans
  -- `deps` (beads keeps `is_blocked` for the same reason) and no code path can forget to.
  unmet_deps        INTEGER NOT NULL DEFAULT 0,
  -- Selection order is verify < task < plan/epic < integrate < final_verify, then id; derived
  -- from `type` so it can lead the ready index and `ORDER BY rank, id LIMIT 1` never sorts.
  rank              INTEGER GENERATED ALWAYS AS (
                      CASE type WHEN 'verify' THEN 0 WHEN 'task' THEN 1 WHEN 'plan' THEN 2
                                WHEN 'epic' THEN 2 WHEN 'integrate' THEN 3 ELSE 4 END
                    ) VIRTUAL,
  blocked_until     TEXT,
  lock_run_id       TEXT,
  lock_started_at   TEXT,
  lock_pid          INTEGER,
  lock_host         TEXT,
  checkpoint_json   TEXT,
  created_at        TEXT NOT NULL,
  updated_at        TEXT NOT NULL,
  completed_at      TEXT
);

-- Exactly the predicate of graph.select_next, so the next node is the first index entry whose
-- blocked_until has passed: O(log n) at any graph size.
CREATE INDEX nodes_ready ON nodes (rank, id)
  WHERE status = 'open' AND unmet_deps = 0 AND lock_run_id IS NULL;
CREATE INDEX nodes_status ON nodes (status);
CREATE INDEX nodes_parent ON nodes (parent_id);
CREATE INDEX nodes_locked ON nodes (lock_host, lock_pid) WHERE lock_run_id IS NOT NULL;

-- kind 'done': satisfied when the dependency is done (ordinary ordering).
-- kind 'settled': satisfied when it is done or failed — how an escalation node runs after the
-- node it escalates has failed for good.
CREATE TABLE deps (
  node_id       TEXT NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
  depends_on_id TEXT NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
  kind          TEXT NOT NULL DEFAULT 'done' CHECK (kind IN ('done', 'settled')),
  PRIMARY KEY (node_id, depends_on_id),
  CHECK (node_id <> depends_on_id)
);
CREATE INDEX deps_depends_on ON deps (depends_on_id);

CREATE TRIGGER deps_count_insert AFTER INSERT ON deps
BEGIN
  UPDATE nodes SET unmet_deps = unmet_deps + 1
  WHERE id = NEW.node_id
    AND NOT EXISTS (
      SELECT 1 FROM nodes d WHERE d.id = NEW.depends_on_id
        AND (d.status = 'done' OR (NEW.kind = 'settled' AND d.status = 'failed')));
END;

CREATE TRIGGER deps_count_delete AFTER DELETE ON deps
BEGIN
  UPDATE nodes SET unmet_deps = unmet_deps - 1
  WHERE id = OLD.node_id
    AND NOT EXISTS (
      SELECT 1 FROM nodes d WHERE d.id = OLD.depends_on_id
        AND (d.status = 'done' OR (OLD.kind = 'settled' AND d.status = 'failed')));
END;

-- A deleted node's edges go before the node itself: the cascade would run after the row is gone,
-- when deps_count_delete can no longer see that a done dependency was already satisfied.
CREATE TRIGGER nodes_delete_edges BEFORE DELETE ON nodes
BEGIN
  DELETE FROM deps WHERE depends_on_id = OLD.id;
END;

-- When a node's status changes, each dependent edge may flip between satisfied and not:
-- +1 when it stops being satisfied, -1 when it becomes satisfied.
CREATE TRIGGER deps_count_status AFTER UPDATE OF status ON nodes
WHEN OLD.status <> NEW.status
BEGIN
  UPDATE nodes SET unmet_deps = unmet_deps + (
      SELECT (OLD.status = 'done' OR (e.kind = 'settled' AND OLD.status = 'failed'))
           - (NEW.status = 'done' OR (e.kind = 'settled' AND NEW.status = 'failed'))
      FROM deps e WHERE e.depends_on_id = NEW.id AND e.node_id = nodes.id)
  WHERE id IN (SELECT node_id FROM deps WHERE depends_on_id = NEW.id);
END;

-- Node-scoped key/value context. node_id '__run__' is the shared run namespace, so no FK to nodes.
CREATE TABLE kv_latest (
  node_id          TEXT NOT NULL,
  key              TEXT NOT NULL,
  value_text       TEXT,
  artifact_path    TEXT,
  artifact_sha256  TEXT,
  fingerprint_json TEXT,
  run_id           TEXT,
  attempt          INTEGER,
  updated_at       TEXT NOT NULL,
  PRIMARY KEY (node_id, key)
);

CREATE TABLE kv_history (
  id               INTEGER PRIMARY KEY AUTOINCREMENT,
  node_id          TEXT NOT NULL,
  key              TEXT NOT NULL,
  value_text       TEXT,
  artifact_path    TEXT,
  artifact_sha256  TEXT,
  fingerprint_json TEXT,
  run_id           TEXT,
  attempt          INTEGER,
  created_at       TEXT NOT NULL
);
CREATE INDEX kv_history_node_key ON kv_history (node_id, key, id);

-- Audit trail: one row per status change (and per released stale lock).
CREATE TABLE events (
  id          INTEGER PRIMARY KEY AUTOINCREMENT,
  node_id     TEXT NOT NULL,
  from_status TEXT,
  to_status   TEXT,
  run_id      TEXT,
  at          TEXT NOT NULL,
  note        TEXT NOT NULL DEFAULT ''
);
CREATE INDEX events_node ON events (node_id, id);
