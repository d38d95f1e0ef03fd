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
  -- Dependencies not yet done: readiness is `unmet_deps = 0`, kept current on every status change
  -- so selecting the next node never scans `deps` (beads keeps `is_blocked` for the same reason).
  unmet_deps        INTEGER NOT NULL DEFAULT 0,
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

-- Selection order is verify < task < plan/epic < integrate < final_verify, then id.
CREATE TABLE type_rank (
  type TEXT PRIMARY KEY,
  rank INTEGER NOT NULL
);
INSERT INTO type_rank (type, rank) VALUES
  ('verify', 0), ('task', 1), ('plan', 2), ('epic', 2), ('integrate', 3), ('final_verify', 4);

CREATE INDEX nodes_ready ON nodes (status, unmet_deps, id) WHERE lock_run_id IS NULL;
CREATE INDEX nodes_parent ON nodes (parent_id);
CREATE INDEX nodes_locked ON nodes (lock_run_id) WHERE lock_run_id IS NOT NULL;

CREATE TABLE deps (
  node_id       TEXT NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
  depends_on_id TEXT NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
  PRIMARY KEY (node_id, depends_on_id),
  CHECK (node_id <> depends_on_id)
);
CREATE INDEX deps_depends_on ON deps (depends_on_id);

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
