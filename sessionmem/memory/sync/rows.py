"""The row-level pieces of a sync pass that the index's other code shares: chunk ids, vectors as stored
(float32 blobs of one width, :class:`VectorWidthChanged` when the embedder's width moves), the
``chunks_vec`` table, and the embedding cache's upsert and bound."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from sessionmem.errors import EmbeddingError
from sessionmem.memory.store.schema import vec_table_sql

if TYPE_CHECKING:
    import numpy as np

# The cache upsert in the form both stores run (``seam.py``).
INSERT_CACHE = (
    "INSERT INTO embedding_cache(provider, model, provider_key, hash, embedding, dims, updated_at)"
    " VALUES (?,?,?,?,?,?,?) ON CONFLICT(provider, model, provider_key, hash) DO UPDATE SET"
    " embedding = excluded.embedding, dims = excluded.dims, updated_at = excluded.updated_at"
)


class VectorWidthChanged(EmbeddingError):
    """The embedder now returns ``new``-dimensional vectors; the index holds ``stored``-dimensional ones.

    Raised by a pass before anything of the new width is written; ``MemoryIndex`` answers it with a
    full rebuild at the new width (a raise from that rebuild means the width moved again)."""

    def __init__(self, stored: int, new: int, model: str) -> None:
        super().__init__(
            f"{model} now returns {new}-dimensional vectors but the index holds {stored}-dimensional ones"
        )
        self.new = new


def ensure_vec_table(conn: Any, dims: int) -> None:
    """Create ``chunks_vec`` for ``dims`` if missing. A table of other dims cannot be here:
    ``Indexer.width`` is the vec table's width when there is one (and another width raises
    :class:`VectorWidthChanged` before anything is written)."""
    current = conn.vec_dims()
    assert current is None or current == dims, f"chunks_vec holds {current}-dimensional vectors, not {dims}"
    if current is None:
        conn.execute(vec_table_sql(dims))


def chunk_id(source: str, path: str, start: int, end: int, text_hash: str, model: str) -> str:
    return hashlib.sha256(f"{source}:{path}:{start}:{end}:{text_hash}:{model}".encode()).hexdigest()


def to_blob(vector: np.ndarray) -> bytes:
    import numpy as np  # only with an embedder: keyword-only indexing and search never load numpy

    return np.ascontiguousarray(vector, dtype="<f4").tobytes()


def prune_cache(conn: Any, max_entries: int | None) -> int:
    """Delete the oldest cache rows beyond ``max_entries``; returns how many went (``conn``: a store)."""
    if max_entries is None:
        return 0
    (count,) = conn.execute("SELECT COUNT(*) FROM embedding_cache").fetchone()
    excess = count - max(0, max_entries)
    if excess <= 0:
        return 0
    with conn.atomic():
        conn.execute(
            "DELETE FROM embedding_cache WHERE rowid IN "
            "(SELECT rowid FROM embedding_cache ORDER BY updated_at ASC, rowid ASC LIMIT ?)",
            (excess,),
        )
    return excess
