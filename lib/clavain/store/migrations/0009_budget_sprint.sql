-- 0009: budgets follow the session (or a headless run), not the sprint: a sprint abandoned and
-- started again inside one session keeps what that session spent. Each sprint remembers the run
-- that worked on it last, so its summary still finds that run's budgets (a person's reset of the
-- run forgets its counts, not this).
CREATE TABLE budget_sprints (
  sprint_id  TEXT PRIMARY KEY,
  run_key    TEXT NOT NULL,
  at         TEXT NOT NULL
);
