-- 0002 (PostgreSQL): SQLite's version 7 — the claimer's lease, the runner working the claim and
-- the crash count travel with the node (see migrations/0007_claims.sql for what each means).
ALTER TABLE nodes ADD COLUMN lock_lease_ms BIGINT;
ALTER TABLE nodes ADD COLUMN lock_runner_pid INTEGER;
ALTER TABLE nodes ADD COLUMN lock_runner_identity TEXT;
ALTER TABLE nodes ADD COLUMN crashes INTEGER NOT NULL DEFAULT 0;
