-- name: defer_foreign_keys
SET CONSTRAINTS ALL DEFERRED
