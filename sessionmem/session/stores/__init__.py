"""Where sessions are kept: the store seam, its entry, opening a store by its spec, the sessions.json, SQLite
and PostgreSQL backends, transcripts, locks, copying and recovery."""
