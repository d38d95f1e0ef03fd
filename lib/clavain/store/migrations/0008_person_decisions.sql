-- 0008: who made each person-only decision outside a sprint's checkpoint — a budget reset, a
-- loop's breaker closed — as `clavain.authority` told it: a person at a terminal, or what a
-- person typed in Claude Code (the session and the prompt). Reports show them beside the run.
CREATE TABLE person_decisions (
  id               INTEGER PRIMARY KEY,
  run_key          TEXT NOT NULL,
  what             TEXT NOT NULL,
  decided_by_json  TEXT NOT NULL,
  at               TEXT NOT NULL
);
CREATE INDEX person_decisions_run ON person_decisions (run_key, id);
