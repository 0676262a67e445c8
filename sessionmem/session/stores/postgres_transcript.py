"""A session transcript kept in PostgreSQL: the :class:`~sessionmem.session.stores.backend.TranscriptLog` of
:class:`~sessionmem.session.stores.sessions_postgres.PostgresSessionStore`.

Each entry is one row of ``sessionmem_transcript_entries`` (:mod:`sessionmem.session.stores.postgres_schema`):
the same JSON object the JSONL line holds (appended by the same
:class:`~sessionmem.session.stores.transcript.EntryChain`), written with one ``INSERT`` (a row is whole or
absent: there is no torn line to skip), read back in the order of the ``bigserial`` id, whichever host wrote
it. The header is the transcript's row in ``sessionmem_transcripts``.

Reading is incremental: :meth:`PostgresTranscript.entries` fetches only the rows after the last one
it read (rows are never changed or removed). That relies on what the runner guarantees anyway: the
appends to one transcript are serialised (the turn lock), so a row becomes visible only after every row
with a smaller id has (two concurrent appenders could commit out of id order).

``parentId`` is the last entry this object appended or read. The runner appends only under the session's
turn lock and reads the transcript again whenever another host appended (:meth:`version` changed), so the
chain follows the rows' order.

:class:`PostgresShelf` is the same rows as the memory index reads them
(:class:`~sessionmem.memory.sync.transcript_names.TranscriptShelf`): each transcript named as its file would
be (``<sessionId>.jsonl``; once archived, ``<sessionId>.jsonl.reset.<archived_at>``, the file store's archive
name) and read as the bytes of its JSONL form (the header's and each entry's JSON text as stored, one per
line), from any byte offset: ``bytes`` (each line's length) places a row without reading the rows before
it. So the ``sessions`` memory source, its delta thresholds, its hits' line numbers and ``memory_get`` work
on these rows as on files, through the one code path.

Methods are synchronous (the runner calls them inline); statements go through
:class:`~sessionmem.session.stores.postgres_connections.Connections` (the turn lock's connection while this
process holds the session's turn).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from contextlib import AbstractContextManager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from sessionmem.dsn import postgres_errors
from sessionmem.errors import TranscriptError
from sessionmem.memory.sync.transcript_names import (
    ShelvedTranscript,
    is_live_transcript_name,
    reset_archive_of,
)
from sessionmem.messages import Message
from sessionmem.session.stores.postgres_connections import Connections
from sessionmem.session.stores.transcript import (
    Entry,
    EntryChain,
    context_from_entries,
    entry_from_dict,
    new_header,
)
from sessionmem.session.stores.transcript_folder import archive_name


def transcript_errors(connections: Connections, session_id: str, what: str) -> AbstractContextManager[None]:
    """A database error while reading or appending, as a :class:`TranscriptError` naming the session
    (:func:`~sessionmem.dsn.postgres_errors`)."""
    return postgres_errors(
        connections.url,
        lambda problem: TranscriptError(
            f"cannot {what} the transcript of session {session_id} in PostgreSQL: {problem}"
        ),
    )


class PostgresTranscript(EntryChain):
    """One session's transcript rows. Open with :meth:`open`."""

    def __init__(
        self,
        connections: Connections,
        agent_id: str,
        session_key: str,
        session_id: str,
        header: dict[str, Any],
    ):
        super().__init__()
        self._connections = connections
        self.agent_id = agent_id
        self.session_key = session_key
        self._session_id = session_id
        self.header = header
        # The entries read so far and the id of the last row among them: rows are never changed or
        # removed (archiving marks the transcript), so a later read fetches only the rows after it.
        self._read: list[Entry] = []
        self._read_up_to = 0
        self._lines = 1  # line numbers as in the file: the header is line 1

    @classmethod
    def open(
        cls, connections: Connections, agent_id: str, session_key: str, session_id: str, cwd: Path | None
    ) -> PostgresTranscript:
        """The transcript of ``session_id``, created (its header row) when new; two hosts opening one new
        session at once create one header."""
        header = new_header(session_id, cwd, session_key=session_key)
        with transcript_errors(connections, session_id, "open"), connections.connection(session_key) as conn:
            conn.execute(
                """INSERT INTO sessionmem_transcripts (agent_id, session_id, session_key, header)
                   VALUES (%s, %s, %s, %s::json) ON CONFLICT (agent_id, session_id) DO NOTHING""",
                (agent_id, session_id, session_key, orjson.dumps(header).decode()),
            )
            row = conn.execute(
                "SELECT header::text FROM sessionmem_transcripts WHERE agent_id = %s AND session_id = %s",
                (agent_id, session_id),
            ).fetchone()
        stored = orjson.loads(row[0]) if row is not None else header
        transcript = cls(connections, agent_id, session_key, session_id, stored)
        transcript.entries()  # the ids and the chain's end, for the next append
        return transcript

    @property
    def session_id(self) -> str:
        return self._session_id

    @property
    def path(self) -> Path | None:
        """None: the transcript is rows, not a file (hooks get the transcript object instead)."""
        return None

    @property
    def name(self) -> str:
        """Its name on the store's :class:`PostgresShelf` while live (what the memory index is told)."""
        return live_name(self._session_id)

    # --- appending ---

    def write_entry(self, entry: dict[str, Any]) -> None:
        """One ``INSERT``: the row is whole or absent."""
        line = orjson.dumps(entry)
        with (
            transcript_errors(self._connections, self._session_id, "append to"),
            self._connections.connection(self.session_key) as conn,
        ):
            conn.execute(
                """INSERT INTO sessionmem_transcript_entries (agent_id, session_id, kind, entry, bytes)
                   VALUES (%s, %s, %s, %s::json, %s)""",
                (self.agent_id, self._session_id, entry["type"], line.decode(), len(line) + 1),
            )

    # --- reading ---

    def _rows_after(self, row_id: int) -> list[tuple[int, dict[str, Any]]]:
        with (
            transcript_errors(self._connections, self._session_id, "read"),
            self._connections.connection(self.session_key) as conn,
        ):
            found = conn.execute(
                """SELECT id, entry::text FROM sessionmem_transcript_entries
                   WHERE agent_id = %s AND session_id = %s AND id > %s ORDER BY id""",
                (self.agent_id, self._session_id, row_id),
            ).fetchall()
        return [(int(found_id), orjson.loads(text)) for found_id, text in found]

    def stored_lines(self) -> Iterator[bytes]:
        """The header and every entry as the JSON text stored (:class:`~sessionmem.session.stores.backend.
        StoredLines`: what an export writes as the JSONL lines)."""
        yield orjson.dumps(self.header)
        with (
            transcript_errors(self._connections, self._session_id, "read"),
            self._connections.connection(self.session_key) as conn,
        ):
            found = conn.execute(
                """SELECT entry::text FROM sessionmem_transcript_entries
                   WHERE agent_id = %s AND session_id = %s ORDER BY id""",
                (self.agent_id, self._session_id),
            ).fetchall()
        for (text,) in found:
            yield text.encode()

    def entries(self) -> list[Entry]:
        """All entries in the order written, by any host (line numbers as in the file: header is 1).
        Reads only the rows appended since the last call."""
        for row_id, obj in self._rows_after(self._read_up_to):
            self._read_up_to = row_id
            self._lines += 1
            entry = entry_from_dict(self._lines, obj)
            if entry is not None:
                self._read.append(entry)
                self.note_entry(entry.id)
        return list(self._read)

    def context_messages(self) -> list[tuple[str, Message]]:
        return context_from_entries(self.entries())

    def version(self) -> int:
        """The newest row's id (0 when empty): changes whenever any host appends. One indexed lookup."""
        with (
            transcript_errors(self._connections, self._session_id, "read"),
            self._connections.connection(self.session_key) as conn,
        ):
            row = conn.execute(
                """SELECT coalesce(max(id), 0) FROM sessionmem_transcript_entries
                   WHERE agent_id = %s AND session_id = %s""",
                (self.agent_id, self._session_id),
            ).fetchone()
        return int(row[0]) if row is not None else 0

    def bytes_since_compaction(self) -> int:
        """The lines' bytes after the latest compaction entry; without one, the whole transcript, header
        included (what the file's size would be)."""
        with (
            transcript_errors(self._connections, self._session_id, "read"),
            self._connections.connection(self.session_key) as conn,
        ):
            row = conn.execute(
                """WITH last AS (
                       SELECT max(id) AS id FROM sessionmem_transcript_entries
                       WHERE agent_id = %s AND session_id = %s AND kind = 'compaction')
                   SELECT coalesce(sum(e.bytes), 0), (SELECT id FROM last) IS NOT NULL
                   FROM sessionmem_transcript_entries e
                   WHERE e.agent_id = %s AND e.session_id = %s
                     AND e.id > coalesce((SELECT id FROM last), 0)""",
                (self.agent_id, self._session_id, self.agent_id, self._session_id),
            ).fetchone()
        assert row is not None
        grown, compacted = int(row[0]), bool(row[1])
        return grown if compacted else grown + len(orjson.dumps(self.header)) + 1


# --- the transcripts as the memory index reads them ---


def live_name(session_id: str) -> str:
    """A live transcript's name on the shelf: its file's name in a file store."""
    return f"{session_id}.jsonl"


def shelf_name(session_id: str, archived_at: datetime | None) -> str:
    """A transcript's name on the shelf: live, or the file store's archive name for when it was archived."""
    live = live_name(session_id)
    return live if archived_at is None else archive_name(Path(live), archived_at).name


def _session_of(name: str) -> str | None:
    """The session id a shelf name stands for (None: not a transcript's name)."""
    live = name if is_live_transcript_name(name) else reset_archive_of(name)
    return live.removesuffix(".jsonl") if live is not None else None


def _mtime_ns(stamp: str | None, fallback: datetime) -> int:
    """When a transcript last changed: its last entry's ``timestamp``, else ``fallback``."""
    when = fallback
    if stamp:
        with suppress(ValueError):
            when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1_000_000_000)


_SCAN = """
SELECT t.session_id, t.archived_at, t.created_at, octet_length(t.header::text) + 1 + coalesce(sized.total, 0),
       last.stamp
FROM sessionmem_transcripts t
LEFT JOIN LATERAL (SELECT sum(e.bytes) AS total FROM sessionmem_transcript_entries e
                   WHERE e.agent_id = t.agent_id AND e.session_id = t.session_id) sized ON true
LEFT JOIN LATERAL (SELECT e.entry->>'timestamp' AS stamp FROM sessionmem_transcript_entries e
                   WHERE e.agent_id = t.agent_id AND e.session_id = t.session_id
                   ORDER BY e.id DESC LIMIT 1) last ON true
WHERE t.agent_id = %s AND (%s::text[] IS NULL OR t.session_id = ANY(%s::text[]))
ORDER BY t.session_id"""

# The entries whose lines reach past byte ``rel`` (counted after the header line), up to ``rel_end``
_READ = """
SELECT entry::text, upto - bytes FROM (
    SELECT id, entry, bytes, sum(bytes) OVER (ORDER BY id) AS upto FROM sessionmem_transcript_entries
    WHERE agent_id = %s AND session_id = %s) lines
WHERE upto > %s AND (%s::bigint IS NULL OR upto - bytes < %s::bigint)
ORDER BY id"""


class PostgresShelf:
    """An agent's transcripts in PostgreSQL as the memory index reads them (see the module docstring)."""

    def __init__(self, connections: Connections, agent_id: str, where: str) -> None:
        self._connections = connections
        self.agent_id = agent_id
        self._where = where

    @property
    def where(self) -> str:
        return f"{self._where} (agent {self.agent_id})"

    @property
    def folder(self) -> Path | None:
        return None

    def scan(self, only: Collection[str] | None = None) -> list[ShelvedTranscript]:
        wanted = None if only is None else sorted({sid for sid in map(_session_of, only) if sid is not None})

        def failed(problem: str) -> TranscriptError:
            return TranscriptError(
                f"cannot list the transcripts of agent {self.agent_id} in PostgreSQL: {problem}"
            )

        with postgres_errors(self._connections.url, failed), self._connections.connection() as conn:
            rows = conn.execute(_SCAN, (self.agent_id, wanted, wanted)).fetchall()
        out = []
        for session_id, archived_at, created_at, size, stamp in rows:
            name = shelf_name(session_id, archived_at)
            if only is None or name in only:
                out.append(ShelvedTranscript(name, int(size), _mtime_ns(stamp, archived_at or created_at)))
        return out

    def read(self, name: str, offset: int = 0, limit: int | None = None) -> bytes:
        session_id = _session_of(name)
        if session_id is None:
            raise FileNotFoundError(f"not a transcript name: {name!r}")
        offset = max(0, offset)
        with transcript_errors(self._connections, session_id, "read"), self._connections.connection() as conn:
            found = conn.execute(
                "SELECT header::text, archived_at FROM sessionmem_transcripts"
                " WHERE agent_id = %s AND session_id = %s",
                (self.agent_id, session_id),
            ).fetchone()
            if found is None or shelf_name(session_id, found[1]) != name:
                raise FileNotFoundError(f"no transcript {name} in {self.where}")
            header = found[0].encode() + b"\n"
            end = None if limit is None else offset + max(0, limit)
            out = bytearray(header[offset:end])
            rel, rel_end = max(0, offset - len(header)), None if end is None else end - len(header)
            if rel_end is None or rel_end > 0:
                rows = conn.execute(_READ, (self.agent_id, session_id, rel, rel_end, rel_end)).fetchall()
                for text, start in rows:
                    line = text.encode() + b"\n"
                    out += line[max(0, rel - int(start)) :]
        return bytes(out if limit is None else out[: max(0, limit)])
