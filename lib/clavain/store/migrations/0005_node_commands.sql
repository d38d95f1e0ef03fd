-- 0005: a node's own commands. The `shell` runner does a node's work by running them (no LLM),
-- and an integrate node's commands run once the tasks are merged. Unlike `verify_json` (checks
-- the shell verifier runs), these change the tree; they run in the node's working folder.
ALTER TABLE nodes ADD COLUMN commands_json TEXT NOT NULL DEFAULT '[]';
