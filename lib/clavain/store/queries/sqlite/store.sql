-- The store's own statements: what a transaction asks of the backend beyond reading and
-- writing rows.

-- name: defer_foreign_keys
-- Check foreign keys at COMMIT rather than per statement, for the rest of this transaction:
-- rows that point at each other are written in any order.
PRAGMA defer_foreign_keys = ON
