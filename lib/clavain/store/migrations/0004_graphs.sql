-- 0004: one workgraph per sprint. A node belongs to a graph — a sprint's (its id is the sprint
-- id), the project's default graph (work added with no sprint active), or a headless run's — and
-- node ids need only be unique within their graph. Every table that names a node now names its
-- graph too; every query is scoped by it, so a new sprint never sees another sprint's open
-- tasks. Nodes made before this migration belong to the default graph.

CREATE TABLE graphs (
  id          TEXT PRIMARY KEY,
  kind        TEXT NOT NULL CHECK (kind IN ('default', 'sprint', 'run')),
  -- active: work may be added and claimed; shipped / abandoned: a finished sprint's graph, kept
  -- for `clavain graph ls --all` and the archive (its open nodes were cancelled).
  status      TEXT NOT NULL DEFAULT 'active'
              CHECK (status IN ('active', 'shipped', 'abandoned')),
  title       TEXT NOT NULL DEFAULT '',
  created_at  TEXT NOT NULL,
  closed_at   TEXT
);

INSERT INTO graphs (id, kind, title, created_at)
  SELECT 'default', 'default', 'work added with no sprint active',
         coalesce((SELECT min(created_at) FROM nodes), strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));

-- The old tables step aside (renaming keeps their data; their triggers and indexes go first so
-- the new ones can take the names).
DROP TRIGGER deps_count_insert;
DROP TRIGGER deps_count_delete;
DROP TRIGGER nodes_delete_edges;
DROP TRIGGER deps_count_status;
DROP INDEX nodes_ready;
DROP INDEX nodes_status;
DROP INDEX nodes_parent;
DROP INDEX nodes_locked;
DROP INDEX nodes_verifies;
DROP INDEX deps_depends_on;
DROP INDEX kv_history_node_key;
DROP INDEX events_node;
ALTER TABLE nodes RENAME TO nodes_v3;
ALTER TABLE deps RENAME TO deps_v3;
ALTER TABLE kv_latest RENAME TO kv_latest_v3;
ALTER TABLE kv_history RENAME TO kv_history_v3;
ALTER TABLE events RENAME TO events_v3;

CREATE TABLE nodes (
  graph_id          TEXT NOT NULL REFERENCES graphs(id),
  id                TEXT NOT NULL,
  title             TEXT NOT NULL DEFAULT '',
  type              TEXT NOT NULL
                    CHECK (type IN ('plan', 'epic', 'task', 'verify', 'integrate', 'final_verify')),
  -- cancelled: an abandoned sprint's node that was still open; it never runs.
  status            TEXT NOT NULL DEFAULT 'open'
                    CHECK (status IN ('open', 'in_progress', 'done', 'failed', 'needs_human',
                                      'cancelled')),
  parent_id         TEXT,
  runner            TEXT,
  inputs_json       TEXT NOT NULL DEFAULT '[]',
  ownership_json    TEXT NOT NULL DEFAULT '[]',
  acceptance_json   TEXT NOT NULL DEFAULT '[]',
  verify_json       TEXT NOT NULL DEFAULT '[]',
  retry_policy_json TEXT NOT NULL DEFAULT '{"max_attempts":3}',
  attempts          INTEGER NOT NULL DEFAULT 0,
  auto_resets       INTEGER NOT NULL DEFAULT 0,
  -- Dependencies not yet satisfied (kept by the triggers below): readiness is unmet_deps = 0.
  unmet_deps        INTEGER NOT NULL DEFAULT 0,
  rank              INTEGER GENERATED ALWAYS AS (
                      CASE type WHEN 'verify' THEN 0 WHEN 'task' THEN 1 WHEN 'plan' THEN 2
                                WHEN 'epic' THEN 2 WHEN 'integrate' THEN 3 ELSE 4 END
                    ) VIRTUAL,
  blocked_until     TEXT,
  lock_run_id       TEXT,
  lock_started_at   TEXT,
  lock_pid          INTEGER,
  lock_host         TEXT,
  human_question_json TEXT,
  created_at        TEXT NOT NULL,
  updated_at        TEXT NOT NULL,
  completed_at      TEXT,
  lock_renewed_at   TEXT,
  escalations       INTEGER NOT NULL DEFAULT 0,
  superseded_by     TEXT,
  verifies          TEXT,
  PRIMARY KEY (graph_id, id),
  -- No action on delete: a node with children is never deleted (only a plan's task that never
  -- started is, and it has none).
  FOREIGN KEY (graph_id, parent_id) REFERENCES nodes (graph_id, id)
);

CREATE TABLE deps (
  graph_id      TEXT NOT NULL,
  node_id       TEXT NOT NULL,
  depends_on_id TEXT NOT NULL,
  kind          TEXT NOT NULL DEFAULT 'done' CHECK (kind IN ('done', 'settled')),
  PRIMARY KEY (graph_id, node_id, depends_on_id),
  CHECK (node_id <> depends_on_id),
  FOREIGN KEY (graph_id, node_id) REFERENCES nodes (graph_id, id) ON DELETE CASCADE,
  FOREIGN KEY (graph_id, depends_on_id) REFERENCES nodes (graph_id, id) ON DELETE CASCADE
);

-- node_id '__run__' is the graph's shared namespace, so no foreign key to nodes.
CREATE TABLE kv_latest (
  graph_id         TEXT NOT NULL,
  node_id          TEXT NOT NULL,
  key              TEXT NOT NULL,
  value_text       TEXT,
  artifact_path    TEXT,
  artifact_sha256  TEXT,
  fingerprint_json TEXT,
  run_id           TEXT,
  attempt          INTEGER,
  updated_at       TEXT NOT NULL,
  PRIMARY KEY (graph_id, node_id, key)
);

CREATE TABLE kv_history (
  id               INTEGER PRIMARY KEY AUTOINCREMENT,
  graph_id         TEXT NOT NULL,
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

CREATE TABLE events (
  id          INTEGER PRIMARY KEY AUTOINCREMENT,
  graph_id    TEXT NOT NULL,
  node_id     TEXT NOT NULL,
  from_status TEXT,
  to_status   TEXT,
  run_id      TEXT,
  at          TEXT NOT NULL,
  note        TEXT NOT NULL DEFAULT ''
);

INSERT INTO nodes (graph_id, id, title, type, status, parent_id, runner, inputs_json,
                   ownership_json, acceptance_json, verify_json, retry_policy_json, attempts,
                   auto_resets, unmet_deps, blocked_until, lock_run_id, lock_started_at, lock_pid,
                   lock_host, human_question_json, created_at, updated_at, completed_at,
                   lock_renewed_at, escalations, superseded_by, verifies)
  SELECT 'default', id, title, type, status, parent_id, runner, inputs_json, ownership_json,
         acceptance_json, verify_json, retry_policy_json, attempts, auto_resets, unmet_deps,
         blocked_until, lock_run_id, lock_started_at, lock_pid, lock_host, human_question_json,
         created_at, updated_at, completed_at, lock_renewed_at, escalations, superseded_by,
         verifies
  FROM nodes_v3;
INSERT INTO deps (graph_id, node_id, depends_on_id, kind)
  SELECT 'default', node_id, depends_on_id, kind FROM deps_v3;
INSERT INTO kv_latest (graph_id, node_id, key, value_text, artifact_path, artifact_sha256,
                       fingerprint_json, run_id, attempt, updated_at)
  SELECT 'default', node_id, key, value_text, artifact_path, artifact_sha256, fingerprint_json,
         run_id, attempt, updated_at FROM kv_latest_v3;
INSERT INTO kv_history (id, graph_id, node_id, key, value_text, artifact_path, artifact_sha256,
                        fingerprint_json, run_id, attempt, created_at)
  SELECT id, 'default', node_id, key, value_text, artifact_path, artifact_sha256,
         fingerprint_json, run_id, attempt, created_at FROM kv_history_v3;
INSERT INTO events (id, graph_id, node_id, from_status, to_status, run_id, at, note)
  SELECT id, 'default', node_id, from_status, to_status, run_id, at, note FROM events_v3;

DROP TABLE deps_v3;
DROP TABLE kv_latest_v3;
DROP TABLE kv_history_v3;
DROP TABLE events_v3;
DROP TABLE nodes_v3;

-- Exactly the predicate of leases._NEXT_ID_SQL, so the next node of a graph is the first index
-- entry whose blocked_until has passed: O(log n) at any graph size.
CREATE INDEX nodes_ready ON nodes (graph_id, rank, id)
  WHERE status = 'open' AND unmet_deps = 0 AND lock_run_id IS NULL;
CREATE INDEX nodes_status ON nodes (graph_id, status);
CREATE INDEX nodes_parent ON nodes (graph_id, parent_id);
CREATE INDEX nodes_locked ON nodes (lock_host, lock_pid) WHERE lock_run_id IS NOT NULL;
CREATE INDEX nodes_verifies ON nodes (graph_id, verifies) WHERE verifies IS NOT NULL;
CREATE INDEX deps_depends_on ON deps (graph_id, depends_on_id);
CREATE INDEX kv_history_node_key ON kv_history (graph_id, node_id, key, id);
CREATE INDEX events_node ON events (graph_id, node_id, id);

-- The triggers of 0001, scoped to the graph of the edge or node that changed.
CREATE TRIGGER deps_count_insert AFTER INSERT ON deps
BEGIN
  UPDATE nodes SET unmet_deps = unmet_deps + 1
  WHERE graph_id = NEW.graph_id AND id = NEW.node_id
    AND NOT EXISTS (
      SELECT 1 FROM nodes d WHERE d.graph_id = NEW.graph_id AND d.id = NEW.depends_on_id
        AND (d.status = 'done' OR (NEW.kind = 'settled' AND d.status = 'failed')));
END;

CREATE TRIGGER deps_count_delete AFTER DELETE ON deps
BEGIN
  UPDATE nodes SET unmet_deps = unmet_deps - 1
  WHERE graph_id = OLD.graph_id AND id = OLD.node_id
    AND NOT EXISTS (
      SELECT 1 FROM nodes d WHERE d.graph_id = OLD.graph_id AND d.id = OLD.depends_on_id
        AND (d.status = 'done' OR (OLD.kind = 'settled' AND d.status = 'failed')));
END;

-- A deleted node's edges go before the node itself: the cascade would run after the row is gone,
-- when deps_count_delete can no longer see that a done dependency was already satisfied.
CREATE TRIGGER nodes_delete_edges BEFORE DELETE ON nodes
BEGIN
  DELETE FROM deps WHERE graph_id = OLD.graph_id AND depends_on_id = OLD.id;
END;

CREATE TRIGGER deps_count_status AFTER UPDATE OF status ON nodes
WHEN OLD.status <> NEW.status
BEGIN
  UPDATE nodes SET unmet_deps = unmet_deps + (
      SELECT (OLD.status = 'done' OR (e.kind = 'settled' AND OLD.status = 'failed'))
           - (NEW.status = 'done' OR (e.kind = 'settled' AND NEW.status = 'failed'))
      FROM deps e WHERE e.graph_id = NEW.graph_id AND e.depends_on_id = NEW.id
        AND e.node_id = nodes.id)
  WHERE graph_id = NEW.graph_id
    AND id IN (SELECT node_id FROM deps WHERE graph_id = NEW.graph_id AND depends_on_id = NEW.id);
END;
