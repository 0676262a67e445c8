"""What the memory engine needs of its database: the index-store seam (the index's side of DESIGN 17).

Two stores implement :class:`IndexStore`: ``sqlite_store.SqliteStore`` (one file per agent, the
default) and ``pg_store.PgStore`` (one PostgreSQL schema per agent, shared by gateway hosts on
several machines). ``memorySearch.store.path`` chooses: a ``postgresql://`` DSN means PostgreSQL.

The engine speaks to a store in two ways:

- Row SQL both databases run as written (``execute``/``executemany``): ``?`` parameters, ``INSERT ...
  ON CONFLICT``, ``RETURNING``, and a ``rowid`` column on ``chunks`` and ``embedding_cache`` (SQLite's
  own; an identity column in PostgreSQL). The tables ``files``, ``chunks``, ``embedding_cache`` and
  ``meta`` have the same columns in both (``schema.py``).
- Named operations for what differs: transactions, the write token a cached matrix checks, the schema,
  keyword indexing and search (FTS5 in SQLite; a tsvector of the same FTS5 tokens with a GIN index in
  PostgreSQL), the sqlite-vec table, the rebuild (a scratch file swapped in, or one PostgreSQL
  transaction), the sync lock (a file lock, or an advisory lock), and a second connection for
  background matrix loads.

Vectors are float32 blobs in ``chunks.embedding`` in both; the in-process matrix (``vectors.py``)
serves them. The Markdown workspace is the truth; a store is derived and can always be rebuilt.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from sessionmem.memory.embed.embedder import Embedder
    from sessionmem.memory.store.database import VectorSupport
    from sessionmem.memory.store.fts_tokens import Tokenizer


def database_errors() -> tuple[type[BaseException], ...]:
    """The base exceptions of the stores' drivers (SQLite, either build; psycopg once loaded): an error
    of one of these is the index store's, never an embedding provider's."""
    import sqlite3
    import sys

    from sessionmem.memory.store.database import sqlite_module

    found: set[type[BaseException]] = {sqlite3.Error, sqlite_module()[0].Error}
    psycopg = sys.modules.get("psycopg")
    if psycopg is not None:
        found.add(psycopg.Error)
    return tuple(found)


@dataclass(slots=True)
class ScrubNotes:
    """What :meth:`IndexStore.erasure` did so that deleted rows cannot be read back (``done``), and
    what it could not do (``issues``), for the report of ``forget``."""

    done: list[str] = field(default_factory=list)
    issues: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class KeywordFilters:
    """What a keyword search leaves out: another model's rows (``model`` set), sources, dates, audiences.
    Empty or None: no filter of that kind."""

    model: str | None = None
    sources: Sequence[str] = ()
    dates: tuple[str, str] | None = None  # inclusive YYYY-MM-DD bounds; undated rows out
    audiences: Sequence[str] | None = None


@dataclass(frozen=True, slots=True)
class MatrixChanges:
    """What a store's change log says was written since a write token: every chunk id inserted,
    updated or deleted (``ids``), and the rows of those that now hold a vector of the model (``rows``:
    id, source, embedding, date, audience)."""

    ids: list[str]
    rows: list[Sequence[Any]]


@dataclass(frozen=True, slots=True)
class KeywordRow:
    """A chunk's keyword row as the keyword matrix keeps it (``keyword_postings``): its rowid and chunk id,
    its length in tokens (BM25's), the columns the keyword filters read, and each of its tokens' count."""

    id: str
    rowid: int
    length: int
    model: str
    source: str
    audience: str
    date: str | None
    words: dict[str, int]


@dataclass(frozen=True, slots=True)
class KeywordChanges:
    """What a store's change log says was written since a keyword matrix's write token: the token it
    was read at, the keyword table's row count and total length then, every chunk id inserted, updated or
    deleted (``ids``), and the keyword rows of those that have one now (``rows``)."""

    token: object
    total_rows: int
    total_length: int
    ids: list[str]
    rows: list[KeywordRow]


class KeywordSearch(Protocol):
    """Keyword reads for one query at a time; ``forget()`` after every index write."""

    def forget(self) -> None: ...

    def warm(self) -> None:
        """Load what a large index keeps in memory for keyword search now (SQLite: the keyword matrix)."""
        ...

    def search(self, phrases: Sequence[str], filters: KeywordFilters, limit: int) -> dict[int, float]:
        """{rowid: BM25 rank (negative, lower is better)} of the best ``limit`` chunks holding any
        phrase (quoted FTS5 phrases from ``keywords.fts_phrases``), best first."""
        ...

    def texts(self, rowids: Iterable[int]) -> dict[int, str]:
        """The indexed text (``ftstext.fts_text`` of context and lines) of each row."""
        ...

    def ideal(self, phrases: Sequence[str], total_rows: int) -> float:
        """The BM25 of an average-length chunk holding each phrase once (the sum of their IDFs)."""
        ...

    def holders(self, phrases: Sequence[str]) -> dict[str, list[int]]:
        """The rowids of every chunk holding each phrase (unfiltered, in no order)."""
        ...

    def tokenizer(self) -> Tokenizer:
        """The tokenizer the index's keyword rows were made with (FTS5's, in a private database)."""
        ...

    def phrase_tokens(self, phrases: Sequence[str]) -> list[list[str]]:
        """Each phrase's tokens as the index's own tokenizer makes them (kept for the next queries)."""
        ...


class IndexStore(Protocol):
    """One agent's index database, as the engine uses it (see the module docstring)."""

    kind: str  # "sqlite" or "postgresql"
    vector: VectorSupport  # how vectors are served besides the matrix (sqlite-vec or not)
    errors: tuple[type[BaseException], ...]  # what the driver raises for a database problem

    @property
    def where(self) -> str:
        """Where the index is, for status (a file path, or a DSN without its password and the schema)."""
        ...

    # -- row SQL both databases run -----------------------------------------------------------
    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any: ...

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None: ...

    def one_of(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """The condition "``column`` is one of ``values``" and its parameters, in the form the database
        plans best (SQLite: ``IN (?, ...)``; PostgreSQL: ``= ANY(?)`` with one array, a statement text
        that does not change with the count)."""
        ...

    def batches(self, sql: str, params: Sequence[Any], size: int) -> Iterator[list[Any]]:
        """The rows of ``sql`` ``size`` at a time, never all in memory at once (vector loads and scans)."""
        ...

    def close(self) -> None: ...

    # -- transactions and change detection -----------------------------------------------------
    def atomic(self) -> AbstractContextManager[Any]:
        """A write transaction (a savepoint when nested); rolled back on error."""
        ...

    def write_token(self) -> object:
        """Changes whenever any connection (any host) commits a write to the index."""
        ...

    logs_changes: bool  # whether ``matrix_changes`` can answer (PostgreSQL's change log)

    def chunk_summary(self) -> tuple[int, frozenset[str], frozenset[str]]:
        """(how many chunks, their sources, their audiences): read by a search after every write."""
        ...

    def matrix_changes(self, model: str, since: object, limit: int) -> MatrixChanges | None:
        """The chunks written since write token ``since`` (read in the current snapshot), or None when
        the store cannot say (no log, a log trimmed past ``since``, or more than ``limit`` changes):
        then a matrix reloads every row."""
        ...

    def bulk_writes(self, files: int) -> AbstractContextManager[Any]:
        """Around a sync pass that writes ``files`` files: room for its writes (SQLite: a larger page
        cache and fewer checkpoints while many files are written); nothing for a few."""
        ...

    def snapshot(self) -> AbstractContextManager[Any]:
        """The reads inside see one state of the index (one search: its keyword ranks and the rows they
        name). SQLite: each statement its own, as before; PostgreSQL: one read-only transaction."""
        ...

    # -- schema ---------------------------------------------------------------------------------
    def schema_problem(self) -> str | None:
        """Why the stored schema cannot be used as it is (another version or shape), or None."""
        ...

    def apply_schema(self, tokenizer: str) -> str | None:
        """Create what is missing (idempotent); returns why keyword search is unavailable, or None."""
        ...

    def has_keyword_index(self) -> bool: ...

    def vec_dims(self) -> int | None:
        """The width of the sqlite-vec table's vectors, or None (no table; always None in PostgreSQL)."""
        ...

    # -- chunks and their keyword rows ---------------------------------------------------------
    def insert_chunks(self, rows: Sequence[Sequence[Any]], indexed: Sequence[str] | None) -> None:
        """Insert ``chunks`` rows (the columns of ``schema.CHUNK_COLUMNS``), in order, and, when ``indexed``
        (each row's ``fts_text``) is given, their keyword rows."""
        ...

    def move_chunk(self, rowid: int, new_id: str, new_path: str) -> None:
        """Give a chunk another id and path (a renamed transcript), its keyword row too."""
        ...

    def delete_chunks(self, rowids: Sequence[int]) -> None:
        """Delete chunks and their keyword rows (not their sqlite-vec rows: the indexer does those)."""
        ...

    def keywords(self) -> KeywordSearch: ...

    def erasure(self) -> AbstractContextManager[ScrubNotes]:
        """Around deletes that must leave no readable copy (``forget``): once the block ends without an
        error, the deleted rows are gone from the database's pages, its keyword index and its log as far
        as the store can reach (SQLite: ``secure_delete``, the FTS5 index merged, the WAL truncated;
        PostgreSQL: the tables vacuumed). Yields the notes it fills in."""
        ...

    # -- rebuild, sync lock, second connection -------------------------------------------------
    def rebuild(
        self, tokenizer: str, embedder: Embedder | None
    ) -> AbstractContextManager[tuple[IndexStore, str | None]]:
        """A store to build a fresh index in (with the old index's vectors in its embedding cache) and
        the keyword-index error; on a clean exit it replaces this index for every reader at once, on an
        error this index is left as it was."""
        ...

    def sync_lock(self) -> AbstractContextManager[Any]:
        """Held by the one syncing writer across processes and hosts; reentrant."""
        ...

    def opener(self) -> Callable[[], IndexStore] | None:
        """Opens another connection to this index (for background matrix loads); None when there is
        none to open (an in-memory database)."""
        ...
