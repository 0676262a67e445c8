"""The store seam: what a session needs of the place its record and its transcript are kept.

The steps of a turn (the gate, rotation, commands, the runner) talk to the store only through
:class:`SessionBackend`, so a backend is swapped without touching them. What they need:

- the entry of a session key (:class:`~sessionmem.session.stores.entry.SessionEntry`): ``get``, ``all``,
  ``delete``, and ``update(key, fn)``: read the current entry, apply ``fn``, store what it returns, all
  atomically with respect to every other runner and process on the store. ``fn`` sees the stored entry
  (never a cached one) and may return None to change nothing: that is how the gate *claims* the flush
  and counts a compaction once per cycle;
- the transcript of a session (:class:`TranscriptLog`): appended to entry by entry, read back in order;
  ``new_session_file`` is what a new session's entry records as ``sessionFile``; ``open_transcript``
  opens (creating if new) the transcript an entry names; ``archive_transcript`` puts an ending session's
  transcript aside at a rotation (``/new``, ``/reset``, daily and idle resets);
- ``turn_lock(key)``: a cross-process lock around one turn of a session key, waited for with a timeout
  that ends in :class:`~sessionmem.errors.TurnLockTimeout` (``async with store.turn_lock(key): ...``).
  The runner holds it around every turn, command and rotation, and reloads the session's state after
  taking it, so turns of one key are serialised across runners and processes.

Optional capabilities (separate protocols, so the seam itself stays as it is):

- :class:`VersionedTranscript`, a transcript that can say cheaply whether anything was appended since a
  given moment. With it, a session that takes the turn lock re-reads its transcript only when another
  runner wrote to it (or a turn of its own failed half-way); without it, at every turn.
- :class:`StoredLines` (a transcript) and :class:`TranscriptImport` (a backend): a transcript read and
  written whole, line by line as stored, so ``sessionmem sessions export/import``
  (:mod:`sessionmem.session.stores.copy`) moves a store between backends without changing a byte.
- :class:`ShelvedStore` (a backend whose transcripts are not files): the shelf the memory index reads them
  from (:func:`transcript_shelf` gives any backend's).
- :class:`ErasableStore` (a backend): every transcript it keeps, and their erasure with the entries, so
  ``forget`` (:mod:`sessionmem.session.lifecycle.forget`) removes a person from the store.

Backends (public in :mod:`sessionmem.session`): :class:`~sessionmem.session.stores.sessions_json.SessionStore`
(sessions.json and JSONL transcripts in one sessions folder: OpenClaw's format, the default),
:class:`~sessionmem.session.stores.sessions_sqlite.SqliteSessionStore` and
:class:`~sessionmem.session.stores.sessions_postgres.PostgresSessionStore`. Outside implementers write a plain
class with these methods (the :class:`SessionBackend` protocol); ours derive from :class:`SessionBackendABC`,
which adds ``patch`` and ``in`` on top of them. Methods are synchronous: each is a short read or write, which
the runner makes inline (an async backend would wrap its client in blocking calls the same way SQLite does).
"""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, Unpack, runtime_checkable

from sessionmem.errors import UsageError
from sessionmem.memory.sync.transcript_names import FolderShelf, TranscriptShelf
from sessionmem.messages import Message, now_ms
from sessionmem.session.stores import keys
from sessionmem.session.stores.entry import SessionEntry, aliased_fields
from sessionmem.session.stores.transcript import Entry, MessageMeta

EntryUpdate = Callable[[SessionEntry | None], SessionEntry | None]
"""``update``'s function: the stored entry (None when the key has none) -> the entry to store (None: no
change)."""


def updated_entry(fn: EntryUpdate, current: SessionEntry | None) -> SessionEntry | None:
    """``fn(current)`` as every backend's ``update`` applies it: the entry to store, or None (no change);
    anything else is the caller's mistake, refused before a byte is written."""
    new = fn(current)
    if new is not None and not isinstance(new, SessionEntry):
        raise UsageError(f"update function must return a SessionEntry or None, not {type(new).__name__}")
    return new


DEFAULT_TURN_LOCK_TIMEOUT_S = 120.0  # a turn with a flush and a compaction makes several model calls


@runtime_checkable
class TranscriptLog(Protocol):
    """One session's transcript: append-only entries in order, the same JSON objects as the JSONL lines
    (``transcripts/README.md``), read back in the order they were written."""

    @property
    def session_id(self) -> str: ...

    @property
    def path(self) -> Path | None:
        """The file, where the backend keeps transcripts in files (hooks and the memory index read it)."""
        ...

    def append_message(self, msg: Message, **meta: Unpack[MessageMeta]) -> str:
        """Append a ``message`` entry; returns its id."""
        ...

    def append_compaction(
        self,
        summary: str,
        first_kept_entry_id: str | None,
        tokens_before: int,
        tokens_after: int | None = None,
        *,
        details: dict[str, Any] | None = None,
    ) -> str:
        """Append a ``compaction`` entry; returns its id."""
        ...

    def entries(self) -> list[Entry]:
        """Every entry, in the order written."""
        ...

    def context_messages(self) -> list[tuple[str, Message]]:
        """The model context (:func:`~sessionmem.session.stores.transcript.context_from_entries`)."""
        ...

    def bytes_since_compaction(self) -> int:
        """How much the transcript grew after its latest compaction entry (serialised JSON lines)."""
        ...


@runtime_checkable
class VersionedTranscript(Protocol):
    """Optional capability of a :class:`TranscriptLog`: ``version()`` returns a value that changes
    whenever an entry is appended, by this process or any other (for a file: its inode and size; for a
    database: the newest row's id, or a row count). It must be cheap: it is read at every turn."""

    def version(self) -> Hashable: ...


def transcript_version(transcript: TranscriptLog) -> Hashable | None:
    """``transcript.version()`` where the backend offers it (:class:`VersionedTranscript`), else None:
    the caller cannot tell whether the transcript changed and reads it again."""
    if isinstance(transcript, VersionedTranscript):
        return transcript.version()
    return None


@runtime_checkable
class StoredLines(Protocol):
    """Optional capability of a :class:`TranscriptLog`: every stored line, the header first, as the JSON
    bytes it is stored as (no newline; a torn or unreadable line left out). Without it a copy rebuilds
    the lines from :meth:`TranscriptLog.entries` (the header is then the target's own)."""

    def stored_lines(self) -> Iterator[bytes]: ...


@runtime_checkable
class TranscriptImport(Protocol):
    """Optional capability of a :class:`SessionBackend`: the target of a copy between backends."""

    def import_transcript(self, key: str, entry: SessionEntry, lines: Iterable[bytes]) -> SessionEntry:
        """Store ``lines`` (:meth:`StoredLines.stored_lines` of the source) whole as the transcript of
        ``key``, replacing any it had; returns ``entry`` as it must be stored here (e.g. ``sessionFile``
        naming this backend's file). Called before the entry is stored: the transcript is the record."""
        ...


@dataclass(frozen=True, slots=True)
class KeptTranscript:
    """One transcript a store keeps, live or archived (:class:`ErasableStore`)."""

    name: str  # as the memory index names it (``sessions/<name>``): the file's, or its name on the shelf
    session_key: str | None  # the key its header names (None: none named)
    session_id: str | None  # the session id its header names
    path: Path | None = None  # the file, where transcripts are files


@runtime_checkable
class ErasableStore(Protocol):
    """Optional capability of a :class:`SessionBackend`: what ``forget`` needs
    (:mod:`sessionmem.session.lifecycle.forget`). All three of sessionmem's backends have it."""

    def kept_transcripts(self) -> list[KeptTranscript]:
        """Every transcript the store keeps: live ones, ``/new`` and ``/reset`` archives, deleted ones,
        whoever they belong to."""
        ...

    def transcript_lines(self, kept: KeptTranscript) -> Iterator[bytes]:
        """The stored lines of one of them (header first), to look for mentions of a person."""
        ...

    def erase(self, session_keys: Sequence[str], transcripts: Sequence[KeptTranscript]) -> list[str]:
        """Delete ``transcripts``, then the entries of ``session_keys``, leaving no copy the store can
        still read back (a database's free pages and log included, as far as it can reach them); returns
        what it could not do (e.g. a log another process keeps busy)."""
        ...


@runtime_checkable
class ShelvedStore(Protocol):
    """Optional capability of a :class:`SessionBackend` whose transcripts are not files in its
    ``sessions_dir``: the shelf the memory index reads them from (the ``sessions`` source, ``memory_get``)."""

    def transcript_shelf(self) -> TranscriptShelf: ...


def transcript_shelf(store: SessionBackend) -> TranscriptShelf | None:
    """Where the memory index reads ``store``'s transcripts: its sessions folder, or the shelf it offers
    (:class:`ShelvedStore`); None when it offers neither."""
    if store.sessions_dir is not None:
        return FolderShelf(store.sessions_dir)
    if isinstance(store, ShelvedStore):
        return store.transcript_shelf()
    return None


def open_entry(store: SessionBackend, key: str) -> tuple[SessionEntry, bool]:
    """The stored entry of ``key``, or a new session's (a new session id and transcript file), created
    here; True when this call created it.

    Trigger: two processes open one new key at once; both read "no entry". Why: creating in a second
    step would let each write its own sessionId, the last one winning in the store while the first talks
    to an orphan transcript. Outcome: the entry is created in one locked update that re-reads the store,
    so whoever comes second adopts the first one's session."""
    entry = store.get(key)
    if entry is not None:
        return entry, False
    session_id = str(uuid.uuid4())
    fresh = SessionEntry.model_validate(
        {
            "sessionId": session_id,
            "sessionFile": store.new_session_file(session_id),
            "chatType": keys.chat_type(key),
            "sessionKey": key,
        }
    )
    entry = store.update(key, lambda current: current or fresh)
    assert entry is not None
    return entry, entry.session_id == session_id


@runtime_checkable
class SessionBackend(Protocol):
    """Where sessions are kept; see the module docstring for what each method promises."""

    @property
    def sessions_dir(self) -> Path | None:
        """The folder of the transcript files (None when they are not files)."""
        ...

    def get(self, key: str) -> SessionEntry | None: ...

    def all(self) -> dict[str, SessionEntry]: ...

    def update(self, key: str, fn: EntryUpdate) -> SessionEntry | None:
        """Apply ``fn`` to the stored entry atomically; returns the entry now stored for ``key``."""
        ...

    def delete(self, key: str) -> SessionEntry | None:
        """Remove ``key``; returns the entry it had."""
        ...

    def new_session_file(self, session_id: str) -> str | None:
        """``sessionFile`` for the entry of a new session (None: the backend keeps no files)."""
        ...

    def open_transcript(self, key: str, entry: SessionEntry, *, cwd: Path) -> TranscriptLog:
        """The transcript ``entry`` names, created (with its header; ``cwd`` recorded there) if new."""
        ...

    def archive_transcript(self, transcript: TranscriptLog, when: datetime) -> Path | None:
        """Put an ending session's transcript aside (rotation); the archived file, if it is one."""
        ...

    def turn_lock(
        self, key: str, *, timeout_s: float = DEFAULT_TURN_LOCK_TIMEOUT_S
    ) -> AbstractAsyncContextManager[None]:
        """A cross-process lock around one turn of ``key``; raises ``TurnLockTimeout`` after ``timeout_s``."""
        ...


class SessionBackendABC(ABC):
    """Base of sessionmem's own backends: the seam's methods, plus helpers built on them."""

    @property
    @abstractmethod
    def sessions_dir(self) -> Path | None: ...

    @abstractmethod
    def get(self, key: str) -> SessionEntry | None: ...

    @abstractmethod
    def all(self) -> dict[str, SessionEntry]: ...

    @abstractmethod
    def update(self, key: str, fn: EntryUpdate) -> SessionEntry | None: ...

    @abstractmethod
    def delete(self, key: str) -> SessionEntry | None: ...

    @abstractmethod
    def new_session_file(self, session_id: str) -> str | None: ...

    @abstractmethod
    def open_transcript(self, key: str, entry: SessionEntry, *, cwd: Path) -> TranscriptLog: ...

    @abstractmethod
    def archive_transcript(self, transcript: TranscriptLog, when: datetime) -> Path | None: ...

    @abstractmethod
    def turn_lock(
        self, key: str, *, timeout_s: float = DEFAULT_TURN_LOCK_TIMEOUT_S
    ) -> AbstractAsyncContextManager[None]: ...

    def __contains__(self, key: str) -> bool:
        return self.get(key) is not None

    def patch(self, key: str, **fields: Any) -> SessionEntry:
        """Set ``fields`` (snake_case or camelCase) on the entry, creating it if needed.

        ``updatedAt`` becomes ``max(existing, now)`` unless given. Creating needs ``session_id``.
        """

        def apply(entry: SessionEntry | None) -> SessionEntry:
            if entry is not None:
                return entry.touched(**fields)
            given = aliased_fields(fields)
            if "sessionId" not in given:
                raise UsageError(f"cannot create session {key!r} without session_id")
            return SessionEntry.model_validate({"updatedAt": now_ms(), **given})

        result = self.update(key, apply)
        assert result is not None
        return result
