"""Remote embedding providers through litellm: OpenAI (and any OpenAI-compatible endpoint),
Gemini, Voyage, Mistral and Ollama.

What this module guarantees on top of a bare ``litellm.embedding`` call:

- Batches are bounded by summed UTF-8 bytes (OpenClaw's ``EMBEDDING_BATCH_MAX_TOKENS = 8000``, which
  it measures in bytes); a single text over the bound goes alone.
- Batches run on a small thread pool (``concurrency``), results come back in input order.
- Transient failures (429 / rate-limit messages / 5xx) are retried with exponential backoff
  (500 ms doubling, capped at 8 s, jitter ×1..1.2; 3 attempts in all). Anything else fails at once:
  a bad key or a bad request does not get better by asking again. litellm's own retries are off
  (``max_retries=0``) so the policy here is the only one.
- Responses are validated: the vector count matches the input count, every vector has the same
  width (and the width seen before), values are finite, and no vector is all zeros.
  A zero vector cannot be normalised, and stored as is it would score 0 (or NaN) against every query,
  silently hiding its chunk from vector search; OpenClaw stores them, we never do. A query with a
  bad vector raises :class:`EmbeddingError`. In ``embed_documents`` a bad vector is a problem of its
  input only: the call raises :class:`UnusableVectorsError` (an ``EmbeddingError``) carrying the good
  rows and what was wrong with each bad one, so the index keeps those chunks keyword-only, says why
  in ``status`` and asks again on the next sync. A wrong vector count, or several vectors that all
  have another width than before (the endpoint now serves another model), is the provider's problem
  and raises.
- Rows come back float32 and L2-normalised (OpenAI-style providers already are; others may not be).
- Two per-request timeouts (§8): ``timeout_s`` for a query (60 s: a search is waiting) and
  ``batch_timeout_s`` for document batches while indexing (120 s: larger inputs, nobody typing).
  A timeout is not retried.

litellm is imported only when a request is made, so creating an embedder is free.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sessionmem.errors import EmbeddingError, UsageError
from sessionmem.memory.embed.embedder import Progress, row_problems
from sessionmem.memory.embed.http_answers import check_json_body, not_json_answer

if TYPE_CHECKING:
    import numpy as np

REMOTE_PROVIDERS = ("openai", "openai-compatible", "gemini", "voyage", "mistral", "ollama")

DEFAULT_MODELS: Mapping[str, str] = {
    "openai": "text-embedding-3-small",
    "openai-compatible": "text-embedding-3-small",
    "gemini": "gemini-embedding-001",
    "voyage": "voyage-4-large",
    "mistral": "mistral-embed",
    "ollama": "nomic-embed-text",
}

DEFAULT_BASE_URLS: Mapping[str, str] = {
    "openai": "https://api.openai.com/v1",
    "gemini": "https://generativelanguage.googleapis.com/v1beta",
    "voyage": "https://api.voyageai.com/v1",
    "mistral": "https://api.mistral.ai/v1",
    "ollama": "http://127.0.0.1:11434",
}

# Input limits in the provider's tokens; the index splits longer chunks before embedding.
_MAX_INPUT_TOKENS: Mapping[str, int] = {
    "openai": 8191,
    "openai-compatible": 8191,
    "gemini": 2048,
    "voyage": 32000,
    "mistral": 8192,
    "ollama": 2048,
}

# litellm's route prefix per provider; an OpenAI-compatible endpoint is litellm's "openai" route.
_LITELLM_PREFIX: Mapping[str, str] = {"openai-compatible": "openai"}

EMBEDDING_BATCH_MAX_BYTES = 8000

_Screened = tuple["np.ndarray", dict[int, str]]  # one batch's rows (bad ones NaN), {index: problem}

# Providers litellm sends through the OpenAI SDK (see RemoteEmbedder._openai_client).
_OPENAI_SDK_PROVIDERS = frozenset({"openai", "openai-compatible", "mistral"})

# Header names that carry credentials: never part of the provider key.
_SECRET_HEADER = re.compile(r"authorization|api[-_]?key|token|secret|cookie", re.IGNORECASE)
# Provider messages that mean "slow down" even when the status code got lost on the way.
_RATE_LIMIT_MESSAGE = re.compile(
    r"rate[_ ]limit|too many requests|resource has been exhausted|tokens per day", re.IGNORECASE
)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Exponential backoff for transient failures. ``attempts`` counts the first try."""

    attempts: int = 3
    base_delay_s: float = 0.5
    max_delay_s: float = 8.0
    jitter: float = 0.2  # each delay is multiplied by uniform(1, 1 + jitter)

    def delay_s(self, retry: int, rng: random.Random | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (0-based)."""
        base = min(self.base_delay_s * (2**retry), self.max_delay_s)
        return base * (1.0 + (rng or random).random() * self.jitter)


# ---------------------------------------------------------------------------- pure helpers


def batch_by_bytes(texts: Sequence[str], max_bytes: int = EMBEDDING_BATCH_MAX_BYTES) -> list[list[int]]:
    """Group text indices, in order, so each group's summed UTF-8 size is at most ``max_bytes``.

    A text larger than ``max_bytes`` on its own forms a group of one.
    """
    batches: list[list[int]] = []
    current: list[int] = []
    size = 0
    for i, text in enumerate(texts):
        n = len(text.encode("utf-8"))
        if current and size + n > max_bytes:
            batches.append(current)
            current, size = [], 0
        current.append(i)
        size += n
    if current:
        batches.append(current)
    return batches


def public_headers(headers: Mapping[str, str] | None) -> list[list[str]]:
    """Headers without credentials, sorted by name (case-insensitively): the part safe to fingerprint."""
    kept = [[k, v] for k, v in (headers or {}).items() if not _SECRET_HEADER.search(k)]
    return sorted(kept, key=lambda kv: (kv[0].lower(), kv[1]))


def provider_key(
    provider: str,
    model: str,
    *,
    base_url: str | None = None,
    headers: Mapping[str, str] | None = None,
    dimensions: int | None = None,
) -> str:
    """sha256 of the provider identity (§7): provider, endpoint, model, non-secret headers.

    The API key and any credential header are left out, so rotating a key keeps the index and its
    embedding cache; changing the endpoint, model or a routing header rebuilds them.
    """
    payload: dict[str, Any] = {
        "provider": provider,
        "baseUrl": (base_url or DEFAULT_BASE_URLS.get(provider, "")).rstrip("/"),
        "model": model,
        "headers": public_headers(headers),
    }
    if dimensions is not None:
        payload["outputDimensionality"] = dimensions
    encoded = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(encoded.encode("utf-8")).hexdigest()


class UnusableVectorsError(EmbeddingError):
    """Some inputs of an ``embed_documents`` call got no usable vector; the others did.

    ``vectors`` has one row per input, in order (float32, L2-normalised), the unusable rows filled
    with NaN; ``problems`` maps each unusable input's index to what was wrong with its vector. A
    caller that can keep an input without a vector (the index keeps its chunk keyword-only) uses
    both; any other caller sees the ``EmbeddingError`` it always did.
    """

    def __init__(self, message: str, vectors: np.ndarray, problems: Mapping[int, str]) -> None:
        super().__init__(message)
        self.vectors = vectors
        self.problems = dict(problems)


def screen_vectors(
    rows: Sequence[Sequence[float]], expected_count: int, expected_dims: int | None, source: str
) -> tuple[np.ndarray, dict[int, str]]:
    """Check a provider's vectors row by row: (float32 L2-normalised rows, {input index: problem}).

    A row is unusable when it is empty, has NaN or infinite values, is all zeros, or is not as wide
    as ``expected_dims`` (else as most rows of the batch); its row comes back NaN. Raises instead when
    the answer as a whole is wrong: another number of vectors than inputs, or two or more vectors that
    all share one width other than ``expected_dims`` (the provider changed width; not a row's fault).
    """
    import numpy as np

    if len(rows) != expected_count:
        raise EmbeddingError(f"{source} returned {len(rows)} vectors for {expected_count} inputs")
    if not rows:
        return np.zeros((0, expected_dims or 0), dtype=np.float32), {}
    widths = Counter(len(row) for row in rows if len(row))
    if not widths:
        raise EmbeddingError(f"{source} returned empty vectors")
    dims = expected_dims or widths.most_common(1)[0][0]
    if dims not in widths and len(widths) == 1 and len(rows) > 1:
        raise EmbeddingError(_width_problem(source, next(iter(widths)), dims))
    problems: dict[int, str] = {}
    if len(widths) == 1 and dims in widths and all(rows):
        matrix = np.asarray(rows, dtype=np.float64)
    else:
        matrix = np.full((len(rows), dims), np.nan)
        for i, row in enumerate(rows):
            if not row:
                problems[i] = f"{source} returned an empty vector"
            elif len(row) != dims and len(widths) > 1:
                problems[i] = (
                    f"{source} returned vectors of mixed dimensions {sorted(widths)} in one batch"
                    f" (this one {len(row)}, expected {dims})"
                )
            elif len(row) != dims:
                problems[i] = _width_problem(source, len(row), dims)
            else:
                matrix[i] = row
    problems, norms = row_problems(matrix, source, problems)
    good = np.ones(len(rows), dtype=bool)
    good[list(problems)] = False
    out = np.full((len(rows), dims), np.nan, dtype=np.float32)
    out[good] = (matrix[good] / norms[good, None]).astype(np.float32)
    return out, problems


def _width_problem(source: str, width: int, expected: int) -> str:
    return f"{source} returned {width}-dimensional vectors, expected {expected} like its earlier ones"


def is_retryable(exc: BaseException) -> bool:
    """Whether a provider error is transient: rate limits and server-side (5xx) failures only."""
    import litellm

    if isinstance(exc, litellm.Timeout | litellm.APIConnectionError):
        return False  # litellm labels these 408/500; neither is the provider saying "try again"
    if isinstance(
        exc,
        litellm.RateLimitError
        | litellm.InternalServerError
        | litellm.ServiceUnavailableError
        | litellm.BadGatewayError,
    ):
        return True
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and (status == 429 or status >= 500):
        return True
    return bool(_RATE_LIMIT_MESSAGE.search(str(exc)))


# ---------------------------------------------------------------------------- the embedder


class RemoteEmbedder:
    """An :class:`~sessionmem.memory.embed.embedder.Embedder` calling a provider's embeddings API via
    litellm."""

    def __init__(
        self,
        provider: str,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        batch_max_bytes: int = EMBEDDING_BATCH_MAX_BYTES,
        concurrency: int = 2,
        timeout_s: float = 60.0,
        batch_timeout_s: float = 120.0,
        retry: RetryPolicy = RetryPolicy(),
        dimensions: int | None = None,
    ) -> None:
        if provider not in REMOTE_PROVIDERS:
            raise UsageError(f"unknown remote embedding provider {provider!r} (one of {REMOTE_PROVIDERS})")
        if provider == "openai-compatible" and not base_url:
            raise UsageError("provider 'openai-compatible' needs a base_url (memorySearch.remote.baseUrl)")
        self.provider = provider
        self.model = model or DEFAULT_MODELS[provider]
        self.base_url = base_url.rstrip("/") if base_url else None
        self._api_key = api_key
        self.headers = dict(headers or {})
        self.batch_max_bytes = max(1, batch_max_bytes)
        self.concurrency = max(1, concurrency)
        self.timeout_s = timeout_s  # query
        self.batch_timeout_s = batch_timeout_s  # documents
        self.retry = retry
        self.dimensions = dimensions
        self.max_input_tokens = _MAX_INPUT_TOKENS[provider]
        self.provider_key = provider_key(
            provider,
            self.model,
            base_url=self.base_url,
            headers=self.headers,
            dimensions=dimensions,  # OpenClaw adds it for Gemini only; any provider's width changes vectors
        )
        self._dims: int | None = dimensions
        self._dims_lock = threading.Lock()
        self._sleep: Callable[[float], None] = time.sleep
        self._clients: dict[float, Any] = {}  # one per timeout: the SDK client's own timeout governs

    def __repr__(self) -> str:  # no key in reprs or logs
        where = f", base_url={self.base_url!r}" if self.base_url else ""
        return f"RemoteEmbedder({self.provider!r}, {self.model!r}{where})"

    @property
    def dims(self) -> int | None:
        return self._dims

    @property
    def endpoint(self) -> str:
        """Where the texts are sent: the given base URL, else the provider's public API."""
        return self.base_url or DEFAULT_BASE_URLS.get(self.provider, "")

    # -- the protocol

    def embed_query(self, text: str) -> np.ndarray:
        vectors, problems = self._embed_batch([text], query=True)
        if problems:
            raise EmbeddingError(problems[0])
        return vectors[0]

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Several short queries in one request (``QueryBatchEmbedder``); raises ``EmbeddingError``."""
        vectors, problems = self._embed_batch(list(texts), query=True)
        if problems:
            raise EmbeddingError(problems[min(problems)])
        return vectors

    def embed_documents(self, texts: Sequence[str], progress: Progress | None = None) -> np.ndarray:
        """Vectors for ``texts`` in order; raises :class:`UnusableVectorsError` (with the good rows)
        when some inputs got no usable vector."""
        import numpy as np

        texts = list(texts)
        if not texts:
            return np.zeros((0, self._dims or 0), dtype=np.float32)
        batches = batch_by_bytes(texts, self.batch_max_bytes)
        out: list[_Screened | None] = [None] * len(batches)
        if len(batches) == 1 or self.concurrency == 1:
            for b, indices in enumerate(batches):
                out[b] = self._embed_batch([texts[i] for i in indices], query=False)
                if progress is not None:
                    progress(len(indices))
        else:
            self._run_concurrently(texts, batches, out, progress)
        return self._assemble(batches, out)

    # -- internals

    def _assemble(self, batches: list[list[int]], out: list[_Screened | None]) -> np.ndarray:
        """One matrix from the batches' rows (each batch's bad rows already NaN); raise
        :class:`UnusableVectorsError` naming every input without a usable vector."""
        import numpy as np

        screened = [item for item in out if item is not None]
        dims = self._dims or max(vectors.shape[1] for vectors, _ in screened)
        parts: list[np.ndarray] = []
        problems: dict[int, str] = {}
        for indices, (vectors, bad) in zip(batches, screened, strict=True):
            if vectors.shape[1] != dims:  # only a batch without good rows (widths agree under _dims_lock)
                vectors = np.full((len(indices), dims), np.nan, dtype=np.float32)
            parts.append(vectors)
            problems.update((indices[i], problem) for i, problem in bad.items())
        matrix = np.concatenate(parts, axis=0)
        if problems:
            first = min(problems)
            raise UnusableVectorsError(
                f"{self._label} gave no usable vector for {len(problems)} of {len(matrix)} inputs "
                f"(input {first}: {problems[first]})",
                matrix,
                problems,
            )
        return matrix

    def _run_concurrently(
        self,
        texts: list[str],
        batches: list[list[int]],
        out: list[_Screened | None],
        progress: Progress | None,
    ) -> None:
        with ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="embed") as pool:
            futures: dict[Future[_Screened], int] = {
                pool.submit(self._embed_batch, [texts[i] for i in indices], query=False): b
                for b, indices in enumerate(batches)
            }
            pending = set(futures)
            while pending:
                done, pending = wait(pending, return_when=FIRST_EXCEPTION)
                for future in done:
                    error = future.exception()
                    if error is not None:
                        for other in pending:
                            other.cancel()
                        raise error
                    b = futures[future]
                    out[b] = future.result()
                    if progress is not None:
                        progress(len(batches[b]))

    def _embed_batch(self, batch: list[str], *, query: bool) -> _Screened:
        rows = self._request_with_retry(batch, query=query)
        with self._dims_lock:
            vectors, problems = screen_vectors(rows, len(batch), self._dims, self._label)
            if self._dims is None and len(problems) < len(batch):  # only good rows tell the width
                self._dims = int(vectors.shape[1])
        return vectors, problems

    @property
    def _label(self) -> str:
        return f"{self.provider} embeddings ({self.model})"

    def _request_with_retry(self, batch: list[str], *, query: bool) -> list[list[float]]:
        for attempt in range(self.retry.attempts):
            try:
                return self._request(batch, query=query)
            except EmbeddingError:
                raise
            except Exception as exc:
                answer = not_json_answer(exc)
                if answer is not None:  # not retried: the endpoint is not an embeddings API, or broken
                    problem = answer.describe(self._secrets)
                    break  # raised below, outside this handler: the chain behind holds the whole body
                retryable = is_retryable(exc)
                if not retryable or attempt + 1 >= self.retry.attempts:
                    tries = f" after {attempt + 1} attempts" if retryable else ""
                    raise EmbeddingError(f"{self._label} failed{tries}: {_describe(exc)}") from exc
                self._sleep(self.retry.delay_s(attempt))
        else:
            raise AssertionError("unreachable")  # pragma: no cover
        raise EmbeddingError(f"{self._label} at {self.endpoint} {problem}")

    @property
    def _secrets(self) -> list[str | None]:
        """What a message must never hold: the API key and the values of credential headers."""
        return [self._api_key, *(v for k, v in self.headers.items() if _SECRET_HEADER.search(k))]

    def _request(self, batch: list[str], *, query: bool) -> list[list[float]]:
        from sessionmem.tokens import configure_litellm_environment

        configure_litellm_environment()
        import litellm

        litellm.suppress_debug_info = True
        timeout = self.timeout_s if query else self.batch_timeout_s
        kwargs: dict[str, Any] = {
            "model": f"{_LITELLM_PREFIX.get(self.provider, self.provider)}/{self.model}",
            "input": batch,
            "timeout": timeout,
            "max_retries": 0,
        }
        api_key = self._api_key
        if api_key is None and self.provider == "openai-compatible":
            api_key = "no-key"  # keyless local servers; the OpenAI client refuses to send without one
        if api_key is not None:
            kwargs["api_key"] = api_key
        if self.base_url:
            kwargs["api_base"] = self.base_url
        if self.headers:
            kwargs["extra_headers"] = dict(self.headers)
        if self.provider in _OPENAI_SDK_PROVIDERS:
            kwargs["client"] = self._openai_client(api_key, timeout)
        if self.dimensions is not None:
            kwargs["dimensions"] = self.dimensions
        if self.provider == "voyage":
            kwargs["input_type"] = "query" if query else "document"
        elif self.provider == "gemini":
            kwargs["task_type"] = "RETRIEVAL_QUERY" if query else "RETRIEVAL_DOCUMENT"
        response = litellm.embedding(**kwargs)
        return [_vector_of(item) for item in sorted(response.data, key=_index_of)]

    def _openai_client(self, api_key: str | None, timeout: float) -> Any:
        """An OpenAI SDK client whose retries stay off, reused across calls (it is thread-safe).

        Trigger: litellm 1.106's OpenAI embedding path reads ``max_retries or DEFAULT_MAX_RETRIES``
        (so 0 becomes 2) and then sets that on any client it is given. Why: hidden SDK retries would
        multiply ours and ignore our backoff. Outcome: a client whose ``max_retries`` is pinned to 0.
        """
        client = self._clients.get(timeout)
        if client is None:
            import openai

            class _NoRetryOpenAI(openai.OpenAI):
                @property
                def max_retries(self) -> int:
                    return 0

                @max_retries.setter
                def max_retries(self, value: int) -> None:
                    pass

            try:
                client = _NoRetryOpenAI(
                    api_key=api_key,
                    base_url=self.base_url or DEFAULT_BASE_URLS.get(self.provider),
                    max_retries=0,
                    timeout=timeout,  # litellm does not override a given client's timeout per request
                    # a 200 that is not JSON is said as such (memory.http_answers), not as litellm's 500
                    http_client=openai.DefaultHttpxClient(event_hooks={"response": [check_json_body]}),
                )
            except openai.OpenAIError as exc:  # no key given and none in OPENAI_API_KEY
                raise EmbeddingError(f"{self._label}: {exc}") from exc
            self._clients[timeout] = client
        return client


def _index_of(item: Any) -> int:
    value = item.get("index", 0) if isinstance(item, dict) else getattr(item, "index", 0)
    return int(value or 0)


def _vector_of(item: Any) -> list[float]:
    value = item.get("embedding") if isinstance(item, dict) else getattr(item, "embedding", None)
    if not isinstance(value, list):
        raise EmbeddingError(f"embedding response item has no vector: {str(item)[:200]}")
    return value


def _describe(exc: BaseException) -> str:
    status = getattr(exc, "status_code", None)
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return f"HTTP {status}: {text}" if isinstance(status, int) else f"{type(exc).__name__}: {text}"
