-- 0006: the fencing token. Every claim adds one to the node's lock_generation and hands it to
-- the runner; its apply, heartbeat and release carry it back, so a runner whose lease ran out
-- (and whose node was claimed again, or released) cannot write its late result.
ALTER TABLE nodes ADD COLUMN lock_generation INTEGER NOT NULL DEFAULT 0;
