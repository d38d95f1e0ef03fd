-- 0011: what a person typed after /clavain:sprint, /clavain:loop or /clavain:budget is good once,
-- for the turn that typed it (sprint/typed_once.py). The UserPromptSubmit hook writes the typed
-- text with a one-time value into `.clavain/typed/`, and keeps here only the value's hash, where
-- the record cannot vouch for itself: the `--from-prompt` command that takes the record must find
-- its row pending and marks it taken in the same transaction; the PreToolUse hook voids every
-- pending row of its session (a tool call means the turn's slash command has had its chance).
-- SQLite only: a project's own state, like the budget tables, never the shared workgraph server.
CREATE TABLE typed_records (
  id           INTEGER PRIMARY KEY,
  session_id   TEXT NOT NULL,
  kind         TEXT NOT NULL,            -- sprint | loop | budget
  value_hash   TEXT NOT NULL,            -- BLAKE2b of the one-time value ('' for a record the
                                         -- hook never wrote, voided when a tool call found it)
  prompt_id    TEXT,                     -- the host's id of the prompt that typed it
  recorded_at  TEXT NOT NULL,
  status       TEXT NOT NULL DEFAULT 'pending',  -- pending | taken | void
  ended_at     TEXT,                     -- when it was taken or voided
  why          TEXT                      -- by what (a pid, a tool call, a later prompt)
);
CREATE INDEX typed_records_session ON typed_records (session_id, kind, id);
