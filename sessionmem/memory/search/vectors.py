"""Three ways to find the nearest chunks to a query vector, behind one ``knn`` interface.

DESIGN decision 9: sqlite-vec stays the store and one path, but its KNN costs ~75-100 ms at 100k
chunks of 384 dimensions on a 2-core machine, while one matrix-vector product over a contiguous
float32 matrix costs ~9 ms. So:

- ``MatrixVectors``: every embedding of the model loaded once into one numpy matrix (100k x 384
  float32 is ~150 MB), scored with one product and ``argpartition``. Valid only while nothing was
  written since it loaded: it records SQLite's ``data_version`` (bumped by other connections'
  commits) and this connection's ``total_changes``, and ``invalidate()`` marks it stale at once.
- ``SqliteVecVectors``: the vec0 KNN (``WHERE embedding MATCH ? AND k = ?``), distance -> 1 - d.
- ``BruteForceVectors``: streams ``chunks.embedding`` blobs in batches; needs no extension.

``choose_vector_path`` picks the fastest valid path and says why (for ``status --deep``).
All paths return ``[(chunk_id, cosine)]`` best first; vectors are L2-normalised, so cosine is a dot.
"""

from __future__ import annotations

import dataclasses
import heapq
import logging
import threading
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from sessionmem.memory.search.matrix_rows import BATCH_ROWS, Loaded, MatrixState, read_matrix
from sessionmem.memory.search.records import VectorPath
from sessionmem.memory.search.sign_codes import COARSE_MIN_ROWS, candidate_count
from sessionmem.memory.store.database import VectorSupport
from sessionmem.memory.store.index_sqlite import as_store

log = logging.getLogger(__name__)

VEC0_MAX_K = 4096  # sqlite-vec's limit on k
# Up to this many chunks the matrix loads in the query: ~1 ms at 384 dims, about one sqlite-vec KNN
# (measured: 500 rows 1.0 ms vs 0.56 ms; 2k 7.2 vs 1.3; 20k 91 vs 14). A larger index never makes a
# query wait for the load: sqlite-vec answers and the matrix loads in the background.
SYNC_RELOAD_ROWS = 500
# How long a background load holds back after the query that asked for it, unless another query (or
# ``wait_for_reload``) asks sooner: a one-shot process answers and exits in that time, without reading.
LOAD_HOLD_S = 1.0
# A stale matrix reads the rows changed since it loaded when there are at most this many, or an eighth
# of its rows; more, and it loads every row (one pass reads faster than as many rows looked up by id).
CHANGES_AT_LEAST = 1024

Hits = list[tuple[str, float]]
DateRange = tuple[str, str] | None  # inclusive (after, before) as YYYY-MM-DD; undated rows excluded
Audiences = Sequence[str] | None  # the audience labels a reader may see (sessionmem.privacy); None: all


class VectorIndex(Protocol):
    name: str

    def knn(
        self,
        query_vec: np.ndarray,
        k: int,
        *,
        model: str,
        sources: Sequence[str],
        dates: DateRange = None,
        audiences: Audiences = None,
    ) -> Hits: ...


def _normalise(query_vec: np.ndarray) -> np.ndarray:
    q = np.asarray(query_vec, dtype=np.float32).reshape(-1)
    norm = float(np.linalg.norm(q))
    return q / norm if norm > 0 and np.isfinite(norm) else q


def _top_k(ids: Sequence[str], scores: np.ndarray, k: int) -> Hits:
    """Best ``k`` of ``scores`` (non-finite dropped), descending, ties by id for stable output."""
    if k <= 0 or scores.size == 0:
        return []
    finite = np.isfinite(scores)
    if not finite.all():
        scores = np.where(finite, scores, -np.inf)
    k = min(k, scores.size)
    idx = np.argpartition(-scores, k - 1)[:k] if k < scores.size else np.arange(scores.size)
    out = [(ids[i], float(scores[i])) for i in idx.tolist() if np.isfinite(scores[i])]
    out.sort(key=lambda hit: (-hit[1], hit[0]))
    return out


def dot_rows(matrix: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``matrix @ q`` computed by numpy's own single-threaded loop, not BLAS.

    Trigger: a 100k x 384 product through a multi-threaded OpenBLAS.
    Why: OpenBLAS's worker threads keep spinning after the call; on a 2-core machine they take
    the core SQLite needs next, and a 20 ms FTS5 query measured 45 ms right after the product.
    Outcome: ``einsum`` costs the same as single-threaded BLAS (~5 ms at 100k x 384) and leaves
    no threads behind.
    """
    return np.einsum("ij,j->i", matrix, q)


TAKEN_ROWS = 2048  # rows gathered at a time by ``dot_taken`` (3 MB at 384 dims)


def dot_taken(matrix: np.ndarray, rows: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``matrix[rows] @ q``, the rows gathered ``TAKEN_ROWS`` at a time with ``np.take``.

    Trigger: the exact rescoring of the sign-bit candidates (9,600 rows of 100k for a hybrid search).
    Why: gathering them at once copies 15 MB per query, which the allocator keeps (+32 MB peak RSS with
    two searching threads), and fancy indexing (``matrix[rows]``) is ~1 ms slower than ``np.take`` there.
    Outcome: the same scores from a few MB of copies, no slower.
    """
    out = np.empty(len(rows), dtype=np.float32)
    for start in range(0, len(rows), TAKEN_ROWS):
        part = rows[start : start + TAKEN_ROWS]
        out[start : start + len(part)] = dot_rows(np.take(matrix, part, axis=0), q)
    return out


def _placeholders(n: int) -> str:
    return ",".join("?" * n)


# ---------------------------------------------------------------------------- matrix


class MatrixVectors:
    """All embeddings of one model in one contiguous float32 matrix, with parallel id/source arrays.

    Valid only while nothing was written since the snapshot: the write token of the searching
    connection must be unchanged, and ``invalidate()`` (the index's signal) drops validity at once.
    A stale matrix of a store that logs its changes (PostgreSQL) reads only the rows written since
    (``matrix_rows``); any other reloads every row. ``rows_read`` counts the rows read either way.
    """

    name = "matrix"

    def __init__(self, conn: Any, *, coarse_min_rows: int = COARSE_MIN_ROWS) -> None:
        self._conn = as_store(conn)
        self._coarse_min_rows = coarse_min_rows  # from this many rows a query scans sign bits first
        self._state: MatrixState | None = None
        self._stale: MatrixState | None = None  # the last state, kept to apply changes to
        self._generation = 0  # bumped by invalidate(); a reload started earlier is then discarded
        self.rows_read = 0  # rows read from the index by loads and changes, for status and tests

    def write_token(self) -> object:
        return self._conn.write_token()

    @property
    def generation(self) -> int:
        return self._generation

    @property
    def rows(self) -> int:
        return self._state.rows if self._state is not None else 0

    @property
    def nbytes(self) -> int:
        return int(self._state.matrix.nbytes) if self._state is not None else 0

    def _drop(self) -> None:
        if self._state is not None and self._conn.logs_changes:
            self._stale = self._state
        self._state = None

    def invalidate(self) -> None:
        self._generation += 1
        self._drop()

    def is_valid(self, model: str) -> bool:
        """Loaded for ``model`` and nothing written to the database since."""
        state = self._state
        if state is None or state.model != model:
            return False
        if self.write_token() != state.token:
            self._drop()
            return False
        return True

    def install(
        self,
        model: str,
        token: object,
        loaded: Loaded,
        *,
        generation: int | None = None,
    ) -> bool:
        """Make ``loaded`` (from ``read_matrix``) current; refused if invalidated since ``generation``."""
        if generation is not None and generation != self._generation:
            return False
        coarse = len(loaded[0]) >= self._coarse_min_rows
        state = MatrixState.loaded(model, token, loaded, coarse=coarse)
        if self._conn.logs_changes:
            state.prepare_changes()
        self._state, self._stale = state, None
        self.rows_read += len(loaded[0])
        return True

    def load(self, model: str) -> None:
        """(Re)load every row now, through the searching connection."""
        token = self.write_token()
        self.install(model, token, read_matrix(self._conn, model))

    def refresh(self, model: str) -> None:
        """Make the matrix current: apply the rows changed since the stale state when the store logs
        them and they are few, else load every row."""
        stale = self._stale
        if stale is None or stale.model != model or not self._conn.logs_changes:
            self.load(model)
            return
        with self._conn.snapshot():  # the token and the changes up to it from one state of the index
            token = self.write_token()
            changes = self._conn.matrix_changes(model, stale.token, max(CHANGES_AT_LEAST, stale.rows // 8))
            state = stale.changed(token, changes) if changes is not None else None
            if state is None or changes is None:
                self.load(model)
                return
        self._state, self._stale = state, None
        self.rows_read += len(changes.rows)

    def stored_vectors(self, ids: Sequence[str]) -> dict[str, bytes] | None:
        """The embeddings (bytes, as stored) of ``ids`` from the current state, without touching the
        database; None when no state is loaded (then read them from the index)."""
        state = self._state
        return state.stored_vectors(ids) if state is not None else None

    def knn(
        self,
        query_vec: np.ndarray,
        k: int,
        *,
        model: str,
        sources: Sequence[str],
        dates: DateRange = None,
        audiences: Audiences = None,
    ) -> Hits:
        if not self.is_valid(model):
            self.refresh(model)
        return self.scan(query_vec, k, sources=sources, dates=dates, audiences=audiences)

    def scan(
        self,
        query_vec: np.ndarray,
        k: int,
        *,
        sources: Sequence[str],
        dates: DateRange = None,
        audiences: Audiences = None,
        exact: bool = False,
    ) -> Hits:
        """The product and top-k over the current snapshot, without touching the database. A large matrix
        scores only the rows its sign bits choose (``sign_codes.py``), unless ``exact`` (a reference)."""
        state = self._state
        if state is None or not state.rows:
            return []
        q = _normalise(query_vec)
        if q.shape[0] != state.matrix.shape[1]:
            return []
        mask = state.mask(frozenset(sources), None if audiences is None else frozenset(audiences))
        if dates is not None:
            in_range = (state.dates >= dates[0]) & (state.dates <= dates[1]) & (state.dates != "")
            mask = in_range if mask is None else mask & in_range
        if (
            state.codes is not None and not exact
        ):  # a large matrix: exact scores for the rows its sign bits choose
            rows = state.codes.candidates(q, candidate_count(state.rows, k), mask)
            return _top_k([state.ids[i] for i in rows.tolist()], dot_taken(state.matrix, rows, q), k)
        scores = dot_rows(state.matrix, q)
        if mask is not None:
            scores = np.where(mask, scores, -np.inf)
        return _top_k(state.ids, scores, k)


# ---------------------------------------------------------------------------- sqlite-vec


class SqliteVecVectors:
    """sqlite-vec KNN on ``chunks_vec`` (cosine metric), joined to ``chunks`` for model/source."""

    name = "sqlite-vec"

    def __init__(self, conn: Any) -> None:
        self._conn = as_store(conn)

    def table_exists(self) -> bool:
        return self._conn.vec_dims() is not None

    def knn(
        self,
        query_vec: np.ndarray,
        k: int,
        *,
        model: str,
        sources: Sequence[str],
        dates: DateRange = None,
        audiences: Audiences = None,
    ) -> Hits:
        """Nearest ``k`` after the filters. vec0 holds no model, source, date or audience, so the KNN asks
        for more neighbours until the joined filter leaves ``k`` (up to sqlite-vec's limit of 4096)."""
        if k <= 0 or not self.table_exists():
            return []
        q = _normalise(query_vec).astype("<f4").tobytes()
        src = list(sources)
        sql = (
            "SELECT v.id, v.distance FROM ("
            " SELECT id, distance FROM chunks_vec WHERE embedding MATCH ? AND k = ?"
            ") AS v JOIN chunks c ON c.id = v.id"
            f" WHERE c.model = ? AND c.source IN ({_placeholders(len(src))})"
        )
        params: list[Any] = [model, *src]
        if dates is not None:
            sql += " AND c.date IS NOT NULL AND c.date >= ? AND c.date <= ?"
            params += list(dates)
        if audiences is not None:
            sql += f" AND c.audience IN ({_placeholders(len(audiences))})"
            params += list(audiences)
        sql += " ORDER BY v.distance"
        fetch = min(VEC0_MAX_K, max(k, 16) * 2)
        while True:
            rows = self._conn.execute(sql, (q, fetch, *params)).fetchall()
            if len(rows) >= k or fetch >= VEC0_MAX_K or not self._may_have_more(fetch):
                break
            fetch = min(VEC0_MAX_K, fetch * 4)
        return [(row[0], 1.0 - float(row[1])) for row in rows[:k]]

    def _may_have_more(self, fetched: int) -> bool:
        (count,) = self._conn.execute("SELECT count(*) FROM chunks_vec").fetchone()
        return int(count) > fetched


# ---------------------------------------------------------------------------- brute force


class BruteForceVectors:
    """Scores every stored embedding with numpy, a batch at a time; works without sqlite-vec."""

    name = "brute-force"

    def __init__(self, conn: Any) -> None:
        self._conn = as_store(conn)

    def knn(
        self,
        query_vec: np.ndarray,
        k: int,
        *,
        model: str,
        sources: Sequence[str],
        dates: DateRange = None,
        audiences: Audiences = None,
    ) -> Hits:
        if k <= 0:
            return []
        q = _normalise(query_vec)
        src = list(sources)
        sql = (
            "SELECT id, embedding FROM chunks WHERE model = ? AND embedding IS NOT NULL"
            f" AND source IN ({_placeholders(len(src))})"
        )
        params: list[Any] = [model, *src]
        if dates is not None:
            sql += " AND date IS NOT NULL AND date >= ? AND date <= ?"
            params += list(dates)
        if audiences is not None:
            sql += f" AND audience IN ({_placeholders(len(audiences))})"
            params += list(audiences)
        best: Hits = []
        for batch in self._conn.batches(sql, params, BATCH_ROWS):
            rows = [r for r in batch if len(r[1]) == q.shape[0] * 4]
            if not rows:
                continue
            matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype="<f4").reshape(len(rows), -1)
            best = heapq.nlargest(
                k, best + _top_k([r[0] for r in rows], dot_rows(matrix, q), k), key=lambda h: (h[1], h[0])
            )
        best.sort(key=lambda hit: (-hit[1], hit[0]))
        return best


# ---------------------------------------------------------------------------- choosing


def choose_vector_path(*, matrix_valid: bool, vector_support: VectorSupport, vec_table: bool) -> VectorPath:
    """The fastest path that is valid now, and why (pure; shown by ``status --deep``)."""
    if matrix_valid:
        return VectorPath("matrix", "in-memory matrix loaded and no index write since it loaded")
    if vector_support.loaded and vec_table:
        return VectorPath("sqlite-vec", "in-memory matrix not loaded or stale since the last index write")
    if not vector_support.loaded:
        return VectorPath("brute-force", f"sqlite-vec unavailable ({vector_support.reason})")
    return VectorPath("brute-force", "sqlite-vec loaded but the index has no vector table yet")


class VectorRouter:
    """Serves each query from the fastest valid path and keeps the matrix fresh.

    Trigger: a query arrives while the matrix is stale (an index write happened) or not loaded.
    Why: a load costs ~5-10 sqlite-vec queries at any size (20k x 384: 91 ms vs 14 ms), so loading
    before answering made the first hybrid search of a 20k index take ~90 ms instead of ~25; a
    load running beside a query slows that query too (a load started by it: ~45 ms), and a
    one-shot ``memory search`` exits right after its one query, never using the matrix at all.
    Outcome: an index of at most ``sync_reload_rows`` chunks (~1 ms to load), or an in-memory
    database (no second connection to load through), is loaded before serving. A larger one is
    served by sqlite-vec (or brute force) and loaded by a background thread through its own
    connection; that thread holds back until the next query asks (or ``wait_for_reload``, or
    ``load_hold_s`` passes), so it never competes with the query that started it and a process
    that exits after one query never reads the vectors. The matrix serves as soon as it is
    installed. ``preload=False`` never loads on its own: only ``warm()`` does.

    In PostgreSQL (no pgvector) the only other path, brute force, reads every vector over the
    connection for each query, as much as a load: so a stale matrix there is always loaded before
    answering, at any size.
    """

    def __init__(
        self,
        conn: Any,
        vector_support: VectorSupport,
        *,
        preload: bool = True,
        sync_reload_rows: int = SYNC_RELOAD_ROWS,
        load_hold_s: float = LOAD_HOLD_S,
    ) -> None:
        conn = as_store(conn)
        self.matrix = MatrixVectors(conn)
        self.sqlite_vec = SqliteVecVectors(conn)
        self.brute_force = BruteForceVectors(conn)
        self._conn = conn
        self._support = vector_support
        self._preload = preload
        # None: always load before answering (PostgreSQL: no path reads fewer rows than a load)
        self._sync_reload_rows = sync_reload_rows if conn.kind == "sqlite" else None
        self._load_hold_s = load_hold_s
        self._go = threading.Event()  # set: the background load may start reading
        self._open = conn.opener()  # a second connection for background loads (None: in-memory)
        self._reload: threading.Thread | None = None
        self._reload_error: str | None = None
        self.last_path: VectorPath | None = None

    def invalidate(self) -> None:
        self.matrix.invalidate()

    def warm(self, model: str) -> None:
        self.matrix.load(model)

    def wait_for_reload(self, timeout: float | None = None) -> bool:
        """Block until a background reload finishes; True when none is running afterwards."""
        thread = self._reload
        if thread is not None:
            self._go.set()  # someone waits for it: no reason to hold back
            thread.join(timeout)
        return self._reload is None or not self._reload.is_alive()

    def current_path(self, model: str) -> VectorPath:
        """The path the next query takes and why, with the rows the matrix has read so far."""
        return dataclasses.replace(self._current_path(model), rows_read=self.matrix.rows_read)

    def _current_path(self, model: str) -> VectorPath:
        path = choose_vector_path(
            matrix_valid=self.matrix.is_valid(model),
            vector_support=self._support,
            vec_table=self._support.loaded and self.sqlite_vec.table_exists(),
        )
        if path.name != "matrix" and self._reload is not None and self._reload.is_alive():
            held = "" if self._go.is_set() else " (from the next query on)"
            loading = f"the in-memory matrix is loading in the background{held}"
            return VectorPath(path.name, f"{path.reason}; {loading}")
        if path.name != "matrix" and self._reload_error:
            return VectorPath(path.name, f"{path.reason}; last matrix load failed: {self._reload_error}")
        return path

    def prepare(self, model: str) -> VectorPath:
        """Refresh a stale matrix (now or in the background), then choose and remember the path."""
        if self._preload and not self.matrix.is_valid(model):
            self._refresh(model)
        self.last_path = self.current_path(model)
        return self.last_path

    def _refresh(self, model: str) -> None:
        if self._reload is not None and self._reload.is_alive():
            self._go.set()  # a second query since the load was asked for: read now
            return
        limit = self._sync_reload_rows
        if self._open is None or limit is None or self._rows() <= limit:
            try:
                self.matrix.refresh(model)
            except MemoryError:  # pragma: no cover - only on machines short of memory
                self._reload_error = "not enough memory"
            return
        token, generation = self.matrix.write_token(), self.matrix.generation
        self._go = threading.Event()
        self._reload = threading.Thread(
            target=self._reload_in_background,
            args=(model, token, generation),
            name="sessionmem-matrix-load",
            daemon=True,
        )
        self._reload.start()

    def _rows(self) -> int:
        (rows,) = self._conn.execute("SELECT count(*) FROM chunks").fetchone()
        return int(rows)

    def _reload_in_background(self, model: str, token: object, generation: int) -> None:
        """Read through a connection of our own (WAL: a consistent snapshot, never blocking writers),
        once the next query asks or ``load_hold_s`` passed; not at all if invalidated meanwhile."""
        assert self._open is not None
        self._go.wait(self._load_hold_s)
        if generation != self.matrix.generation:
            return  # an index write since the query that asked: install() would refuse this load
        try:
            conn = self._open()
            try:
                loaded = read_matrix(conn, model)
            finally:
                conn.close()
            self.matrix.install(model, token, loaded, generation=generation)
            self._reload_error = None
        except Exception as exc:  # reported by status; queries keep using the SQL paths
            log.warning("memory vectors: background matrix load failed: %s", exc)
            self._reload_error = str(exc)

    def serve(
        self,
        path: VectorPath,
        query_vec: np.ndarray,
        k: int,
        *,
        model: str,
        sources: Sequence[str],
        dates: DateRange = None,
        audiences: Audiences = None,
    ) -> Hits:
        """Answer from ``path`` (as chosen by ``prepare``); the matrix scans without touching SQL."""
        if path.name == "matrix":
            return self.matrix.scan(query_vec, k, sources=sources, dates=dates, audiences=audiences)
        index: VectorIndex = self.sqlite_vec if path.name == "sqlite-vec" else self.brute_force
        return index.knn(query_vec, k, model=model, sources=sources, dates=dates, audiences=audiences)

    def knn(
        self,
        query_vec: np.ndarray,
        k: int,
        *,
        model: str,
        sources: Sequence[str],
        dates: DateRange = None,
        audiences: Audiences = None,
    ) -> Hits:
        path = self.prepare(model)
        return self.serve(path, query_vec, k, model=model, sources=sources, dates=dates, audiences=audiences)
