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
  usage_json    TEXT NOT NULL DEFAULT '{}',  -- per model: token counts and cost
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
  changes_at   INTEGER NOT NULL DEFAULT 0,  -- budget_runs.changes before this call
  tool_use_id  TEXT,           -- the host's id: PostToolUseFailure finds its call by it
  decision     TEXT NOT NULL,  -- allow | warn | deny | failed (the tool ran and failed)
  reason       TEXT,
  hook_ms      REAL            -- the hook's own time for this call
);
CREATE INDEX budget_calls_run ON budget_calls (run_key, id);
CREATE INDEX budget_calls_fingerprint ON budget_calls (run_key, fingerprint);
CREATE INDEX budget_calls_tool_use ON budget_calls (tool_use_id) WHERE tool_use_id IS NOT NULL;

-- A test command that failed, and the run's change count when it did.
CREATE TABLE budget_red_tests (
  run_key      TEXT NOT NULL,
  fingerprint  TEXT NOT NULL,
  changes_at   INTEGER NOT NULL,
  at           TEXT NOT NULL,
  PRIMARY KEY (run_key, fingerprint)
);

-- The sessions (transcripts) that worked in a run; its tokens and cost are measured over all of
-- them together (and their subagents'), deduplicated, so a sprint spanning resumed sessions
-- counts each response once; a sprint counts only responses from its start on.
CREATE TABLE budget_usage (
  run_key      TEXT NOT NULL,
  transcript   TEXT NOT NULL,
  added_at     TEXT NOT NULL,
  PRIMARY KEY (run_key, transcript)
);
