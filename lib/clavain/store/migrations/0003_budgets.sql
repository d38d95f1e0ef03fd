-- 0003: budgets and loop guards, enforced by the PreToolUse hook (lib/clavain/guards/).

-- One row per run: the active sprint (`sprint:<id>`), else the session (`session:<id>`).
-- Counters are updated inside the hook's one BEGIN IMMEDIATE transaction, so parallel tool
-- calls lose no count. `changes` counts calls that may have changed files (edits, and Bash
-- commands that are neither tests nor plain reads): a red test re-run with no change since is
-- a loop. tokens / cost_usd are measured from the transcripts by a detached process that a
-- tool call starts at most every 30 s (measured_at is when the last one was started).
CREATE TABLE budget_runs (
  run_key       TEXT PRIMARY KEY,
  started_at    TEXT NOT NULL,
  updated_at    TEXT NOT NULL,
  commands      INTEGER NOT NULL DEFAULT 0,
  test_runs     INTEGER NOT NULL DEFAULT 0,
  web_requests  INTEGER NOT NULL DEFAULT 0,
  changes       INTEGER NOT NULL DEFAULT 0,
  tokens        INTEGER NOT NULL DEFAULT 0,
  cost_usd      REAL NOT NULL DEFAULT 0,
  measured_at   TEXT,
  warned_json   TEXT NOT NULL DEFAULT '[]'   -- budgets already warned about at 80 %
);

-- Every tool call the hook saw, allowed or denied (a denied call is not counted again).
CREATE TABLE budget_calls (
  id           INTEGER PRIMARY KEY,
  run_key      TEXT NOT NULL,
  at           TEXT NOT NULL,
  session_id   TEXT,
  tool         TEXT NOT NULL,
  kind         TEXT NOT NULL,  -- command | test | web | edit | agent | other
  subject      TEXT,           -- the command or the file path, clipped
  fingerprint  TEXT,           -- a patch's or a command's hash
  changed      INTEGER NOT NULL DEFAULT 0,  -- 1: the call may have changed files
  decision     TEXT NOT NULL,  -- allow | warn | deny
  reason       TEXT,
  hook_ms      REAL            -- the hook's own time for this call
);
CREATE INDEX budget_calls_run ON budget_calls (run_key, id);
CREATE INDEX budget_calls_fingerprint ON budget_calls (run_key, fingerprint);

-- A test command that failed, and the run's change count when it did.
CREATE TABLE budget_red_tests (
  run_key      TEXT NOT NULL,
  fingerprint  TEXT NOT NULL,
  changes_at   INTEGER NOT NULL,
  at           TEXT NOT NULL,
  PRIMARY KEY (run_key, fingerprint)
);

-- Measured usage of one session (its transcript and its subagents') within a run; the run's
-- tokens and cost_usd are the sums over its sessions (a sprint can span several).
CREATE TABLE budget_usage (
  run_key      TEXT NOT NULL,
  transcript   TEXT NOT NULL,
  tokens       INTEGER NOT NULL,
  cost_usd     REAL NOT NULL,
  usage_json   TEXT NOT NULL,
  measured_at  TEXT NOT NULL,
  PRIMARY KEY (run_key, transcript)
);
