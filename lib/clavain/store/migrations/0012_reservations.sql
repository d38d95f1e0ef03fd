-- 0012: spend that never passes the cap (guards/reservations.py). Before work that will cost
-- starts, its projected cost is reserved against its run: a headless runner (`clavain run`,
-- holder = node id and attempt) or a session's subagent (holder = the Agent call's tool_use_id).
-- A run may start more only while spent + reserved + the new reservation fits every cap. A
-- reservation ends when what it stood for is measured and added to the run; a runner killed
-- before it reported keeps its reservation, `charged`, as spent until its transcript is
-- measured. SQLite only: a project's own state, like the other budget tables.
CREATE TABLE budget_reservations (
  run_key      TEXT NOT NULL,
  holder       TEXT NOT NULL,
  kind         TEXT NOT NULL,                 -- runner | subagent
  tokens       INTEGER NOT NULL DEFAULT 0,
  cost_usd     REAL NOT NULL DEFAULT 0,
  state        TEXT NOT NULL DEFAULT 'held',  -- held (its work runs) | charged (it died unmeasured)
  detail_json  TEXT NOT NULL DEFAULT '{}',    -- what it was projected from; a transcript to measure
  reserved_at  TEXT NOT NULL,
  PRIMARY KEY (run_key, holder)
);

-- One row per subagent a session launched (the host's agent_id): its own tool calls and its
-- measured tokens and dollars, against `budgets.perAgentMaxTokens` / `perAgentMaxCalls`; the
-- finished ones (ended_at set, cost measured from their transcripts) are the history a new
-- subagent's cost is projected from, per model.
CREATE TABLE budget_agents (
  run_key      TEXT NOT NULL,
  agent_id     TEXT NOT NULL,
  agent_type   TEXT,
  model        TEXT,
  calls        INTEGER NOT NULL DEFAULT 0,
  tokens       INTEGER NOT NULL DEFAULT 0,
  cost_usd     REAL NOT NULL DEFAULT 0,
  started_at   TEXT NOT NULL,
  updated_at   TEXT NOT NULL,
  ended_at     TEXT,
  over_reason  TEXT,                          -- why its further calls are denied (over its cap)
  PRIMARY KEY (run_key, agent_id)
);
CREATE INDEX budget_agents_model ON budget_agents (model, ended_at);
