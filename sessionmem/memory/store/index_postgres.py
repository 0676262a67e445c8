"""The PostgreSQL index store: gateway hosts on several machines share one agent's index.

``memorySearch.store.path`` set to a ``postgresql://`` DSN selects it (``{agentId}`` is replaced in it;
the optional query parameter ``schema``, default ``memory_{agentId}``, names the agent's schema and is
not passed to the server). One schema per agent holds the tables of ``schema.PG_TABLES``.

- Keywords: each chunk's ``ftstext.fts_text`` is cut into tokens by SQLite's own FTS5 tokenizer
  (``fts_tokens``), stored as a tsvector with a GIN index. A query's phrases become a tsquery of the
  same tokens (``<->`` inside a phrase, ``|`` between them), and the matches are ranked with FTS5's
  BM25 (k1 1.2, b 0.75, the same IDF and document lengths; ``pg_keywords.py``). Each token's count
  of chunks (the IDF's input) is kept in ``chunks_fts_df`` by every write, so a search reads it
  instead of counting matches. From 50k chunks the postings of the words held by 0.2% of the chunks are
  held in memory and kept current from the change log (``postgres_keywords``, ``keyword_postings``).
  Both stores find and rank the same chunks: on LoCoMo
  (``bench/bench_recall.py --store``) every figure is SQLite's.
  PostgreSQL's own ``ts_rank_cd`` ranked worse there (keyword-only R@6 / MRR 0.875 / 0.715 with
  normalization 0, 0.876 / 0.720 with 1, 0.823 / 0.649 with 2, against BM25's 0.914 / 0.801).
- Vectors: float32 blobs in ``bytea``; the in-process matrix (``vectors.py``) serves them. The server
  has no pgvector here, so there is no pgvector path (it could not be tested).
- One host syncs at a time: the sync holds a session advisory lock keyed by the schema; a second
  syncer logs that it waits, then waits (a crashed holder's lock goes with its connection). Searches
  take no lock: each reads one committed state (``snapshot``, MVCC) while a sync writes.
- A rebuild is one transaction on the live schema (old vectors kept in the cache first): every reader
  sees the old index until it commits, and a failed rebuild rolls back to it.
- The write token a loaded matrix checks is a counter in ``meta`` that every write transaction bumps,
  so a matrix on one host sees a sync committed on another; it then reads only the chunks that write
  changed, from a log triggers keep (``pg_changes``), not every vector again.
- A connection the server ended (a restart, a failover, an idle timeout, ``pg_terminate_backend``) is
  replaced by :meth:`PgStore.recover`, which the index calls when a call fails with it, then runs the
  call once more; a statement's own error is never retried.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from sessionmem.dsn import PgTarget, postgres_errors
from sessionmem.errors import MemoryIndexError
from sessionmem.memory.store import pg_changes, pg_versions
from sessionmem.memory.store.database import VectorSupport
from sessionmem.memory.store.fts_tokens import (
    Tokenizer,
    tsvector_literal,
)
from sessionmem.memory.store.schema import CHUNK_COLUMNS, PG_TABLE_NAMES, PG_TABLES, SCHEMA_VERSION
from sessionmem.memory.store.seam import KeywordChanges, MatrixChanges, ScrubNotes

if TYPE_CHECKING:
    from sessionmem.memory.embed.embedder import Embedder
    from sessionmem.memory.store.seam import IndexStore, KeywordSearch

log = logging.getLogger(__name__)

SCHEMA_VERSION_KEY = "schema_version"
GENERATION_KEY = "write_generation"
_LOCK_PREFIX = "sessionmem.memory:"
# Trigger: the planner, with no statistics yet (autovacuum off, or not yet run) or few, guessed that a
# search's keyword statement matched thousands of rows and ran it with parallel workers. Why: a search
# ranks a few hundred chunks; starting two workers cost 20 ms on a loaded 2-core host (a statement of
# 4 ms took 25), and JIT compilation (above jit_above_cost) would cost more than the statement.
# Outcome: the index's connections plan without either; nothing they run needs them (a matrix load
# reads through a cursor, which never runs in parallel).
SESSION_SETTINGS = {"max_parallel_workers_per_gather": "0", "jit": "off"}
_BEGIN_SNAPSHOT = (
    f"BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SELECT value FROM meta WHERE key = '{GENERATION_KEY}'"
)
_NO_PGVECTOR = "vectors in PostgreSQL bytea rows, served by the in-process matrix (no pgvector path)"


@functools.lru_cache(maxsize=512)
def _pg_sql(sql: str) -> str:
    """The engine's portable SQL (``?`` parameters) in psycopg's form (``%s``; a literal % doubled)."""
    return sql.replace("%", "%%").replace("?", "%s")


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError as exc:
        raise MemoryIndexError(
            "memorySearch.store.path is a PostgreSQL DSN but psycopg is not installed: "
            "pip install 'sessionmem[postgres]'"
        ) from exc
    return psycopg


class AdvisoryLock:
    """A reentrant session advisory lock on one connection, shared by the threads of this process.
    The server frees it with its connection: entered again after a reconnect, it is taken anew."""

    def __init__(self, store: PgStore) -> None:
        self._store = store
        self._thread_lock = threading.RLock()
        self._depth = 0
        self._held_on: Any = None  # the connection holding the lock

    def __enter__(self) -> AdvisoryLock:
        self._thread_lock.acquire()
        try:
            if self._depth == 0 or self._held_on is not self._store.conn:
                self._store.lock_sync()
                self._held_on = self._store.conn
        except BaseException:
            self._thread_lock.release()
            raise
        self._depth += 1
        return self

    def enter_if_unheld(self) -> bool:
        """Hold the thread lock without taking the server's lock, only when no sync of this process
        holds it (nor waits); False at once otherwise. :meth:`leave_unheld` ends it."""
        if not self._thread_lock.acquire(blocking=False):
            return False
        if self._depth:
            self._thread_lock.release()
            return False
        return True

    def leave_unheld(self) -> None:
        self._thread_lock.release()

    def __exit__(self, *exc: object) -> None:
        self._depth -= 1
        try:
            if self._depth == 0:
                held_on, self._held_on = self._held_on, None
                if held_on is self._store.conn and not held_on.closed:  # else it went with its connection
                    self._store.unlock_sync()
        finally:
            self._thread_lock.release()


class _CurrentConnection:
    """The store's connection as it is now (a reconnect replaces it): what its keyword index runs on."""

    def __init__(self, store: PgStore) -> None:
        self._store = store

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        return self._store.conn.execute(*args, **kwargs)


def connection_lost(error: BaseException) -> bool:
    """True when ``error``, or one behind it, is psycopg's ``OperationalError`` (the class of a lost
    connection; a statement's own errors are other classes, or leave the connection open)."""
    psycopg = _psycopg()
    seen: set[int] = set()
    link: BaseException | None = error
    while link is not None and id(link) not in seen:
        if isinstance(link, psycopg.OperationalError):
            return True
        seen.add(id(link))
        link = link.__cause__ or link.__context__
    return False


def _open_connection(target: PgTarget, *, create: bool = False) -> Any:
    """A connection (autocommit) whose ``search_path`` is the agent's schema (``create``: made if missing)."""
    psycopg = _psycopg()
    from psycopg import sql

    def unusable(problem: str) -> MemoryIndexError:
        return MemoryIndexError(f"cannot connect to the memory index at {target.display}: {problem}")

    with postgres_errors(target.url, unusable):
        conn = psycopg.connect(target.conninfo, autocommit=True)
        schema = sql.Identifier(target.schema)
        try:
            if create:
                with contextlib.suppress(psycopg.errors.UniqueViolation):  # created by another host now
                    conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(schema))
            conn.execute(sql.SQL("SET search_path TO {}").format(schema))
            for name, value in SESSION_SETTINGS.items():
                conn.execute(sql.SQL("SET {} TO {}").format(sql.Identifier(name), sql.Literal(value)))
        except BaseException:
            conn.close()
            raise
    return conn


class PgStore:
    """One psycopg connection (autocommit; ``atomic`` opens transactions) to one agent's schema."""

    kind = "postgresql"
    logs_changes = True  # pg_changes

    def __init__(self, conn: Any, target: PgTarget, tokenizer: str) -> None:
        self.conn = conn
        self.target = target
        self.errors: tuple[type[BaseException], ...] = (_psycopg().Error,)
        self.vector = VectorSupport(False, "postgresql", None, _NO_PGVECTOR)
        self._tokenizer_spec = tokenizer
        self._tokenizer: Tokenizer | None = None
        self._keywords: Any = None  # pg_keywords.PgKeywordIndex, made on the first search
        self._lock = AdvisoryLock(self)
        self._snapshot_lock = threading.RLock()
        self._in_snapshot = False  # a read-only snapshot is open (``snapshot``)
        self._snapshot_token: object = None
        self._holds_version = False  # this connection says its schema version has the index open

    @classmethod
    def connect(cls, target: PgTarget, tokenizer: str, *, create: bool = False) -> PgStore:
        """Connect and point ``search_path`` at the agent's schema (``create``: create it if missing)."""
        return cls(_open_connection(target, create=create), target, tokenizer)

    def recover(self, error: BaseException) -> bool:
        """After ``error`` from a call on this store: when it says the connection was lost (and the
        connection is indeed broken), replace the connection and return True (the caller runs the call
        once more); any other error, a statement's own, returns False and leaves the connection as it is.
        A failed reconnect raises ``MemoryIndexError`` (without the password)."""
        if not connection_lost(error) or not (self.conn.closed or self.conn.broken):
            return False
        with self._snapshot_lock:
            fresh = _open_connection(self.target)
            if self._holds_version:  # the server freed it with the lost connection
                pg_versions.hold(fresh, self.target.schema, SCHEMA_VERSION)
            old, self.conn = self.conn, fresh
            self._in_snapshot, self._snapshot_token = False, None
        with contextlib.suppress(_psycopg().Error):
            old.close()
        reason = self.target.url.scrub(str(error).strip().splitlines()[0] if str(error).strip() else "")
        log.warning("memory index %s: the server ended the connection (%s); reconnected", self.where, reason)
        return True

    def replace_if_lost(self) -> bool:
        """When the server ended this connection while it was idle (another of the index's connections
        found the server ending them), replace it now: probe it with ``SELECT 1``, unless a sync or a
        search of this process is using it. Whether it was replaced."""
        if not self._lock.enter_if_unheld():
            return False
        try:
            with self._snapshot_lock:
                if self._in_snapshot:
                    return False
                try:
                    self.conn.execute("SELECT 1")
                except _psycopg().OperationalError as exc:
                    return self.recover(exc)
                return False
        finally:
            self._lock.leave_unheld()

    @property
    def where(self) -> str:
        return self.target.display

    @property
    def tokenizer(self) -> Tokenizer:
        if self._tokenizer is None:
            self._tokenizer = Tokenizer(self._tokenizer_spec)
        return self._tokenizer

    # -- row SQL --------------------------------------------------------------------------------

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        # Another thread's snapshot (a search) ends first: a background check of this process (the
        # transcripts' delta check, status) neither reads inside it nor drives the connection beside it.
        with self._snapshot_lock:
            if not params:
                return self.conn.execute(sql)
            return self.conn.execute(_pg_sql(sql), tuple(params))

    def one_of(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        # Why: an IN list's text changes with its count, so psycopg parsed each one afresh (300 ids:
        # 3.5 ms, most of it splitting the statement's text) and the server never kept a plan. One array
        # parameter gives one text, prepared after a few uses (``prepare_threshold``).
        return f"{column} = ANY(?)", [list(values)]

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        rows = list(rows)
        if rows:
            with self._snapshot_lock, self.conn.cursor() as cur:
                cur.executemany(_pg_sql(sql), rows)

    def batches(self, sql: str, params: Sequence[Any], size: int) -> Iterator[list[Any]]:
        """A server-side cursor, in the search's snapshot (or a read-only transaction of its own)."""
        with self.snapshot(), self.conn.cursor(name=f"batches_{id(self)}") as cur:
            cur.execute(_pg_sql(sql) if params else sql, tuple(params) or None)
            while batch := cur.fetchmany(size):
                yield batch

    def close(self) -> None:
        if self._tokenizer is not None:
            self._tokenizer.close()
        self.conn.close()

    # -- transactions ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def atomic(self) -> Iterator[PgStore]:
        from psycopg.pq import TransactionStatus

        outer = self.conn.info.transaction_status == TransactionStatus.IDLE
        with self.conn.transaction():
            yield self
            if outer:  # every committed write moves the token every host's matrix checks
                row = self.conn.execute(
                    "UPDATE meta SET value = (value::bigint + 1)::text WHERE key = %s RETURNING value",
                    (GENERATION_KEY,),
                ).fetchone()
                if row is not None:
                    pg_changes.trim(self.conn, int(row[0]))

    def bulk_writes(self, files: int) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext()  # the server sizes its own buffers

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[PgStore]:
        """One REPEATABLE READ, READ ONLY transaction: a search straddling another host's commit reads
        the rows its keyword ranks named (a rebuild gives every chunk a new rowid). Searches through
        this connection take turns, and so do the statements of other threads (``execute``)."""
        from psycopg.pq import TransactionStatus

        with self._snapshot_lock:
            if self.conn.info.transaction_status != TransactionStatus.IDLE:
                yield self
                return
            # the write token with the BEGIN, in one round trip: every search asks for it first
            cur = self.conn.execute(_BEGIN_SNAPSHOT)
            cur.nextset()
            row = cur.fetchone()
            self._in_snapshot = True
            self._snapshot_token = row[0] if row is not None else None
            try:
                yield self
            finally:
                self._in_snapshot, self._snapshot_token = False, None
                self.conn.execute("ROLLBACK")

    def write_token(self) -> object:
        """The write counter; read once per snapshot (a search asks for it several times)."""
        if self._in_snapshot and self._snapshot_token is not None:
            return self._snapshot_token
        row = self.conn.execute("SELECT value FROM meta WHERE key = %s", (GENERATION_KEY,)).fetchone()
        token = row[0] if row is not None else None
        if self._in_snapshot:
            self._snapshot_token = token
        return token

    def matrix_changes(self, model: str, since: object, limit: int) -> MatrixChanges | None:
        return pg_changes.read_changes(self.conn, model, since, limit)

    def keyword_changes(self, since: object, limit: int) -> KeywordChanges | None:
        """The keyword rows changed since write token ``since`` (``pg_changes.read_keyword_changes``)."""
        return pg_changes.read_keyword_changes(self.conn, GENERATION_KEY, since, limit)

    def chunk_summary(self) -> tuple[int, frozenset[str], frozenset[str]]:
        return pg_changes.chunk_summary(self.conn)

    # -- schema ---------------------------------------------------------------------------------

    def _tables(self) -> set[str]:
        rows = self.conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (self.target.schema,)
        ).fetchall()
        return {r[0] for r in rows}

    def stored_version(self) -> str:
        """The schema version the index was built by ('none' when its meta table has none)."""
        row = self.conn.execute("SELECT value FROM meta WHERE key = %s", (SCHEMA_VERSION_KEY,)).fetchone()
        return str(row[0]) if row is not None else "none"

    def schema_problem(self) -> str | None:
        tables = self._tables()
        if not tables:
            return None
        if "meta" not in tables:
            return f"schema {self.target.schema} has tables but no meta table (unknown schema)"
        stored = self.stored_version()
        if stored != str(SCHEMA_VERSION):
            return f"index schema version {stored} differs from {SCHEMA_VERSION}"
        return None

    def open_schema(self, tokenizer: str) -> tuple[str | None, str | None]:
        """Under the sync lock: make the tables, or replace those of an unusable schema version when no
        process of another version has the index open (``pg_versions``; else ``MemoryIndexError``), in one
        transaction; then say that this version has it open. (why keyword search is off, what was replaced)"""
        problem = self.schema_problem()
        if problem is not None:
            open_by = pg_versions.others(self.conn, self.target.schema, SCHEMA_VERSION)
            if open_by:
                stored = self.stored_version() if "meta" in self._tables() else "unknown"
                raise pg_versions.refusal(self.where, stored, SCHEMA_VERSION, open_by)
        with self.conn.transaction():  # readers see the old tables until the new ones are committed
            if problem is not None:
                self.discard()
            fts_error = self.apply_schema(tokenizer)
        self.hold_version()
        return fts_error, problem

    def hold_version(self) -> None:
        pg_versions.hold(self.conn, self.target.schema, SCHEMA_VERSION)
        self._holds_version = True

    def discard(self) -> None:
        """Drop the index's tables (an unusable schema version); ``apply_schema`` makes them anew."""
        from psycopg import sql

        with self.conn.transaction():
            for name in PG_TABLE_NAMES:
                self.conn.execute(sql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(sql.Identifier(name)))

    def apply_schema(self, tokenizer: str) -> str | None:
        with self.conn.transaction():
            (had_df,) = self.conn.execute("SELECT to_regclass('chunks_fts_df') IS NOT NULL").fetchone()
            for statement in PG_TABLES.split(";"):
                if statement.strip():
                    self.conn.execute(statement)
            if not had_df:  # an index made before the table: count its chunks' tokens once
                self.conn.execute(
                    "INSERT INTO chunks_fts_df(lexeme, df) SELECT u.lexeme, count(*)"
                    " FROM chunks_fts f CROSS JOIN LATERAL unnest(f.fts) u GROUP BY u.lexeme"
                )
            self.conn.execute(
                "INSERT INTO meta(key, value) VALUES (%s, %s)"
                " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (SCHEMA_VERSION_KEY, str(SCHEMA_VERSION)),
            )
            self.conn.execute(
                "INSERT INTO meta(key, value) VALUES (%s, '0') ON CONFLICT(key) DO NOTHING", (GENERATION_KEY,)
            )
            pg_changes.install(self.conn, GENERATION_KEY)
        return None

    def has_keyword_index(self) -> bool:
        return True

    def vec_dims(self) -> int | None:
        return None

    # -- chunks ---------------------------------------------------------------------------------

    def insert_chunks(self, rows: Sequence[Sequence[Any]], indexed: Sequence[str] | None) -> None:
        """The rows' rowids drawn in one statement, then one tokenizer pass and two pipelined
        ``executemany`` (chunks, and their keyword rows)."""
        if not rows:
            return
        rowids = [
            int(r[0])
            for r in self.conn.execute(
                "SELECT nextval(pg_get_serial_sequence('chunks', 'rowid')) FROM generate_series(1, %s)",
                (len(rows),),
            )
        ]
        columns = ", ".join(("rowid", *CHUNK_COLUMNS, "indexed"))
        marks = ", ".join(["%s"] * (len(CHUNK_COLUMNS) + 2))
        with self.conn.cursor() as cur:
            cur.executemany(
                f"INSERT INTO chunks({columns}) VALUES ({marks})",
                [
                    (rowid, *row, indexed[i] if indexed is not None else None)
                    for i, (rowid, row) in enumerate(zip(rowids, rows, strict=True))
                ],
            )
            if indexed is not None:
                tokens = self.tokenizer.tokens(list(indexed))
                cur.executemany(
                    "INSERT INTO chunks_fts(rowid, fts, fts_len) VALUES (%s, %s::tsvector, %s)",
                    [(rowid, tsvector_literal(t), len(t)) for rowid, t in zip(rowids, tokens, strict=True)],
                )
                df = Counter(token for t in tokens for token in set(t))
                cur.execute(
                    "INSERT INTO chunks_fts_df(lexeme, df) SELECT * FROM unnest(%s::text[], %s::int[])"
                    " ON CONFLICT (lexeme) DO UPDATE SET df = chunks_fts_df.df + excluded.df",
                    (list(df), list(df.values())),
                )

    def move_chunk(self, rowid: int, new_id: str, new_path: str) -> None:
        self.conn.execute("UPDATE chunks SET id = %s, path = %s WHERE rowid = %s", (new_id, new_path, rowid))

    def delete_chunks(self, rowids: Sequence[int]) -> None:
        """The chunks, their keyword rows, and each of their tokens' counts; a token no chunk holds any
        more leaves ``chunks_fts_df`` (a row with count 0 would keep a deleted note's words readable)."""
        emptied = self.conn.execute(
            "WITH x AS (SELECT u.lexeme, count(*) AS n FROM chunks_fts f CROSS JOIN LATERAL unnest(f.fts) u"
            " WHERE f.rowid = ANY(%s) GROUP BY u.lexeme), counted AS (UPDATE chunks_fts_df d"
            " SET df = d.df - x.n FROM x WHERE d.lexeme = x.lexeme RETURNING d.lexeme, d.df)"
            " SELECT lexeme FROM counted WHERE df <= 0",
            (list(rowids),),
        ).fetchall()
        if emptied:
            self.conn.execute("DELETE FROM chunks_fts_df WHERE lexeme = ANY(%s)", ([r[0] for r in emptied],))
        self.conn.execute("DELETE FROM chunks_fts WHERE rowid = ANY(%s)", (list(rowids),))
        self.conn.execute("DELETE FROM chunks WHERE rowid = ANY(%s)", (list(rowids),))

    @contextlib.contextmanager
    def erasure(self) -> Iterator[ScrubNotes]:
        """Deletes inside, then: the token counts no chunk needs any more (left by indexes written before
        :meth:`delete_chunks` removed them) deleted, the change log emptied (it names the deleted chunks:
        every host's matrix loads every row once instead), and the index's tables vacuumed, so their dead rows
        are pruned. PostgreSQL does not zero the space it frees: the bytes stay in its data files (and its
        WAL and backups) until reused; ``VACUUM FULL`` rewrites a table (README, Privacy)."""
        notes = ScrubNotes()
        yield notes
        with self.atomic():
            self.conn.execute("DELETE FROM chunks_fts_df WHERE df <= 0")
            self.conn.execute("DELETE FROM chunk_counts WHERE n <= 0")  # no label of a forgotten audience
            pg_changes.reset(self.conn)
        from psycopg import sql

        try:
            tables = sql.SQL(", ").join(sql.Identifier(name) for name in PG_TABLE_NAMES)
            self.conn.execute(sql.SQL("VACUUM {}").format(tables))
            notes.done.append("the index's tables vacuumed (dead rows pruned)")
        except _psycopg().Error as exc:
            notes.issues.append(f"VACUUM of the index's tables failed ({exc}); autovacuum will prune them")

    def keywords(self) -> KeywordSearch:
        if self._keywords is None:
            from sessionmem.memory.store.postgres_keywords import PgKeywordIndex

            self._keywords = PgKeywordIndex(
                _CurrentConnection(self),
                self.tokenizer,
                token=self.write_token,
                changes=self.keyword_changes,
                opener=self.opener(),
            )
        return self._keywords

    # -- rebuild, lock, second connection -------------------------------------------------------

    @contextlib.contextmanager
    def rebuild(self, tokenizer: str, embedder: Embedder | None) -> Iterator[tuple[IndexStore, str | None]]:
        """Empty the index and build it again inside one transaction (readers see the old one until it
        commits); the old chunks' vectors go to the embedding cache first, as ``rebuild.seed_cache`` does."""
        from sessionmem.memory.store.meta import read_meta

        with self.atomic():
            self.apply_schema(tokenizer)
            pg_changes.unlogged(self.conn)  # readers load the new index whole: reset() below
            old = read_meta(self)
            if (
                embedder is not None
                and old is not None
                and (old.get("provider"), old.get("model"), old.get("providerKey"))
                == (embedder.provider, embedder.model, embedder.provider_key)
            ):
                self.conn.execute(
                    "INSERT INTO embedding_cache"
                    "(provider, model, provider_key, hash, embedding, dims, updated_at)"
                    " SELECT %s, %s, %s, hash, embedding, length(embedding) / 4, updated_at FROM chunks"
                    " WHERE model = %s AND embedding IS NOT NULL ON CONFLICT DO NOTHING",
                    (embedder.provider, embedder.model, embedder.provider_key, embedder.model),
                )
            self.conn.execute("DELETE FROM chunks_fts")
            self.conn.execute("DELETE FROM chunks_fts_df")
            self.conn.execute("DELETE FROM chunks")
            self.conn.execute("DELETE FROM files")
            self.conn.execute(
                "DELETE FROM meta WHERE key NOT IN (%s, %s, %s)",
                (SCHEMA_VERSION_KEY, GENERATION_KEY, pg_changes.CHANGES_FROM_KEY),
            )
            yield self, None
            pg_changes.reset(self.conn)

    def sync_lock(self) -> AdvisoryLock:
        return self._lock

    def lock_sync(self) -> None:
        key = _LOCK_PREFIX + self.target.schema
        (got,) = self.conn.execute("SELECT pg_try_advisory_lock(hashtext(%s))", (key,)).fetchone()
        if not got:
            log.info("memory index %s: another host or process is syncing it; waiting for it", self.where)
            self.conn.execute("SELECT pg_advisory_lock(hashtext(%s))", (key,))

    def unlock_sync(self) -> None:
        self.conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (_LOCK_PREFIX + self.target.schema,))

    def opener(self) -> Callable[[], IndexStore]:
        return lambda: PgStore.connect(self.target, self._tokenizer_spec)
