"""SQLite session store: one database per agent, a row per session, for a host with many sessions.

sessions.json is read whole and rewritten whole at every update, so a turn's cost grows with the number
of sessions. Here a turn reads and writes its own row only: ``sessions(key, entry, updated_at)``, where
``entry`` is the JSON object sessions.json would hold for the key (:meth:`SessionEntry.to_json_dict`, the
same camelCase fields, unknown ones kept), and ``updated_at`` its ``updatedAt`` (for listing by age).

- The database is ``sessions.sqlite`` (or any name given) in the sessions folder; the transcripts stay JSONL
  files beside it, with the same names, confinement rules, archives and turn lock as sessions.json
  (:class:`~sessionmem.session.stores.transcript_folder.TranscriptFolderBackend`), so hooks and the memory
  index read them as before.
- WAL journal, ``synchronous=FULL``: readers never wait for a writer, and a committed update survives a
  power cut. :meth:`SqliteSessionStore.update` runs in ``BEGIN IMMEDIATE``: the function sees the row as
  stored, and no other process or thread writes between its read and its write. A writer that holds the
  database past the busy timeout makes the others fail with
  :class:`~sessionmem.errors.StoreLockTimeout` naming the file, never write over it.
- One connection per thread (``sqlite3`` connections are not shared across threads), opened again in a
  forked child (a connection must not cross a ``fork``).
- A corrupt database (SQLite says it is not a database or is malformed, or a row is not a valid entry)
  is never silently emptied: under the recovery lock (``<file>.lock``) it is kept aside as
  ``<file>.corrupt-<ms>`` (with its ``-wal``), reported in :attr:`SqliteSessionStore.issues` and the log,
  and replaced by a database rebuilt from the transcripts in the folder, exactly as sessions.json is
  (:func:`~sessionmem.session.stores.recovery.entries_from_transcripts`). A database written by a newer
  sessionmem (another schema version) is refused with a clear error, not rebuilt.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson

from sessionmem.errors import SessionError, StoreLockTimeout
from sessionmem.messages import now_ms
from sessionmem.pathnames import given_path
from sessionmem.safefs import atomic_temp_path, create_private, make_private_dirs
from sessionmem.session.stores import keys
from sessionmem.session.stores.backend import updated_entry
from sessionmem.session.stores.entry import SessionEntry, entry_from_json
from sessionmem.session.stores.filelock import StoreLock
from sessionmem.session.stores.recovery import entries_from_transcripts
from sessionmem.session.stores.transcript_folder import TranscriptFolderBackend

log = logging.getLogger(__name__)

SCHEMA_VERSION = "1"
SQLITE_FILENAME = "sessions.sqlite"
SCHEMA = f"""
CREATE TABLE IF NOT EXISTS sessions (
    key        TEXT PRIMARY KEY,   -- the normalised session key
    entry      TEXT NOT NULL,      -- the SessionEntry as sessions.json stores it (camelCase JSON)
    updated_at INTEGER NOT NULL    -- its updatedAt (ms)
);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT OR IGNORE INTO meta (name, value) VALUES ('schema', '{SCHEMA_VERSION}');
"""
UPSERT = (
    "INSERT INTO sessions (key, entry, updated_at) VALUES (?, ?, ?) "
    "ON CONFLICT(key) DO UPDATE SET entry = excluded.entry, updated_at = excluded.updated_at"
)
_CORRUPT_CODES = {sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB}
_BUSY_CODES = {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED}
_FORKED: list[sqlite3.Connection] = []  # a parent's connections seen in a child: kept, never closed


class CorruptDatabase(SessionError):
    """Raised internally when the database or one of its rows cannot be read; the store recovers."""


class SqliteSessionStore(TranscriptFolderBackend):
    """The SQLite backend of the store seam (:mod:`sessionmem.session.stores.backend`); see the module
    docstring.

    ``busy_timeout_s``: how long an update waits for another writer before :class:`StoreLockTimeout`.
    """

    def __init__(
        self, path: str | Path, *, agent_id: str = keys.DEFAULT_AGENT_ID, busy_timeout_s: float = 10.0
    ) -> None:
        self.path = given_path(path)
        super().__init__(self.path.parent)
        self.agent_id = agent_id
        self.busy_timeout_s = busy_timeout_s
        self.issues: list[str] = []
        self.recovered = False
        self._local = threading.local()
        self._recovery_lock = StoreLock(
            self.path.with_name(self.path.name + ".lock"), timeout_s=busy_timeout_s
        )

    # --- reading ---

    def get(self, key: str) -> SessionEntry | None:
        norm = keys.normalize_key(key)
        return self._run(lambda conn: _row(conn, norm))

    def all(self) -> dict[str, SessionEntry]:
        def read(conn: sqlite3.Connection) -> dict[str, SessionEntry]:
            rows = conn.execute("SELECT key, entry FROM sessions ORDER BY key").fetchall()
            return {key: _parse(key, raw) for key, raw in rows}

        return self._run(read)

    # --- writing ---

    def update(
        self, key: str, fn: Callable[[SessionEntry | None], SessionEntry | None]
    ) -> SessionEntry | None:
        """Apply ``fn`` to the stored entry inside ``BEGIN IMMEDIATE`` and store what it returns.

        ``fn`` sees the row as stored (read inside the transaction, a fresh object); returning None changes
        nothing. If ``fn`` raises, nothing is written. Returns the entry now stored for ``key``.
        """
        norm = keys.normalize_key(key)

        def write(conn: sqlite3.Connection) -> SessionEntry | None:
            with self._transaction(conn):
                current = _row(conn, norm)
                new = updated_entry(fn, current)
                if new is None:
                    return current
                conn.execute(UPSERT, (norm, _dump(new), new.updated_at))
                return new

        return self._run(write)

    def delete(self, key: str) -> SessionEntry | None:
        """Remove ``key``; returns the entry it had, if any."""
        norm = keys.normalize_key(key)

        def remove(conn: sqlite3.Connection) -> SessionEntry | None:
            with self._transaction(conn):
                current = _row(conn, norm)
                conn.execute("DELETE FROM sessions WHERE key = ?", (norm,))
                return current

        return self._run(remove)

    def erase_entries(self, session_keys: Sequence[str]) -> list[str]:
        """Remove the rows of ``session_keys`` in one transaction with ``secure_delete`` on (the freed
        cells and pages are zeroed), rewrite the file (``VACUUM``: every turn rewrote its row, leaving
        older copies in free space), then checkpoint and truncate the WAL, which holds older page images
        (``forget``). Returns what could not be done (a WAL another connection keeps busy)."""
        rows = [(keys.normalize_key(k),) for k in session_keys]

        def remove(conn: sqlite3.Connection) -> list[str]:
            (before,) = conn.execute("PRAGMA secure_delete").fetchone()
            conn.execute("PRAGMA secure_delete = ON")
            try:
                with self._transaction(conn):
                    conn.executemany("DELETE FROM sessions WHERE key = ?", rows)
            finally:
                conn.execute(f"PRAGMA secure_delete = {int(before)}")
            issues = []
            try:  # rows rewritten every turn left older copies of themselves in free space
                conn.execute("VACUUM")
            except sqlite3.Error as exc:
                issues.append(f"VACUUM of {self.path} failed ({exc}); free pages may hold older rows")
            (busy, _, _) = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if busy:
                issues.append(f"{self.path}-wal could not be truncated (another connection was reading it)")
            return issues

        issues: list[str] = self._run(remove)
        return issues

    def put_many(self, entries: dict[str, SessionEntry]) -> None:
        """Store ``entries`` (key -> entry, replacing what those keys held) in one transaction."""
        rows = [(keys.normalize_key(k), _dump(e), e.updated_at) for k, e in entries.items()]

        def write(conn: sqlite3.Connection) -> None:
            with self._transaction(conn):
                conn.executemany(UPSERT, rows)

        self._run(write)

    def close(self) -> None:
        """Close this thread's connection (another call opens a new one)."""
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None and getattr(self._local, "pid", None) == os.getpid():
            conn.close()

    # --- connections and transactions ---

    def _run(self, op: Callable[[sqlite3.Connection], Any]) -> Any:
        """``op`` on this thread's connection; a corrupt database is recovered and ``op`` run again."""
        try:
            return self._translated(op)
        except CorruptDatabase as exc:
            self._recover(str(exc))
            return self._translated(op)

    def _translated(self, op: Callable[[sqlite3.Connection], Any]) -> Any:
        try:
            return op(self._connection())
        except sqlite3.Error as exc:
            raise self._error(exc) from exc

    def _error(self, exc: sqlite3.Error) -> SessionError:
        """SQLite's error as ours: busy -> StoreLockTimeout; corrupt -> CorruptDatabase; else SessionError."""
        code = getattr(exc, "sqlite_errorcode", -1) & 0xFF
        if code in _BUSY_CODES:
            return StoreLockTimeout(str(self.path), self.busy_timeout_s)
        if code in _CORRUPT_CODES:
            return CorruptDatabase(f"SQLite says: {exc}")
        return SessionError(f"session store {self.path}: {exc}")

    def _connection(self) -> sqlite3.Connection:
        """This thread's connection, opened on first use (and again in a forked child, or when the file
        was replaced, e.g. rebuilt by another process)."""
        local = self._local
        conn: sqlite3.Connection | None = getattr(local, "conn", None)
        if conn is not None and local.pid == os.getpid() and local.ino == _inode(self.path):
            return conn
        if conn is not None:
            if local.pid != os.getpid():
                _FORKED.append(conn)  # closing it here could disturb the parent's locks
            else:
                conn.close()
        local.conn = None
        conn = self._open()
        local.conn, local.pid, local.ino = conn, os.getpid(), _inode(self.path)
        return conn

    def _open(self) -> sqlite3.Connection:
        try:
            make_private_dirs(self.path.parent)
            create_private(self.path)  # SQLite gives its -wal and -shm files the database's mode
        except OSError as exc:
            raise SessionError(f"cannot create session store {self.path}: {exc}") from exc
        conn = sqlite3.connect(
            self.path, timeout=self.busy_timeout_s, isolation_level=None, check_same_thread=True
        )
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            _ensure_schema(conn, self.path)
        except BaseException:
            conn.close()
            raise
        return conn

    @contextlib.contextmanager
    def _transaction(self, conn: sqlite3.Connection) -> Iterator[None]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT`` (a savepoint when one is open already); rolled back if the
        block raises."""
        if conn.in_transaction:
            conn.execute("SAVEPOINT nested")
            try:
                yield
            except BaseException:
                conn.execute("ROLLBACK TO nested")
                conn.execute("RELEASE nested")
                raise
            conn.execute("RELEASE nested")
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    # --- recovery ---

    def _recover(self, reason: str) -> None:
        """Keep the corrupt database aside and rebuild it from the transcripts (module docstring)."""
        self.close()
        with self._recovery_lock:
            try:  # another process may have rebuilt it while we waited for the lock
                self._translated(_check_readable)
                return
            except CorruptDatabase:
                self.close()
            entries = entries_from_transcripts(self.sessions_dir, self.agent_id)
            fresh = atomic_temp_path(self.path)
            try:
                _write_new_database(fresh, entries)
                aside = self.path.with_name(f"{self.path.name}.corrupt-{now_ms()}")
                # Trigger: a -wal file beside the corrupt database. Why: SQLite would replay it onto the
                # rebuilt one. Outcome: it goes aside with the database; the -shm index is rebuilt.
                os.link(self.path, aside)
                for suffix in ("-wal", "-shm"):
                    side = self.path.with_name(self.path.name + suffix)
                    with contextlib.suppress(FileNotFoundError):
                        if suffix == "-wal":
                            os.replace(side, aside.with_name(aside.name + suffix))
                        else:
                            os.unlink(side)
                os.replace(fresh, self.path)
            except (OSError, sqlite3.Error) as exc:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(fresh)
                raise SessionError(
                    f"session store {self.path} is corrupt ({reason}) and could not be rebuilt from the "
                    f"transcripts in {self.sessions_dir}: {exc}. The file is left as it is"
                ) from exc
        message = (
            f"{self.path} was corrupt ({reason}); kept aside as {aside.name} and rebuilt "
            f"{len(entries)} entries from transcripts"
        )
        self.issues.append(message)
        self.recovered = True
        log.warning("%s", message)


def _ensure_schema(conn: sqlite3.Connection, path: Path) -> None:
    """Create the tables in a new database (one writer does it); refuse another schema version."""
    has_meta = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone()
    if has_meta is None:  # a new database: the only time opening writes
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in filter(str.strip, SCHEMA.split(";")):
                conn.execute(statement)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    found = conn.execute("SELECT value FROM meta WHERE name = 'schema'").fetchone()
    if found is None or found[0] != SCHEMA_VERSION:
        raise SessionError(
            f"session store {path} has schema version {found[0] if found else None!r}; this sessionmem "
            f"reads version {SCHEMA_VERSION} (was it written by a newer sessionmem?)"
        )


def _check_readable(conn: sqlite3.Connection) -> None:
    """Read every row (what :meth:`SqliteSessionStore.all` does); raises CorruptDatabase if one fails."""
    for key, raw in conn.execute("SELECT key, entry FROM sessions"):
        _parse(key, raw)


def _write_new_database(path: Path, entries: dict[str, SessionEntry]) -> None:
    create_private(path)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        _ensure_schema(conn, path)
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(UPSERT, [(key, _dump(e), e.updated_at) for key, e in entries.items()])
        conn.execute("COMMIT")
    finally:
        conn.close()  # the last connection: the WAL is checkpointed into the file and removed


def _row(conn: sqlite3.Connection, key: str) -> SessionEntry | None:
    found = conn.execute("SELECT entry FROM sessions WHERE key = ?", (key,)).fetchone()
    return _parse(key, found[0]) if found is not None else None


def _parse(key: str, raw: Any) -> SessionEntry:
    try:
        return entry_from_json(raw)
    except ValueError as exc:
        raise CorruptDatabase(f"the row of {key!r} is invalid: {exc}") from None


def _dump(entry: SessionEntry) -> str:
    return orjson.dumps(entry.to_json_dict()).decode("utf-8")


def _inode(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except FileNotFoundError:
        return None
