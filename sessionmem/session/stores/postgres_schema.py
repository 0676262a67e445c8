"""The PostgreSQL session store's tables, created on first connect and versioned.

Three tables, in the schema the connection's ``search_path`` names (``public`` unless the DSN says
otherwise, e.g. ``?options=-csearch_path%3Dsessionmem``):

- ``sessionmem_sessions``: one row per (agent, session key), the :class:`SessionEntry` as ``jsonb``
  (the same object sessions.json holds under the key) and its ``updatedAt``;
- ``sessionmem_transcripts``: one row per (agent, session id): its header (the JSONL file's first line),
  the session key, and ``archived_at``, set when a rotation puts the transcript aside;
- ``sessionmem_transcript_entries``: the entries, append-only, one row per JSONL line (``json``, not
  ``jsonb``: the object is kept as written, key order included, so an export gives the lines back), ordered
  per session by the ``bigserial`` id; ``kind`` is the entry's ``type`` and ``bytes`` its line's length
  (newline included) so the size-forced flush measures growth as it does for a file.

:func:`ensure_schema` runs the migrations not yet applied, in one transaction under a transaction-level
advisory lock, so hosts starting at once create the tables once. A database whose schema is newer than
this code is refused with a :class:`~sessionmem.errors.ConfigError` (an older sessionmem must not write
to it).
"""

from __future__ import annotations

from typing import Any

from sessionmem.errors import ConfigError

COMPONENT = "sessions"
SCHEMA_LOCK_ID = 0x5E55_10_4D_5C_E3A  # pg_advisory_xact_lock key while migrating (any constant; ours)

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    # 1: the three tables
    (
        """CREATE TABLE IF NOT EXISTS sessionmem_sessions (
            agent_id text NOT NULL,
            key text NOT NULL,
            entry jsonb NOT NULL,
            updated_at bigint NOT NULL,
            PRIMARY KEY (agent_id, key)
        )""",
        """CREATE TABLE IF NOT EXISTS sessionmem_transcripts (
            agent_id text NOT NULL,
            session_id text NOT NULL,
            session_key text NOT NULL,
            header json NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            archived_at timestamptz,
            PRIMARY KEY (agent_id, session_id)
        )""",
        """CREATE TABLE IF NOT EXISTS sessionmem_transcript_entries (
            id bigserial PRIMARY KEY,
            agent_id text NOT NULL,
            session_id text NOT NULL,
            kind text NOT NULL,
            entry json NOT NULL,
            bytes integer NOT NULL
        )""",
        """CREATE INDEX IF NOT EXISTS sessionmem_transcript_entries_session
            ON sessionmem_transcript_entries (agent_id, session_id, id)""",
        """CREATE INDEX IF NOT EXISTS sessionmem_transcript_entries_compactions
            ON sessionmem_transcript_entries (agent_id, session_id, id) WHERE kind = 'compaction'""",
    ),
)
SCHEMA_VERSION = len(MIGRATIONS)


def ensure_schema(conn: Any) -> int:
    """Bring the tables to :data:`SCHEMA_VERSION` (idempotent); returns the version found before.

    ``conn`` is a psycopg connection in autocommit mode; the work is one transaction."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK_ID,))
        conn.execute(
            """CREATE TABLE IF NOT EXISTS sessionmem_schema (
                component text PRIMARY KEY,
                version integer NOT NULL
            )"""
        )
        row = conn.execute(
            "SELECT version FROM sessionmem_schema WHERE component = %s", (COMPONENT,)
        ).fetchone()
        found = int(row[0]) if row is not None else 0
        if found > SCHEMA_VERSION:
            raise ConfigError(
                f"the PostgreSQL session tables are at schema version {found}, newer than this sessionmem "
                f"understands ({SCHEMA_VERSION}): upgrade sessionmem on this host before pointing it at "
                "that database"
            )
        for statements in MIGRATIONS[found:]:
            for statement in statements:
                conn.execute(statement)
        if found < SCHEMA_VERSION:
            conn.execute(
                """INSERT INTO sessionmem_schema (component, version) VALUES (%s, %s)
                   ON CONFLICT (component) DO UPDATE SET version = EXCLUDED.version""",
                (COMPONENT, SCHEMA_VERSION),
            )
    return found
