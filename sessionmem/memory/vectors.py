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

import heapq
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from sessionmem.memory.db import VectorSupport

log = logging.getLogger(__name__)

BATCH_ROWS = 4096
VEC0_MAX_K = 4096  # sqlite-vec's limit on k

Hits = list[tuple[str, float]]


class VectorIndex(Protocol):
    name: str

    def knn(self, query_vec: np.ndarray, k: int, *, model: str, sources: Sequence[str]) -> Hits: ...


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


def _placeholders(n: int) -> str:
    return ",".join("?" * n)


# ---------------------------------------------------------------------------- matrix


class MatrixVectors:
    """All embeddings of one model in one contiguous float32 matrix, with parallel id/source arrays."""

    name = "matrix"

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        self._model: str | None = None
        self._ids: list[str] = []
        self._sources = np.empty(0, dtype=object)
        self._present: frozenset[str] = frozenset()
        self._masks: dict[frozenset[str], np.ndarray] = {}
        self._matrix = np.empty((0, 0), dtype=np.float32)
        self._token: tuple[int, int] | None = None
        self._stale = True

    def write_token(self) -> tuple[int, int]:
        """Changes whenever any connection commits a write (data_version) or this one writes."""
        (version,) = self._conn.execute("PRAGMA data_version").fetchone()
        return int(version), int(self._conn.total_changes)

    @property
    def loaded_model(self) -> str | None:
        return self._model

    @property
    def rows(self) -> int:
        return len(self._ids)

    @property
    def nbytes(self) -> int:
        return int(self._matrix.nbytes)

    def invalidate(self) -> None:
        self._stale = True

    def is_valid(self, model: str) -> bool:
        """Loaded for ``model`` and nothing written to the database since."""
        if self._stale or self._model != model or self._token is None:
            return False
        if self.write_token() != self._token:
            self._stale = True
            return False
        return True

    def load(self, model: str) -> None:
        """(Re)load every embedding of ``model`` into one preallocated matrix, in one pass.

        Capacity is ``count(*)`` of all chunks (instant; counting one model's rows would scan the
        table a second time). The dimension is the first row's; rows of another dimension (a
        half-migrated index) are skipped with a warning. Peak memory is the matrix plus one batch.
        """
        token = self.write_token()
        (capacity,) = self._conn.execute("SELECT count(*) FROM chunks").fetchone()
        cur = self._conn.execute(
            "SELECT id, source, embedding FROM chunks WHERE model = ? AND embedding IS NOT NULL", (model,)
        )
        matrix = np.empty((0, 0), dtype=np.float32)
        ids: list[str] = []
        sources: list[str] = []
        size = 0
        skipped = 0
        while True:
            batch = cur.fetchmany(BATCH_ROWS)
            if not batch:
                break
            if not size:
                size = len(batch[0][2])
                matrix = np.empty((int(capacity), size // 4), dtype=np.float32)
            rows = [r for r in batch if len(r[2]) == size]
            skipped += len(batch) - len(rows)
            at = len(ids)
            rows = rows[: matrix.shape[0] - at]  # rows written since the count wait for the next load
            if not rows:
                continue
            block = np.frombuffer(b"".join(r[2] for r in rows), dtype="<f4").reshape(len(rows), -1)
            matrix[at : at + len(rows)] = block
            ids += [r[0] for r in rows]
            sources += [r[1] for r in rows]
        if skipped:
            log.warning(
                "memory vectors: %d embeddings of another dimension than %d skipped", skipped, size // 4
            )
        n = len(ids)
        self._matrix = matrix[:n] if n * 10 >= matrix.shape[0] * 9 else np.ascontiguousarray(matrix[:n])
        self._ids = ids
        self._sources = np.array(sources, dtype=object)
        self._present = frozenset(sources)
        self._masks = {}
        self._model = model
        self._token = token
        self._stale = False

    def knn(self, query_vec: np.ndarray, k: int, *, model: str, sources: Sequence[str]) -> Hits:
        if not self.is_valid(model):
            self.load(model)
        return self.scan(query_vec, k, sources=sources)

    def scan(self, query_vec: np.ndarray, k: int, *, sources: Sequence[str]) -> Hits:
        """The product and top-k over what is loaded, without touching the database.

        Safe to run in a worker thread while the caller queries SQLite: it reads the loaded
        arrays once, and only ``load`` (never called concurrently by the searcher) replaces them.
        """
        ids, matrix = self._ids, self._matrix
        if not ids:
            return []
        q = _normalise(query_vec)
        if q.shape[0] != matrix.shape[1]:
            return []
        scores = matrix @ q
        mask = self._mask(frozenset(sources))
        if mask is not None and mask.shape[0] == scores.shape[0]:
            scores = np.where(mask, scores, -np.inf)
        return _top_k(ids, scores, k)

    def _mask(self, wanted: frozenset[str]) -> np.ndarray | None:
        """Rows whose source is wanted, cached per source set; None when every row qualifies."""
        if self._present <= wanted:
            return None
        if wanted not in self._masks:
            self._masks[wanted] = np.isin(self._sources, list(wanted))
        return self._masks[wanted]


# ---------------------------------------------------------------------------- sqlite-vec


class SqliteVecVectors:
    """sqlite-vec KNN on ``chunks_vec`` (cosine metric), joined to ``chunks`` for model/source."""

    name = "sqlite-vec"

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def table_exists(self) -> bool:
        row = self._conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'chunks_vec'").fetchone()
        return row is not None

    def knn(self, query_vec: np.ndarray, k: int, *, model: str, sources: Sequence[str]) -> Hits:
        if k <= 0 or not self.table_exists():
            return []
        q = _normalise(query_vec).astype("<f4").tobytes()
        src = list(sources)
        sql = (
            "SELECT v.id, v.distance FROM ("
            " SELECT id, distance FROM chunks_vec WHERE embedding MATCH ? AND k = ?"
            ") AS v JOIN chunks c ON c.id = v.id"
            f" WHERE c.model = ? AND c.source IN ({_placeholders(len(src))}) ORDER BY v.distance"
        )
        # vec0 has no model/source columns: ask for more neighbours until the filter leaves k.
        fetch = min(VEC0_MAX_K, max(k, 16) * 2)
        while True:
            rows = self._conn.execute(sql, (q, fetch, model, *src)).fetchall()
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
        self._conn = conn

    def knn(self, query_vec: np.ndarray, k: int, *, model: str, sources: Sequence[str]) -> Hits:
        if k <= 0:
            return []
        q = _normalise(query_vec)
        src = list(sources)
        cur = self._conn.execute(
            "SELECT id, embedding FROM chunks WHERE model = ? AND embedding IS NOT NULL"
            f" AND source IN ({_placeholders(len(src))})",
            (model, *src),
        )
        best: Hits = []
        while True:
            batch = cur.fetchmany(BATCH_ROWS)
            if not batch:
                break
            rows = [r for r in batch if len(r[1]) == q.shape[0] * 4]
            if not rows:
                continue
            matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype="<f4").reshape(len(rows), -1)
            best = heapq.nlargest(
                k, best + _top_k([r[0] for r in rows], matrix @ q, k), key=lambda h: (h[1], h[0])
            )
        best.sort(key=lambda hit: (-hit[1], hit[0]))
        return best


# ---------------------------------------------------------------------------- choosing


@dataclass(frozen=True, slots=True)
class VectorPath:
    name: str  # "matrix" | "sqlite-vec" | "brute-force"
    reason: str


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
    Why: reloading 100k vectors costs a few hundred ms, more than one sqlite-vec query.
    Outcome: with ``preload=True`` (default) the matrix is (re)loaded before serving, so every
    query after the first pays only the matrix scan; with ``preload=False`` stale queries are served
    by sqlite-vec or brute force and the matrix is only loaded by ``warm()``.
    """

    def __init__(self, conn: Any, vector_support: VectorSupport, *, preload: bool = True) -> None:
        self.matrix = MatrixVectors(conn)
        self.sqlite_vec = SqliteVecVectors(conn)
        self.brute_force = BruteForceVectors(conn)
        self._support = vector_support
        self._preload = preload
        self.last_path: VectorPath | None = None

    def invalidate(self) -> None:
        self.matrix.invalidate()

    def warm(self, model: str) -> None:
        self.matrix.load(model)

    def current_path(self, model: str) -> VectorPath:
        return choose_vector_path(
            matrix_valid=self.matrix.is_valid(model),
            vector_support=self._support,
            vec_table=self._support.loaded and self.sqlite_vec.table_exists(),
        )

    def prepare(self, model: str) -> VectorPath:
        """Reload a stale matrix when preloading, then choose (and remember) the path to serve from."""
        if self._preload and not self.matrix.is_valid(model):
            try:
                self.matrix.load(model)
            except MemoryError:  # pragma: no cover - only on machines short of memory
                log.warning("memory vectors: not enough memory for the in-memory matrix; using SQL paths")
        self.last_path = self.current_path(model)
        return self.last_path

    def serve(
        self, path: VectorPath, query_vec: np.ndarray, k: int, *, model: str, sources: Sequence[str]
    ) -> Hits:
        index: VectorIndex = {
            "matrix": self.matrix,
            "sqlite-vec": self.sqlite_vec,
            "brute-force": self.brute_force,
        }[path.name]  # type: ignore[assignment]
        return index.knn(query_vec, k, model=model, sources=sources)

    def knn(self, query_vec: np.ndarray, k: int, *, model: str, sources: Sequence[str]) -> Hits:
        return self.serve(self.prepare(model), query_vec, k, model=model, sources=sources)
