"""The embedder seam the index and search use. Providers live in ``embed_*.py`` modules.

Embedders are synchronous (the index runs them in a worker thread). Vectors come back as
float32 rows, L2-normalised, finite; a provider that returns anything else raises
``EmbeddingError`` naming the problem.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeGuard, runtime_checkable

if TYPE_CHECKING:
    import numpy as np

Progress = Callable[[int], None]  # called with the number of texts just embedded
ZERO_NORM = 1e-10  # a row with a smaller L2 norm counts as all zeros


@runtime_checkable
class Embedder(Protocol):
    provider: str  # "local", "openai", "gemini", "voyage", "mistral", "ollama", "openai-compatible"
    model: str
    provider_key: str  # fingerprint of provider, model, endpoint and headers (no secrets)
    max_input_tokens: int  # longer inputs are split by the index before embedding

    @property
    def dims(self) -> int | None:
        """Vector dimension, known after the first call (or from the model)."""
        ...

    def embed_query(self, text: str) -> np.ndarray:
        """One vector, shape (dims,)."""
        ...

    def embed_documents(self, texts: Sequence[str], progress: Progress | None = None) -> np.ndarray:
        """Vectors for ``texts``, shape (len(texts), dims), in order."""
        ...


@runtime_checkable
class QueryBatchEmbedder(Protocol):
    """An optional capability: several queries embedded in one call (as queries: providers with
    input types mark them so). The index's calibration probes use it; otherwise one call each."""

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for ``texts`` as queries, shape (len(texts), dims), in order."""
        ...


def embeds_query_batches(embedder: object) -> TypeGuard[QueryBatchEmbedder]:
    return isinstance(embedder, QueryBatchEmbedder)


@dataclass(frozen=True, slots=True)
class EmbedderSelection:
    """The outcome of choosing a provider from config: what was asked, what runs, and why."""

    embedder: Embedder | None  # None -> FTS-only mode
    requested: str  # the configured provider ("auto", "openai", ...)
    fallback_from: str | None = None  # set when the configured provider failed and fallback ran
    reason: str | None = None  # why FTS-only, or why the fallback was used

    @property
    def actual(self) -> str:
        return self.embedder.provider if self.embedder is not None else "none"

    @property
    def mode(self) -> str:
        return "hybrid" if self.embedder is not None else "fts-only"


def row_problems(
    matrix: np.ndarray, source: str, known: Mapping[int, str] | None = None
) -> tuple[dict[int, str], np.ndarray]:
    """The rows of ``matrix`` (one vector per row) with no usable vector, and every row's L2 norm.

    Returns ({row: problem}, norms): a row with NaN or infinite values, or all zeros (norm below
    ``ZERO_NORM``), is named after ``source``; rows in ``known`` keep the problem given there. A
    non-finite row's norm is 0."""
    import numpy as np

    with np.errstate(invalid="ignore", over="ignore"):
        finite = np.asarray(np.isfinite(matrix).all(axis=1))
        norms = np.linalg.norm(np.where(finite[:, None], matrix, 0.0), axis=1)
    problems = dict(known or {})
    for i in range(len(matrix)):
        if i in problems:
            continue
        if not finite[i]:
            problems[i] = f"{source} returned a vector with NaN or infinite values"
        elif norms[i] < ZERO_NORM:
            problems[i] = f"{source} returned an all-zero vector; it cannot be normalised or searched"
    return problems, norms
