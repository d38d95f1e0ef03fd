-- Claims on workgraph nodes (`workgraph.claims`, `workgraph.claim_pick`, `workgraph.stale`):
-- take one, renew its lease, give it back, and read who holds what.
--
-- A claim writes the claim columns: who holds it (lock_run_id, lock_pid and lock_host of the
-- claimer), since when (lock_started_at, renewed in lock_renewed_at), for how long
-- (lock_lease_ms, the claimer's own lease), under which generation (lock_generation, the fence:
-- one more per claim, never cleared) and the runner process group working it
-- (lock_runner_pid, lock_runner_identity). Every statement that ends a claim clears all of them
-- but the generation, so none leaves part of an old claim behind (a runner pid judged later, a
-- lease another machine honours).
--
-- The ready predicate (`status = 'open' AND unmet_deps = 0 AND lock_run_id IS NULL`, then the
-- backoff) matches the partial index `nodes_ready` word for word; SQLite is told to use it.

-- name: next_unowned
-- Claim the next ready node when it owns nothing (it then overlaps nothing that runs): the
-- common claim. Parameters :graph, :now, :run_id, :pid, :host, :lease_ms. Under BEGIN
-- IMMEDIATE no other writer runs between the pick and the write; the repeated conditions keep
-- it safe even outside one.
UPDATE nodes SET status = 'in_progress', lock_run_id = :run_id, lock_started_at = :now,
      lock_renewed_at = :now, lock_pid = :pid, lock_host = :host, lock_lease_ms = :lease_ms,
      lock_runner_pid = NULL, lock_runner_identity = NULL, updated_at = :now,
      lock_generation = lock_generation + 1
  WHERE graph_id = :graph AND id = (SELECT id FROM nodes INDEXED BY nodes_ready
  WHERE graph_id = :graph AND status = 'open' AND unmet_deps = 0
    AND lock_run_id IS NULL AND (blocked_until IS NULL OR blocked_until <= :now)
  ORDER BY rank, id LIMIT 1)
    AND status = 'open' AND unmet_deps = 0 AND lock_run_id IS NULL AND ownership_json = '[]'
  RETURNING id

-- name: next_unowned_taken
-- The common claim in one round trip on a server: claim the next unowned ready node, record
-- its event and return the node's JSON. Nothing here: SQLite takes the same steps one by one
-- (`next_unowned`, the event, the node) under its one write lock, where round trips are free.

-- name: next
-- Claim the next ready node, whatever it owns: while no running node owns anything, nothing
-- can overlap. Parameters as `next_unowned`.
UPDATE nodes SET status = 'in_progress', lock_run_id = :run_id, lock_started_at = :now,
      lock_renewed_at = :now, lock_pid = :pid, lock_host = :host, lock_lease_ms = :lease_ms,
      lock_runner_pid = NULL, lock_runner_identity = NULL, updated_at = :now,
      lock_generation = lock_generation + 1
  WHERE graph_id = :graph AND id = (SELECT id FROM nodes INDEXED BY nodes_ready
  WHERE graph_id = :graph AND status = 'open' AND unmet_deps = 0
    AND lock_run_id IS NULL AND (blocked_until IS NULL OR blocked_until <= :now)
  ORDER BY rank, id LIMIT 1)
    AND status = 'open' AND unmet_deps = 0 AND lock_run_id IS NULL
  RETURNING id

-- name: one
-- Claim the node :id when it is ready. Parameters as `next_unowned`, plus :id.
UPDATE nodes SET status = 'in_progress', lock_run_id = :run_id, lock_started_at = :now,
      lock_renewed_at = :now, lock_pid = :pid, lock_host = :host, lock_lease_ms = :lease_ms,
      lock_runner_pid = NULL, lock_runner_identity = NULL, updated_at = :now,
      lock_generation = lock_generation + 1
  WHERE graph_id = :graph AND id = :id AND status = 'open' AND unmet_deps = 0
    AND lock_run_id IS NULL AND (blocked_until IS NULL OR blocked_until <= :now)
  RETURNING id

-- name: hold_ownership
-- Claims that compare ownership globs with the running nodes take turns per graph (parameter:
-- the graph id): two machines must not both see a glob free and both take it. Nothing here:
-- SQLite's claim already holds the one write lock.

-- name: ready_ownership
-- Every ready node of :graph at :now with its ownership, in claim order.
SELECT id, ownership_json FROM nodes INDEXED BY nodes_ready
  WHERE graph_id = :graph AND status = 'open' AND unmet_deps = 0
    AND lock_run_id IS NULL AND (blocked_until IS NULL OR blocked_until <= :now)
  ORDER BY rank, id

-- name: first_ready_ownership
-- The next ready node of :graph at :now with its ownership: the one a claim would take.
SELECT id, ownership_json FROM nodes INDEXED BY nodes_ready
  WHERE graph_id = :graph AND status = 'open' AND unmet_deps = 0
    AND lock_run_id IS NULL AND (blocked_until IS NULL OR blocked_until <= :now)
  ORDER BY rank, id LIMIT 1

-- name: running_ownership
-- In-progress nodes of the graph that own something (an empty list is always stored as '[]'):
-- while there are none, no claim can overlap.
SELECT id, ownership_json FROM nodes
  WHERE graph_id = ? AND status = 'in_progress' AND ownership_json <> '[]'
  ORDER BY id

-- name: owned_by
-- One node's ownership list (graph, node).
SELECT ownership_json FROM nodes WHERE graph_id = ? AND id = ?

-- name: renew
-- Renew the lease of a claim the run holds (at, graph, node, run); the node id when renewed.
UPDATE nodes SET lock_renewed_at = ? WHERE graph_id = ? AND id = ? AND lock_run_id = ?
  RETURNING id

-- name: renew_fenced
-- `renew`, only under claim generation (the last parameter).
UPDATE nodes SET lock_renewed_at = ? WHERE graph_id = ? AND id = ? AND lock_run_id = ?
  AND lock_generation = ? RETURNING id

-- name: release
-- Give the run's claim back: open again, every claim column cleared, one more crash when
-- :crash is 1. Parameters :graph, :id, :run_id, :crash, :at; the node id when it was held.
UPDATE nodes SET status = 'open', lock_run_id = NULL, lock_started_at = NULL,
      lock_renewed_at = NULL, lock_pid = NULL, lock_host = NULL, lock_lease_ms = NULL,
      lock_runner_pid = NULL, lock_runner_identity = NULL, crashes = crashes + :crash,
      updated_at = :at
  WHERE graph_id = :graph AND id = :id AND lock_run_id = :run_id RETURNING id

-- name: release_fenced
-- `release`, only under claim generation :fence.
UPDATE nodes SET status = 'open', lock_run_id = NULL, lock_started_at = NULL,
      lock_renewed_at = NULL, lock_pid = NULL, lock_host = NULL, lock_lease_ms = NULL,
      lock_runner_pid = NULL, lock_runner_identity = NULL, crashes = crashes + :crash,
      updated_at = :at
  WHERE graph_id = :graph AND id = :id AND lock_run_id = :run_id AND lock_generation = :fence
  RETURNING id

-- name: count_crash
-- One more crash for a node about to fail for crashing too often (graph, node).
UPDATE nodes SET crashes = crashes + 1 WHERE graph_id = ? AND id = ?

-- name: note_runner
-- Record the runner process group working the run's claim (pid, identity, graph, node, run);
-- the node id when the claim is still the run's.
UPDATE nodes SET lock_runner_pid = ?, lock_runner_identity = ?
  WHERE graph_id = ? AND id = ? AND lock_run_id = ? RETURNING id

-- name: note_runner_fenced
-- `note_runner`, only under claim generation (the last parameter).
UPDATE nodes SET lock_runner_pid = ?, lock_runner_identity = ?
  WHERE graph_id = ? AND id = ? AND lock_run_id = ? AND lock_generation = ? RETURNING id

-- name: held
-- What a run holds in a graph (graph, run), by node id.
SELECT id FROM nodes WHERE graph_id = ? AND lock_run_id = ? ORDER BY id

-- name: held_node
-- Whether a run holds one node (graph, run, node): its id, or no row.
SELECT id FROM nodes WHERE graph_id = ? AND lock_run_id = ? AND id = ?

-- name: locked
-- Every claim of a graph, with what judges whether it is stale (its holder, its lease).
SELECT id, lock_run_id, lock_generation, lock_pid, lock_host, lock_started_at,
  lock_renewed_at, lock_lease_ms, lock_runner_pid, lock_runner_identity
  FROM nodes WHERE graph_id = ? AND lock_run_id IS NOT NULL

-- name: locked_node
-- `locked` for one node (graph, node), looked at again just before its runner is stopped.
SELECT id, lock_run_id, lock_generation, lock_pid, lock_host, lock_started_at,
  lock_renewed_at, lock_lease_ms, lock_runner_pid, lock_runner_identity
  FROM nodes WHERE graph_id = ? AND lock_run_id IS NOT NULL AND id = ?
