"""Sessions: the store seam and its three backends (sessions.json, SQLite, PostgreSQL), transcripts and
session keys. The runner itself is public in :mod:`sessionmem` (``SessionRunner``).

Names are loaded lazily (:mod:`sessionmem.lazy`) so importing one submodule stays cheap, and psycopg is
imported only when ``PostgresSessionStore`` is first read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sessionmem.lazy import lazy_names

if TYPE_CHECKING:
    from sessionmem.session.stores.backend import (
        SessionBackend,
        SessionBackendABC,
        TranscriptLog,
        VersionedTranscript,
    )
    from sessionmem.session.stores.entry import SessionEntry
    from sessionmem.session.stores.keys import default_key, parse_key
    from sessionmem.session.stores.sessions_json import SessionStore
    from sessionmem.session.stores.sessions_postgres import PostgresSessionStore
    from sessionmem.session.stores.sessions_sqlite import SqliteSessionStore
    from sessionmem.session.stores.transcript import Entry
    from sessionmem.session.stores.transcript_folder import Transcript, read_messages

__getattr__, __dir__ = lazy_names(
    __name__,
    {
        "sessionmem.session.stores.backend": [
            "SessionBackend",
            "SessionBackendABC",
            "TranscriptLog",
            "VersionedTranscript",
        ],
        "sessionmem.session.stores.entry": ["SessionEntry"],
        "sessionmem.session.stores.keys": ["default_key", "parse_key"],
        "sessionmem.session.stores.sessions_json": ["SessionStore"],
        "sessionmem.session.stores.sessions_postgres": ["PostgresSessionStore"],
        "sessionmem.session.stores.sessions_sqlite": ["SqliteSessionStore"],
        "sessionmem.session.stores.transcript": ["Entry"],
        "sessionmem.session.stores.transcript_folder": ["Transcript", "read_messages"],
    },
)

__all__ = [
    "Entry",
    "PostgresSessionStore",
    "SessionBackend",
    "SessionBackendABC",
    "SessionEntry",
    "SessionStore",
    "SqliteSessionStore",
    "Transcript",
    "TranscriptLog",
    "VersionedTranscript",
    "default_key",
    "parse_key",
    "read_messages",
]
