"""The SQLite index store: one file per agent, FTS5 for keywords, sqlite-vec when it loads.

Today's SQLite code behind ``store.IndexStore``: the connection (``db.py``), the schema and the FTS5
writes (``indexer.py``), keyword search (``fts_search.KeywordIndex``), the scratch-file rebuild and
the file lock ``<db>.lock`` (``rebuild.py``, ``db.process_lock``).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sessionmem.memory.store import database as db
from sessionmem.memory.store.database import VectorSupport
from sessionmem.memory.store.seam import MatrixChanges, ScrubNotes
from sessionmem.memory.store.sqlite_keywords import KeywordIndex

if TYPE_CHECKING:
    from sessionmem.memory.embed.embedder import Embedder
    from sessionmem.memory.store.seam import IndexStore

ConnectFn = Callable[[Path], tuple[Any, VectorSupport]]

_INSERT_CHUNK = (
    "INSERT INTO chunks(id, path, source, start_line, end_line, hash, model, text, embedding, date,"
    " updated_at, audience) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"
)
_INSERT_FTS = (
    "INSERT INTO chunks_fts(rowid, text, id, path, source, model, start_line, end_line)"
    " VALUES (?,?,?,?,?,?,?,?)"
)


BULK_FILES = 50  # files a sync pass writes before bulk_writes() enlarges the page cache
BULK_CACHE_KIB = 65_536  # 64 MiB: bench_search builds gained nothing more from 256 MiB
BULK_CHECKPOINT_PAGES = 10_000  # about 40 MB of WAL between checkpoints (SQLite's default: 1,000)


class SqliteStore:
    """One SQLite connection as an ``IndexStore``. ``path`` and ``connect`` (how to open another
    connection or a scratch file) are given by ``MemoryIndex``; a bare wrap of a connection (tests,
    benches) has neither."""

    kind = "sqlite"
    # No change log: a matrix large enough to matter reloads in the background while sqlite-vec answers
    logs_changes = False

    def __init__(
        self,
        conn: Any,
        vector: VectorSupport | None = None,
        *,
        path: Path | None = None,
        connect: ConnectFn | None = None,
        lock: Any = None,
    ) -> None:
        self.conn = conn
        self.vector = vector or VectorSupport(False, "sqlite3", None, "not given")
        self.errors: tuple[type[BaseException], ...] = (
            db.sqlite_module()[0].DatabaseError,
            sqlite3.DatabaseError,
        )
        self.path = path
        self._connect = connect
        self._keywords: KeywordIndex | None = None
        self._lock = lock
        self._has_fts = False  # cached once true: an index never drops its FTS table

    @property
    def where(self) -> str:
        return str(self.path) if self.path is not None else ":memory:"

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self.conn.execute(sql, params)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        self.conn.executemany(sql, rows)

    def one_of(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        return f"{column} IN ({','.join('?' * len(values))})", list(values)

    def batches(self, sql: str, params: Sequence[Any], size: int) -> Iterator[list[Any]]:
        cur = self.conn.execute(sql, params)
        while batch := cur.fetchmany(size):
            yield batch

    def close(self) -> None:
        self.conn.close()

    def atomic(self) -> contextlib.AbstractContextManager[Any]:
        return db.atomic(self.conn)

    def write_token(self) -> object:
        return db.write_token(self.conn)

    def matrix_changes(self, model: str, since: object, limit: int) -> MatrixChanges | None:
        return None

    def chunk_summary(self) -> tuple[int, frozenset[str], frozenset[str]]:
        (total,) = self.conn.execute("SELECT count(*) FROM chunks").fetchone()
        sources = frozenset(r[0] for r in self.conn.execute("SELECT DISTINCT source FROM chunks"))
        audiences = frozenset(r[0] for r in self.conn.execute("SELECT DISTINCT audience FROM chunks"))
        return int(total), sources, audiences

    @contextlib.contextmanager
    def bulk_writes(self, files: int) -> Iterator[None]:
        """Trigger: a sync pass writing at least :data:`BULK_FILES` files (a first index, a rebuild, a
        large import). Why: every chunk lands at a random place in four B-trees (the chunk id, its text
        hash, the vector table's id, the FTS index), so with SQLite's default 2 MB page cache each
        insert rereads pages, and each WAL checkpoint (every 4 MB) writes and syncs pages scattered over
        a growing file (bench_search: 3x the chunks, 4.5x the time). Outcome: for the pass, a page cache
        of :data:`BULK_CACHE_KIB` and a checkpoint every :data:`BULK_CHECKPOINT_PAGES` pages; both set
        back afterwards, so a reader's connection does not keep the memory. Durability is unchanged
        (same synchronous level, every batch still commits)."""
        if files < BULK_FILES:
            yield
            return
        ((cache,),) = self.conn.execute("PRAGMA cache_size").fetchall()
        ((checkpoint,),) = self.conn.execute("PRAGMA wal_autocheckpoint").fetchall()
        self.conn.execute(f"PRAGMA cache_size = -{BULK_CACHE_KIB}")
        self.conn.execute(f"PRAGMA wal_autocheckpoint = {BULK_CHECKPOINT_PAGES}")
        try:
            yield
        finally:
            self.conn.execute(f"PRAGMA cache_size = {int(cache)}")
            self.conn.execute(f"PRAGMA wal_autocheckpoint = {int(checkpoint)}")

    def snapshot(self) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext()

    def schema_problem(self) -> str | None:
        from sessionmem.memory.store.meta import schema_problem

        return schema_problem(self.conn)

    def apply_schema(self, tokenizer: str) -> str | None:
        from sessionmem.memory.store.meta import apply_schema

        return apply_schema(self.conn, tokenizer)

    def has_table(self, name: str) -> bool:
        row = self.conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchone()
        return row is not None

    def has_keyword_index(self) -> bool:
        if not self._has_fts:
            self._has_fts = self.has_table("chunks_fts")
        return self._has_fts

    def vec_dims(self) -> int | None:
        from sessionmem.memory.store.meta import vec_dims

        return vec_dims(self.conn)

    def insert_chunks(self, rows: Sequence[Sequence[Any]], indexed: Sequence[str] | None) -> None:
        for i, row in enumerate(rows):
            rowid = self.conn.execute(_INSERT_CHUNK, row).lastrowid
            if indexed is not None:  # the FTS row has the chunk's rowid (see indexer.py)
                cid, path, source, start, end, _, model = row[:7]
                self.conn.execute(_INSERT_FTS, (rowid, indexed[i], cid, path, source, model, start, end))

    def move_chunk(self, rowid: int, new_id: str, new_path: str) -> None:
        self.conn.execute("UPDATE chunks SET id = ?, path = ? WHERE rowid = ?", (new_id, new_path, rowid))
        if self.has_keyword_index():
            self.conn.execute(
                "UPDATE chunks_fts SET id = ?, path = ? WHERE rowid = ?", (new_id, new_path, rowid)
            )

    def delete_chunks(self, rowids: Sequence[int]) -> None:
        if self.has_keyword_index():
            self.conn.executemany("DELETE FROM chunks_fts WHERE rowid = ?", [(r,) for r in rowids])
        self.conn.executemany("DELETE FROM chunks WHERE rowid = ?", [(r,) for r in rowids])

    @contextlib.contextmanager
    def erasure(self) -> Iterator[ScrubNotes]:
        """Deletes inside zero what they free (``PRAGMA secure_delete``); then the FTS5 index is merged
        into one segment (``optimize``), the database rewritten (``VACUUM``) and the WAL checkpointed and
        truncated.

        Trigger: ``forget``. Why: a byte scan of the file found a deleted note in three places: FTS5's
        segments (a delete only adds a tombstone; the token stays in the older segment until a merge),
        pages and cells freed before, by ordinary syncs without ``secure_delete`` (a row rewritten or
        moved by a page split leaves its old bytes behind), and the ``-wal`` file (old page images).
        Outcome: none of them holds it. ``VACUUM`` costs a rewrite of the whole file (bench/README.md);
        if it fails (no room for its temporary copy), the deleted rows themselves are still zeroed and
        the failure is reported. A reader in another process that keeps the WAL busy is reported too."""
        notes = ScrubNotes()
        (before,) = self.conn.execute("PRAGMA secure_delete").fetchone()
        self.conn.execute("PRAGMA secure_delete = ON")
        try:
            yield notes
            notes.done.append("deleted rows overwritten with zeros (secure_delete)")
            if self.has_keyword_index():
                with self.atomic():
                    self.conn.execute("INSERT INTO chunks_fts(chunks_fts) VALUES('optimize')")
                notes.done.append("FTS5 index merged, its deleted tokens dropped (optimize)")
        finally:
            self.conn.execute(f"PRAGMA secure_delete = {int(before)}")
        try:
            self.conn.execute("VACUUM")
            notes.done.append("database rewritten without free pages or stale bytes (VACUUM)")
        except self.errors as exc:
            notes.issues.append(
                f"VACUUM of {self.where} failed ({exc}); its free pages may still hold older copies of rows"
            )
        (busy, _, _) = self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy:
            notes.issues.append(
                f"{self.where}-wal could not be truncated (another connection was reading the index); "
                "it keeps old page images until the next checkpoint"
            )
        else:
            notes.done.append("WAL checkpointed and truncated")

    def keywords(self) -> KeywordIndex:
        if self._keywords is None:
            self._keywords = KeywordIndex(self.conn, opener=self.opener())
        return self._keywords

    @contextlib.contextmanager
    def rebuild(self, tokenizer: str, embedder: Embedder | None) -> Iterator[tuple[IndexStore, str | None]]:
        """A scratch file ``<db>.tmp-<uuid>`` seeded with this index's vectors, copied over the live
        file in one transaction with the backup API (``rebuild.py``)."""
        from sessionmem.memory.store.rebuild import scratch_index, seed_cache, swap_in

        assert self.path is not None and self._connect is not None, "a bare SqliteStore cannot rebuild"
        with scratch_index(self.path, self._connect) as conn:
            scratch = SqliteStore(conn, self.vector, path=self.path, connect=self._connect, lock=self._lock)
            fts_error = scratch.apply_schema(tokenizer)
            seed_cache(conn, self.path, embedder)
            yield scratch, fts_error
            swap_in(conn, self.conn)

    def sync_lock(self) -> Any:
        """The file lock ``<db>.lock`` (flock: released by the kernel when its holder dies)."""
        if self._lock is None:
            assert self.path is not None, "a bare SqliteStore has no sync lock"
            self._lock = db.process_lock(str(self.path) + ".lock")
        return self._lock

    def opener(self) -> Callable[[], IndexStore] | None:
        path = self.path or _database_file(self.conn)
        if path is None:
            return None
        connect = self._connect
        if connect is None:  # a bare store: a plain connection (background matrix loads need no vec0)
            return lambda: SqliteStore(db.connect(path, load_vector=False)[0], path=path)
        return lambda: SqliteStore(*connect(path), path=path, connect=connect, lock=self._lock)


def _database_file(conn: Any) -> Path | None:
    """The main database's file, or None for an in-memory or temporary database."""
    for row in conn.execute("PRAGMA database_list").fetchall():
        if row[1] == "main":
            return Path(row[2]) if row[2] else None
    return None


def as_store(conn: Any) -> IndexStore:
    """``conn`` itself when it is a store; a plain SQLite connection (tests, benches) wrapped as a
    ``SqliteStore``."""
    if hasattr(conn, "keywords"):
        return conn
    return SqliteStore(conn)
