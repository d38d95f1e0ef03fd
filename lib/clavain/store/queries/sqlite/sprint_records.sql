-- Records of what a person typed, good once (`sprint.typed_once`, migration 0011): on the
-- project's SQLite state file only (`typed_records`), never the workgraph store.

-- name: void_pending
-- Void every record of the session still pending (a later prompt, or a tool call, came after
-- it). Params: ended_at, why, session.
UPDATE typed_records SET status = 'void', ended_at = ?, why = ?
 WHERE session_id = ? AND status = 'pending'

-- name: add_pending
-- A new pending record: only the hash of its one-time value is kept.
INSERT INTO typed_records (session_id, kind, value_hash, prompt_id, recorded_at)
VALUES (?, ?, ?, ?, ?)

-- name: with_value
-- The session's newest record of a kind whose value hashes to this one.
SELECT * FROM typed_records WHERE session_id = ? AND kind = ? AND value_hash = ?
 ORDER BY id DESC LIMIT 1

-- name: void_one
-- Void one record (a tool call of its session came after it). Params: ended_at, why, id.
UPDATE typed_records SET status = 'void', ended_at = ?, why = ? WHERE id = ?

-- name: take_one
-- Mark one record taken: a second take finds it no longer pending. Params: ended_at, why, id.
UPDATE typed_records SET status = 'taken', ended_at = ?, why = ? WHERE id = ?

-- name: latest
-- The session's newest record of a kind.
SELECT * FROM typed_records WHERE session_id = ? AND kind = ? ORDER BY id DESC LIMIT 1

-- name: has_pending
-- Whether the session has a pending record of a kind (a take that matched none then says the
-- value was wrong, not that the hook wrote nothing).
SELECT 1 FROM typed_records WHERE session_id = ? AND kind = ? AND status = 'pending'

-- name: last_tool_call
-- The session's newest counted tool call (`budget_calls`): its time and tool.
SELECT at, tool FROM budget_calls WHERE session_id = ? ORDER BY id DESC LIMIT 1

-- name: pending_kinds
-- The kinds of the session's pending records.
SELECT kind FROM typed_records WHERE session_id = ? AND status = 'pending'

-- name: add_void
-- A void record of a kind whose file was there with no row, so the take that finds no file
-- says why. Params: session, kind, recorded_at, ended_at, why.
INSERT INTO typed_records (session_id, kind, value_hash, recorded_at, status, ended_at, why)
VALUES (?, ?, '', ?, 'void', ?, ?)
