-- 0010: a run's tokens are measured incrementally. Each transcript (and subagent file) is read on
-- from where the last measurement stopped, and the responses already counted are kept here with
-- the deduplication state (`verdicts.transcript`), so a measurement costs what was written since
-- the last one, not the whole session again (guards/usage.py).

-- A run's measurement: the start it counts from (`since`: a minute before the run's start; a
-- reset gives the run a new one, and everything below is measured again), `generation` (bumped
-- by each measurement that is saved: two measurers that overlap cannot both save what they read
-- from the same offsets) and how many responses without a message id were counted.
CREATE TABLE budget_measures (
  run_key     TEXT PRIMARY KEY,
  since       TEXT NOT NULL,
  generation  INTEGER NOT NULL DEFAULT 0,
  anonymous   INTEGER NOT NULL DEFAULT 0
);

-- Where reading stopped in each file of a run: `read_to` is just past its last complete line
-- (a partial last line is read once it ends); `tail` is the bytes just before it. A file that
-- is now shorter or no longer has that tail was rewritten: the run is measured from the start.
CREATE TABLE budget_usage_files (
  run_key  TEXT NOT NULL,
  path     TEXT NOT NULL,
  read_to  INTEGER NOT NULL,
  tail     BLOB NOT NULL,
  PRIMARY KEY (run_key, path)
);

-- One row per API response counted in a run: the deduplication key (`message.id` and
-- `requestId` as a JSON pair, or `#n` for a line without a message id), its four counts, its
-- total, its model and the 1-hour share of its cache writes. A measurement loads only the rows
-- of the message ids its new lines carry, and sums the run in SQL.
CREATE TABLE budget_responses (
  run_key                      TEXT NOT NULL,
  response                     TEXT NOT NULL,
  message_id                   TEXT,  -- what a new line is matched on: only these are loaded
  input_tokens                 INTEGER NOT NULL,
  output_tokens                INTEGER NOT NULL,
  cache_creation_input_tokens  INTEGER NOT NULL,
  cache_read_input_tokens      INTEGER NOT NULL,
  total                        INTEGER NOT NULL,
  model                        TEXT,
  cache_write_1h               INTEGER NOT NULL,
  PRIMARY KEY (run_key, response)
);
CREATE INDEX budget_responses_message ON budget_responses (run_key, message_id);

-- Each message id seen: the response its first line went to, and whether that line was a
-- sidechain copy (how a later copy of the same message is recognised).
CREATE TABLE budget_messages (
  run_key     TEXT NOT NULL,
  message_id  TEXT NOT NULL,
  response    TEXT NOT NULL,
  sidechain   INTEGER NOT NULL,
  PRIMARY KEY (run_key, message_id)
);

-- A run forgotten (`clavain budget reset`) forgets how far it was measured.
CREATE TRIGGER budget_runs_forget_measures AFTER DELETE ON budget_runs BEGIN
  DELETE FROM budget_measures WHERE run_key = old.run_key;
  DELETE FROM budget_usage_files WHERE run_key = old.run_key;
  DELETE FROM budget_responses WHERE run_key = old.run_key;
  DELETE FROM budget_messages WHERE run_key = old.run_key;
END;
