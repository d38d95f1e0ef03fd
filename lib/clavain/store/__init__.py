"""SQLite state: one connection per process, WAL, numbered migrations as the only DDL."""
