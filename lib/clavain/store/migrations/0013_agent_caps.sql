-- 0013: a subagent's own cap, and the parent told once (guards/agents.py).
-- A subagent's tokens are read on from its own transcript (`read_to`: just past the last whole
-- line read; `last_message`: the response those lines ended in, which the next line may repeat),
-- only while `budgets.perAgentMaxTokens` is set. When one goes over its cap its further calls are
-- denied (`over_reason`), and the main thread is told on its next counted call:
-- `budget_runs.agents_untold` says one is waiting, so the main thread's call (which reads its
-- run's row anyway) queries nothing more while there is none; `parent_told_at` marks it said.
ALTER TABLE budget_agents ADD COLUMN read_to INTEGER NOT NULL DEFAULT 0;
ALTER TABLE budget_agents ADD COLUMN last_message TEXT;
ALTER TABLE budget_agents ADD COLUMN parent_told_at TEXT;
ALTER TABLE budget_runs ADD COLUMN agents_untold INTEGER NOT NULL DEFAULT 0;
