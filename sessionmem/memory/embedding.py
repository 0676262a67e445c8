"""The embedder seam the index and search use. Providers live in ``embed_*.py`` modules.

Embedders are synchronous (the index runs them in a worker thread). Vectors come back as
float32 rows, L2-normalised, finite; a provider that returns anything else raises
``EmbeddingError`` naming the problem.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np

Progress = Callable[[int], None]  # called with the number of texts just embedded


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
