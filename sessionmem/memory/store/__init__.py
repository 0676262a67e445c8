"""The index store seam and its SQLite and PostgreSQL stores: schema, connections, FTS tokens, rebuilds,
erasure."""
