-- 0007: a claim carries what every machine needs to judge it the same way.
-- lock_lease_ms: the claimer's lease (milliseconds), recorded with the claim and renewed with it:
--   the claim is stale once lock_renewed_at + lock_lease_ms has passed by the store's clock,
--   whoever looks (NULL: a claim from before this version, judged by the reader's own lease).
-- lock_runner_pid, lock_runner_identity: the runner process group working the claim and which
--   process it is (boot id + start time), so a claimer on the same host stops an orphaned runner
--   before the node is claimed again: never two runners on one node.
-- crashes: how often the node was given back because its holder died (or went quiet past its
--   lease); a crash spends no attempt, and this separate bound stops a node that kills its
--   supervisor every time.
ALTER TABLE nodes ADD COLUMN lock_lease_ms INTEGER;
ALTER TABLE nodes ADD COLUMN lock_runner_pid INTEGER;
ALTER TABLE nodes ADD COLUMN lock_runner_identity TEXT;
ALTER TABLE nodes ADD COLUMN crashes INTEGER NOT NULL DEFAULT 0;
