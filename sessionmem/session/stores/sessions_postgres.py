"""Sessions in PostgreSQL, shared by gateway hosts on several machines (the store seam's third backend).

:class:`PostgresSessionStore` keeps what :class:`~sessionmem.session.stores.sessions_json.SessionStore` keeps
in sessions.json and JSONL files in three tables (:mod:`sessionmem.session.stores.postgres_schema`), so every
host that connects to one database sees the same sessions, transcripts and counters:

- ``update(key, fn)`` is one transaction: the row is read ``FOR UPDATE`` (a new key is inserted with
  ``ON CONFLICT DO NOTHING`` and, when another host inserted it first, read again), ``fn`` sees it and
  its result is written before the commit. Two hosts updating one key queue on the row, so the flush's
  claim and the compaction count are made once per cycle whichever host runs the turn;
- ``turn_lock(key)`` is a session-level ``pg_advisory_lock`` on a 64-bit hash of (agent, key), held on a
  connection of its own for the whole turn, through which the turn's statements about that session go
  (:mod:`sessionmem.session.stores.postgres_connections` says why). The server queues waiters in order and
  frees the lock when its holder's connection ends, a host killed mid-turn included; the wait ends after
  ``timeout_s`` in :class:`~sessionmem.errors.TurnLockTimeout` (``lock_timeout``). The wait runs in a thread;
  the common case, a free lock, is taken inline with ``pg_try_advisory_lock``;
- transcripts are :class:`~sessionmem.session.stores.postgres_transcript.PostgresTranscript` rows: ``path``,
  ``sessions_dir`` and ``new_session_file`` are None; a rotation marks the old transcript archived
  (``archived_at``), its rows kept and queryable.

Two connection pools, both small: one for the short reads and writes (``pool_size``), one for the turn
locks (``lock_pool_size``: the turns that may run at once in this process; a turn waiting for a free
connection counts against its lock timeout). All methods are synchronous, as the runner calls them.

Open it with :meth:`PostgresSessionStore.connect` (a DSN, ``postgresql://user@host:5432/db``); the tables
are created on first connect. Needs the ``postgres`` extra (psycopg 3 and its pool).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from sessionmem.dsn import PostgresUrl, postgres_errors
from sessionmem.errors import ConfigError, SessionError, TurnLockTimeout, UsageError
from sessionmem.session.stores import keys
from sessionmem.session.stores.backend import (
    DEFAULT_TURN_LOCK_TIMEOUT_S,
    EntryUpdate,
    KeptTranscript,
    SessionBackendABC,
    TranscriptLog,
    updated_entry,
)
from sessionmem.session.stores.entry import SessionEntry, entry_from_json
from sessionmem.session.stores.postgres_connections import Connections
from sessionmem.session.stores.postgres_schema import ensure_schema
from sessionmem.session.stores.postgres_transcript import PostgresShelf, PostgresTranscript, shelf_name
from sessionmem.session.stores.transcript import new_header

try:
    import psycopg
    from psycopg_pool import ConnectionPool, PoolTimeout
except ImportError as exc:  # pragma: no cover - the extra is installed wherever the tests run
    raise ConfigError(
        "session.store is a PostgreSQL DSN, which needs psycopg 3 and its pool: "
        "pip install 'sessionmem[postgres]'"
    ) from exc

DEFAULT_POOL_SIZE = 4
DEFAULT_LOCK_POOL_SIZE = 16
DEFAULT_CONNECT_TIMEOUT_S = 10.0
FAST_CONNECTION_WAIT_S = 0.05  # the inline try for a lock connection; longer waits go to a thread


def turn_lock_id(agent_id: str, key: str) -> int:
    """The advisory lock id of a session key: the first 8 bytes of sha256(agent NUL key), signed."""
    digest = hashlib.sha256(f"{agent_id}\0{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class PostgresSessionStore(SessionBackendABC):
    """The sessions of one agent in a PostgreSQL database; see the module docstring."""

    def __init__(self, pool: Any, lock_pool: Any, *, agent_id: str, url: PostgresUrl) -> None:
        self.agent_id = keys.validate_agent_id(agent_id)
        self.where = url.shown  # scheme://user@host:port/db, for messages: never the password
        self._url = url
        self._pool = pool
        self._lock_pool = lock_pool
        self._connections = Connections(pool, url)

    @classmethod
    def connect(
        cls,
        dsn: str | PostgresUrl,
        *,
        agent_id: str = keys.DEFAULT_AGENT_ID,
        pool_size: int = DEFAULT_POOL_SIZE,
        lock_pool_size: int = DEFAULT_LOCK_POOL_SIZE,
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
    ) -> PostgresSessionStore:
        """Connect to ``dsn`` (a ``postgresql://`` URL, :mod:`sessionmem.dsn`), create or migrate the
        tables, and return the store of ``agent_id``.

        Raises :class:`~sessionmem.errors.ConfigError` when the URL is invalid (naming the part, never its
        value) or the server cannot be reached within ``connect_timeout_s``; no message holds the
        password."""
        url = dsn if isinstance(dsn, PostgresUrl) else PostgresUrl.parse(dsn, setting="the session store URL")
        where = url.shown
        if pool_size < 1 or lock_pool_size < 1:
            raise UsageError("pool_size and lock_pool_size must be at least 1")
        pools = []

        def unusable(problem: str) -> ConfigError:
            return ConfigError(
                f"cannot use the PostgreSQL session store at {where}: {problem} "
                "(is the server running, and the URL in session.store right?)"
            )

        try:
            with postgres_errors(url, unusable):
                # One connection first: a refused login or a missing database is said as the server says
                # it, at once (a pool would retry until its timeout, then say only that it timed out).
                with psycopg.connect(
                    url.conninfo, autocommit=True, connect_timeout=max(1, round(connect_timeout_s))
                ) as conn:
                    ensure_schema(conn)
                sizes = (("sessionmem-store", pool_size), ("sessionmem-turn-locks", lock_pool_size))
                for name, size in sizes:
                    pool = ConnectionPool(
                        url.conninfo,
                        min_size=1,
                        max_size=size,
                        kwargs={"autocommit": True},
                        configure=_transcript_commits,
                        # a connection the server ended while idle in the pool (a restart, a failover, an
                        # idle timeout) is found at checkout and replaced, so the next turn gets a live one
                        check=ConnectionPool.check_connection,
                        name=name,
                        open=False,
                        timeout=connect_timeout_s,
                    )
                    pools.append(pool)
                    pool.open(wait=True, timeout=connect_timeout_s)
        except BaseException:
            for pool in pools:
                pool.close()
            raise
        return cls(pools[0], pools[1], agent_id=agent_id, url=url)

    def close(self) -> None:
        """Close both pools (turn locks still held are released with their connections)."""
        self._pool.close()
        self._lock_pool.close()

    def __enter__(self) -> PostgresSessionStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def _db(self, what: str, key: str | None = None) -> Iterator[Any]:
        """The connection for a statement about session ``key`` (:class:`Connections`); a database error
        becomes a :class:`SessionError` naming ``what`` (:func:`~sessionmem.dsn.postgres_errors`)."""

        def failed(problem: str) -> SessionError:
            return SessionError(f"PostgreSQL session store {self.where}: cannot {what}: {problem}")

        with postgres_errors(self._url, failed), self._connections.connection(key) as conn:
            yield conn

    # --- entries ---

    @property
    def sessions_dir(self) -> Path | None:
        return None

    def _parse(self, key: str, text: str) -> SessionEntry:
        try:
            return entry_from_json(text)
        except ValueError as exc:
            raise SessionError(
                f"PostgreSQL session store {self.where}: the entry of {key} (agent {self.agent_id}) is "
                f"invalid ({exc}); fix or delete its row in sessionmem_sessions"
            ) from None

    def get(self, key: str) -> SessionEntry | None:
        norm = keys.normalize_key(key)
        with self._db(f"read session {norm}", norm) as conn:
            row = conn.execute(
                "SELECT entry::text FROM sessionmem_sessions WHERE agent_id = %s AND key = %s",
                (self.agent_id, norm),
            ).fetchone()
        return self._parse(norm, row[0]) if row is not None else None

    def all(self) -> dict[str, SessionEntry]:
        with self._db("list sessions") as conn:
            rows = conn.execute(
                "SELECT key, entry::text FROM sessionmem_sessions WHERE agent_id = %s ORDER BY key",
                (self.agent_id,),
            ).fetchall()
        return {key: self._parse(key, text) for key, text in rows}

    def update(self, key: str, fn: EntryUpdate) -> SessionEntry | None:
        """``fn`` on the row read ``FOR UPDATE``, its result written, in one transaction (see the module
        docstring). ``fn`` runs again only when another host created the key between our read and our
        insert, then on that host's entry."""
        norm = keys.normalize_key(key)
        with self._db(f"update session {norm}", norm) as conn:
            while True:
                with conn.transaction():
                    conn.execute("SET LOCAL synchronous_commit = on")  # see _transcript_commits
                    row = conn.execute(
                        """SELECT entry::text FROM sessionmem_sessions
                           WHERE agent_id = %s AND key = %s FOR UPDATE""",
                        (self.agent_id, norm),
                    ).fetchone()
                    current = self._parse(norm, row[0]) if row is not None else None
                    new = updated_entry(fn, current)
                    if new is None:
                        return current
                    payload = orjson.dumps(new.to_json_dict()).decode()
                    if current is not None:
                        conn.execute(
                            """UPDATE sessionmem_sessions SET entry = %s::jsonb, updated_at = %s
                               WHERE agent_id = %s AND key = %s""",
                            (payload, new.updated_at, self.agent_id, norm),
                        )
                        return new
                    inserted = conn.execute(
                        """INSERT INTO sessionmem_sessions (agent_id, key, entry, updated_at)
                           VALUES (%s, %s, %s::jsonb, %s) ON CONFLICT (agent_id, key) DO NOTHING""",
                        (self.agent_id, norm, payload, new.updated_at),
                    ).rowcount
                    if inserted:
                        return new
                # Trigger: another host created the key after our read. Why: its entry must be what fn
                # sees (it may have named another session). Outcome: read it again, locked this time.

    def delete(self, key: str) -> SessionEntry | None:
        norm = keys.normalize_key(key)
        with self._db(f"delete session {norm}", norm) as conn:
            row = conn.execute(
                "DELETE FROM sessionmem_sessions WHERE agent_id = %s AND key = %s RETURNING entry::text",
                (self.agent_id, norm),
            ).fetchone()
        return self._parse(norm, row[0]) if row is not None else None

    # --- transcripts ---

    def new_session_file(self, session_id: str) -> str | None:
        return None

    def open_transcript(self, key: str, entry: SessionEntry, *, cwd: Path) -> PostgresTranscript:
        session_id = keys.validate_session_id(entry.session_id)
        return PostgresTranscript.open(
            self._connections, self.agent_id, keys.normalize_key(key), session_id, cwd
        )

    def import_transcript(self, key: str, entry: SessionEntry, lines: Iterable[bytes]) -> SessionEntry:
        """Store a transcript copied from another backend (:class:`~sessionmem.session.stores.backend.
        TranscriptImport`): the first of ``lines`` is the header, the others the entries, kept as the
        JSON text given; any transcript rows of that session are replaced, in one transaction. Returns
        ``entry`` without a ``sessionFile`` (the rows are the transcript)."""
        session_id = keys.validate_session_id(entry.session_id)
        key = keys.normalize_key(key)
        header, *rest = list(lines) or [orjson.dumps(new_header(session_id, None, session_key=key))]
        rows = []
        for line in rest:
            obj = orjson.loads(line)
            rows.append((self.agent_id, session_id, str(obj.get("type", "")), line.decode(), len(line) + 1))
        with self._db(f"import the transcript of session {session_id}", key) as conn, conn.transaction():
            conn.execute(
                "DELETE FROM sessionmem_transcript_entries WHERE agent_id = %s AND session_id = %s",
                (self.agent_id, session_id),
            )
            conn.execute(
                """INSERT INTO sessionmem_transcripts (agent_id, session_id, session_key, header)
                   VALUES (%s, %s, %s, %s::json) ON CONFLICT (agent_id, session_id)
                   DO UPDATE SET header = excluded.header, session_key = excluded.session_key,
                                 archived_at = NULL""",
                (self.agent_id, session_id, key, header.decode()),
            )
            with conn.cursor() as cur:
                cur.executemany(
                    """INSERT INTO sessionmem_transcript_entries (agent_id, session_id, kind, entry, bytes)
                       VALUES (%s, %s, %s, %s::json, %s)""",
                    rows,
                )
        return entry.with_updates(session_file=None)

    def archive_transcript(self, transcript: TranscriptLog, when: datetime) -> Path | None:
        """Mark the transcript archived at ``when``; its rows stay. None: no file was made."""
        key = getattr(transcript, "session_key", None)
        with self._db(f"archive the transcript of session {transcript.session_id}", key) as conn:
            conn.execute(
                """UPDATE sessionmem_transcripts SET archived_at = %s
                   WHERE agent_id = %s AND session_id = %s AND archived_at IS NULL""",
                (when, self.agent_id, transcript.session_id),
            )
        return None

    def transcript_shelf(self) -> PostgresShelf:
        """The transcripts as the memory index reads them (the ``sessions`` source, ``memory_get``)."""
        return PostgresShelf(self._connections, self.agent_id, self.where)

    def archived_at(self, session_id: str) -> datetime | None:
        """When the transcript of ``session_id`` was archived (None: live, or unknown)."""
        with self._db(f"read the transcript of session {session_id}") as conn:
            row = conn.execute(
                "SELECT archived_at FROM sessionmem_transcripts WHERE agent_id = %s AND session_id = %s",
                (self.agent_id, session_id),
            ).fetchone()
        return row[0] if row is not None else None

    # --- erasure (backend.ErasableStore) ---

    def kept_transcripts(self) -> list[KeptTranscript]:
        """Every transcript of this agent in the database, live or archived, named as on the
        :meth:`transcript_shelf` (so as the memory index names it)."""
        with self._db("list transcripts") as conn:
            rows = conn.execute(
                "SELECT session_id, session_key, archived_at FROM sessionmem_transcripts WHERE agent_id = %s"
                " ORDER BY session_id",
                (self.agent_id,),
            ).fetchall()
        return [KeptTranscript(shelf_name(sid, archived), key, sid) for sid, key, archived in rows]

    def transcript_lines(self, kept: KeptTranscript) -> Iterator[bytes]:
        with self._db(f"read the transcript of session {kept.name}") as conn:
            header = conn.execute(
                "SELECT header::text FROM sessionmem_transcripts WHERE agent_id = %s AND session_id = %s",
                (self.agent_id, kept.session_id),
            ).fetchone()
            rows = conn.execute(
                "SELECT entry::text FROM sessionmem_transcript_entries"
                " WHERE agent_id = %s AND session_id = %s ORDER BY id",
                (self.agent_id, kept.session_id),
            ).fetchall()
        if header is not None:
            yield header[0].encode()
        for (text,) in rows:
            yield text.encode()

    def erase(self, session_keys: Sequence[str], transcripts: Sequence[KeptTranscript]) -> list[str]:
        """Per session key, one transaction (on the connection holding its turn lock, when this process
        holds it): its transcripts' entry rows, their header rows, its session row. Then the three tables
        are vacuumed, so the dead rows are pruned (PostgreSQL does not zero freed space: README, Privacy).
        Returns what could not be done."""
        by_key: dict[str | None, list[str]] = {}
        wanted = {keys.normalize_key(k) for k in session_keys}
        for kept in transcripts:
            owner = kept.session_key if kept.session_key in wanted else None
            by_key.setdefault(owner, []).append(kept.session_id or kept.name)
        for key in [*sorted(wanted), None]:
            ids = by_key.get(key, [])
            if key is None and not ids:
                continue
            with self._db(f"forget session {key or ', '.join(ids)}", key) as conn, conn.transaction():
                conn.execute("SET LOCAL synchronous_commit = on")
                conn.execute(
                    "DELETE FROM sessionmem_transcript_entries WHERE agent_id = %s AND session_id = ANY(%s)",
                    (self.agent_id, ids),
                )
                conn.execute(
                    "DELETE FROM sessionmem_transcripts WHERE agent_id = %s AND session_id = ANY(%s)",
                    (self.agent_id, ids),
                )
                if key is not None:
                    conn.execute(
                        "DELETE FROM sessionmem_sessions WHERE agent_id = %s AND key = %s",
                        (self.agent_id, key),
                    )
        try:
            with self._db("vacuum the session tables") as conn:
                conn.execute(
                    "VACUUM sessionmem_transcript_entries, sessionmem_transcripts, sessionmem_sessions"
                )
        except SessionError as exc:
            return [f"{exc}; autovacuum will prune the deleted rows"]
        return []

    def turn_lock(self, key: str, *, timeout_s: float = DEFAULT_TURN_LOCK_TIMEOUT_S) -> PgTurnLock:
        norm = keys.normalize_key(key)
        return PgTurnLock(
            self._lock_pool, self._connections, turn_lock_id(self.agent_id, norm), norm, self.where, timeout_s
        )


def _transcript_commits(conn: Any) -> None:
    """Each connection of the store's pools commits without waiting for the WAL flush
    (``synchronous_commit = off``), and :meth:`PostgresSessionStore.update` turns it back on for its
    transaction.

    Trigger: a turn appends two or more transcript rows and updates its entry once. Why: waiting for the
    server's WAL flush at each append costs about 60 µs of client CPU and a disk flush of wall time, three
    times a turn; a JSONL append is not fsynced either. Nothing is weaker than with files: a host killed
    at any moment loses nothing the server acknowledged (the row is committed in the server), and the WAL
    is flushed in order, so the entry update's synchronous commit, which follows the appends of the turn,
    makes them durable with it; a server crash can lose only appends after the last entry update, the
    transcript and the store going back together (a prefix of the WAL), which reconcile-on-open handles
    as it handles a kill between the transcript and the store."""
    conn.execute("SET synchronous_commit = off")


class PgTurnLock:
    """``pg_advisory_lock`` around one turn, on a connection of the lock pool (``async with``, or
    ``with`` in threaded code); see :class:`PostgresSessionStore`."""

    def __init__(
        self,
        pool: Any,
        connections: Connections,
        lock_id: int,
        session_key: str,
        where: str,
        timeout_s: float,
    ) -> None:
        self._pool = pool
        self._connections = connections
        self._guard = threading.RLock()  # one statement at a time on the lock's connection
        self.lock_id = lock_id
        self.session_key = session_key
        self.timeout_s = timeout_s
        self.name = f"pg_advisory_lock({lock_id}) on {where}"
        self._conn: Any = None
        self._held = False

    def _timeout(self) -> TurnLockTimeout:
        return TurnLockTimeout(self.session_key, self.name, self.timeout_s)

    def _failed(self, problem: str) -> SessionError:
        return SessionError(
            f"cannot take the turn lock of session {self.session_key} ({self.name}): {problem}"
        )

    def _try_fast(self) -> bool:
        """Without waiting: a free connection and a free lock. True when the lock is held."""
        with postgres_errors(self._connections.url, self._failed):
            return self._try_fast_raw()

    def _try_fast_raw(self) -> bool:
        try:
            self._conn = self._pool.getconn(timeout=FAST_CONNECTION_WAIT_S)
        except PoolTimeout:
            return False
        try:
            row = self._conn.execute("SELECT pg_try_advisory_lock(%s)", (self.lock_id,)).fetchone()
        except BaseException:
            self.release()
            raise
        self._held = bool(row and row[0])
        if self._held:
            self._connections.hold(self.session_key, self._conn, self._guard)
        return self._held

    def _wait(self, deadline: float) -> None:
        """Blocking: a connection (if the fast try had none), then the lock, both by ``deadline``."""
        with postgres_errors(self._connections.url, self._failed):
            self._wait_raw(deadline)

    def _wait_raw(self, deadline: float) -> None:
        if self._conn is None:
            try:
                self._conn = self._pool.getconn(timeout=max(0.001, deadline - time.monotonic()))
            except PoolTimeout:
                raise self._timeout() from None
        conn = self._conn
        left_ms = max(1, int((deadline - time.monotonic()) * 1000))
        try:
            conn.execute("SELECT set_config('lock_timeout', %s, false)", (f"{left_ms}ms",))
            conn.execute("SELECT pg_advisory_lock(%s)", (self.lock_id,))
            self._held = True
            conn.execute("SELECT set_config('lock_timeout', '0', false)")
            self._connections.hold(self.session_key, conn, self._guard)
        except psycopg.errors.LockNotAvailable:
            self.release()
            raise self._timeout() from None
        except BaseException:
            self.release()
            raise

    def release(self) -> None:
        """Unlock and give the connection back (closing it if the unlock failed: the server then frees
        the lock with the connection)."""
        conn, held = self._conn, self._held
        self._conn, self._held = None, False
        if conn is None:
            return
        self._connections.let_go(self.session_key, conn)
        with self._guard:  # after a statement still running on it from another thread
            try:
                if held:
                    conn.execute("SELECT pg_advisory_unlock(%s)", (self.lock_id,))
            except psycopg.Error:
                conn.close()
            finally:
                self._pool.putconn(conn)

    def __enter__(self) -> None:
        deadline = time.monotonic() + self.timeout_s
        if not self._try_fast():
            self._wait(deadline)

    def __exit__(self, *exc: object) -> None:
        self.release()

    async def __aenter__(self) -> None:
        deadline = time.monotonic() + self.timeout_s
        if self._try_fast():
            return
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()

        def settle(error: BaseException | None) -> None:
            if done.cancelled():
                return
            if error is None:
                done.set_result(None)
            else:
                done.set_exception(error)

        def wait() -> None:
            # A thread of its own, not the default executor: waits may be long and many, and must not
            # starve the runner's other work (index syncs) of executor threads.
            try:
                self._wait(deadline)
            except BaseException as exc:
                loop.call_soon_threadsafe(settle, exc)
                return
            loop.call_soon_threadsafe(settle, None)

        waiter = threading.Thread(target=wait, name=f"sessionmem turn lock {self.session_key}", daemon=True)
        waiter.start()
        try:
            await asyncio.shield(done)
        except asyncio.CancelledError:
            # Trigger: the turn was cancelled while waiting. Why: the waiting thread may still get the
            # lock, which nobody would then release. Outcome: its query is cancelled, the thread joined,
            # and whatever it took released.
            conn = self._conn
            if conn is not None:
                with contextlib.suppress(Exception):
                    conn.cancel_safe()
            await asyncio.to_thread(waiter.join)
            self.release()
            raise

    async def __aexit__(self, *exc: object) -> None:
        self.release()
