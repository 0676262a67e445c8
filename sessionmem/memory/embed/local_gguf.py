"""Local embeddings from a GGUF model with llama-cpp-python.

Cheap to create: the model is resolved (``hf:`` URIs downloaded with huggingface_hub) and loaded on
the first embed. Until then ``dims`` and ``max_input_tokens`` come from the GGUF header, read
without loading any weights.

Throughput (MiniLM-L6 Q8_0, ~400-token chunks, 2 cores): flash attention is the one setting that
matters, about 2x (6-8 -> 12-16 chunks/s). Packing several sequences into one large batch does not
help an encoder here: the batch's attention is computed over all its tokens and masked, so a 2048-token
batch of 5 chunks is slower than 5 batches of one. So the context and batch are the model's own
training context (capped at 2048), and short texts still share a batch.

Over-long input never crashes: a text over the model's context is cut into token windows, each window
embedded, and the windows' mean-pooled vectors averaged by token count (the same mean a model with a
longer context would take), then normalised.

Windows are also capped at ``local.windowTokens`` (default 256), below a model's context: small sentence
models are trained on short inputs (MiniLM-L6 on 128-256 word pieces, though its GGUF says 512), and
one pass over a 400-token chunk blurs it. Measured on LoCoMo (bench/README.md), MiniLM's vector-only
R@6 is 0.694 with one 512-token pass, 0.730 with 256-token windows, 0.749 with 128; 256 stays within
what the common small models (MiniLM, bge, e5, gte) were trained on.

Weights stay in llama.cpp's plain CPU buffers (``use_extra_bufts`` off). The "extra" buffer types
repack weights for AMX or other CPU-specific kernels; on Intel Xeons with AMX the AMX matrix multiply
crashes the process (SIGSEGV) on the first embedding of a BERT-style Q8_0 model, and for a model this
small repacking buys nothing measurable. llama-cpp-python sets model parameters inside
``Llama.__init__`` from ``llama_model_default_params()``, so :func:`_plain_cpu_buffers` switches the
default off around the load.

Threads: with ``local.nThreads`` unset, the count is chosen per call by measurement
(:mod:`sessionmem.memory.embed.threads`), because llama.cpp's default of every core collapses (about
4x slower) when another process holds one of them; a set ``nThreads`` is passed to llama.cpp as is.

No timeouts: OpenClaw bounds local embedding at 5 min (query) / 10 min (batch), but a llama.cpp call
cannot be interrupted from Python, so a timer could only stop waiting while the model keeps a core
busy and holds its lock. Local calls run to completion; ``memorySearch.remote.timeoutSeconds`` and
``batchTimeoutSeconds`` apply to remote providers only.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import struct
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from sessionmem.errors import EmbedderUnavailable, EmbeddingError
from sessionmem.memory.embed.embedder import Progress
from sessionmem.memory.embed.threads import ThreadChooser, candidate_counts, usable_cores

if TYPE_CHECKING:
    import numpy as np

INSTALL_HINT = "pip install 'sessionmem[local]'"
MAX_CONTEXT = 2048  # tokens per sequence we ask llama.cpp for, whatever the model was trained on
DEFAULT_MAX_INPUT_TOKENS = 512
_PROGRESS_EVERY = 8  # texts per llama call: progress moves, and a query waits for at most one group


def is_remote_model_ref(ref: str) -> bool:
    """``hf:`` URIs and URLs name a model to fetch, not a file on disk."""
    return ref.startswith(("hf:", "http://", "https://"))


def parse_hf_uri(uri: str) -> tuple[str, str]:
    """``hf:owner/repo/path/file.gguf`` -> (``owner/repo``, ``path/file.gguf``)."""
    if not uri.startswith("hf:"):
        raise EmbedderUnavailable(f"not an hf: model URI: {uri!r}")
    parts = [p for p in uri[3:].split("/") if p]
    if len(parts) < 3 or not parts[-1].endswith(".gguf"):
        raise EmbedderUnavailable(
            f"bad model URI {uri!r}: expected hf:owner/repo/file.gguf "
            "(a GGUF file inside a Hugging Face repository)"
        )
    return f"{parts[0]}/{parts[1]}", "/".join(parts[2:])


def resolve_model_path(ref: str, cache_dir: str | None = None) -> Path:
    """The GGUF file ``ref`` names, downloading an ``hf:`` URI into ``cache_dir`` when needed."""
    if ref.startswith(("http://", "https://")):
        raise EmbedderUnavailable(
            f"model URLs are not supported ({ref}); download the GGUF file and set "
            "memorySearch.local.modelPath, or use an hf:owner/repo/file.gguf URI"
        )
    if not ref.startswith("hf:"):
        path = Path(ref).expanduser()
        if not path.is_file():
            raise EmbedderUnavailable(f"Local embeddings unavailable: model file not found: {ref}")
        return path
    repo_id, filename = parse_hf_uri(ref)
    try:
        from huggingface_hub import hf_hub_download
    except ImportError as exc:
        raise EmbedderUnavailable(
            f"Local embeddings unavailable: huggingface_hub is needed to download {ref} ({INSTALL_HINT})"
        ) from exc
    try:
        return Path(hf_hub_download(repo_id=repo_id, filename=filename, cache_dir=cache_dir))
    except Exception as exc:
        raise EmbedderUnavailable(
            f"Local embeddings unavailable: could not download {filename} from huggingface.co/{repo_id} "
            f"({type(exc).__name__}: {exc}). Download it yourself and set memorySearch.local.modelPath."
        ) from exc


def cached_model_path(ref: str, cache_dir: str | None = None) -> Path | None:
    """The file for ``ref`` if it is already on disk (no download, no network)."""
    if not is_remote_model_ref(ref):
        path = Path(ref).expanduser()
        return path if path.is_file() else None
    if not ref.startswith("hf:"):
        return None
    try:
        from huggingface_hub import try_to_load_from_cache

        repo_id, filename = parse_hf_uri(ref)
        found = try_to_load_from_cache(repo_id=repo_id, filename=filename, cache_dir=cache_dir)
    except Exception:
        return None
    return Path(found) if isinstance(found, str) else None


# ---------------------------------------------------------------------------- GGUF header

_SCALARS = {
    0: "<B",
    1: "<b",
    2: "<H",
    3: "<h",
    4: "<I",
    5: "<i",
    6: "<f",
    7: "<?",
    10: "<Q",
    11: "<q",
    12: "<d",
}


def read_gguf_metadata(path: Path, wanted: tuple[str, ...] = ()) -> dict[str, Any]:
    """Scalar metadata of a GGUF file, read from its header without loading tensors.

    Arrays (the tokenizer's vocabulary) are skipped. Stops early once every ``wanted`` key was seen
    (``{arch}`` in a wanted key stands for ``general.architecture``).
    """
    meta: dict[str, Any] = {}
    with path.open("rb") as f:
        if f.read(4) != b"GGUF":
            raise ValueError(f"{path} is not a GGUF file")
        (version,) = struct.unpack("<I", f.read(4))
        if version < 2:
            raise ValueError(f"{path}: GGUF version {version} is not supported")
        _n_tensors, n_kv = struct.unpack("<QQ", f.read(16))
        for _ in range(n_kv):
            key = _read_str(f)
            (kind,) = struct.unpack("<I", f.read(4))
            meta[key] = _read_value(f, kind)
            arch = meta.get("general.architecture")
            if wanted and arch and all(k.replace("{arch}", str(arch)) in meta for k in wanted):
                break
    return meta


def _read_str(f: IO[bytes]) -> str:
    (n,) = struct.unpack("<Q", f.read(8))
    return f.read(n).decode("utf-8", "replace")


def _read_value(f: IO[bytes], kind: int) -> Any:
    if kind in _SCALARS:
        fmt = _SCALARS[kind]
        return struct.unpack(fmt, f.read(struct.calcsize(fmt)))[0]
    if kind == 8:
        return _read_str(f)
    if kind == 9:
        elem_kind, count = struct.unpack("<IQ", f.read(12))
        if elem_kind in _SCALARS:
            f.seek(struct.calcsize(_SCALARS[elem_kind]) * count, 1)
        else:
            for _ in range(count):
                _read_value(f, elem_kind)
        return None
    raise ValueError(f"unknown GGUF value type {kind}")


# ---------------------------------------------------------------------------- the embedder


class LocalEmbedder:
    """An :class:`~sessionmem.memory.embed.embedder.Embedder` running a GGUF model in-process."""

    provider = "local"

    def __init__(
        self,
        model_path_or_uri: str,
        *,
        cache_dir: str | None = None,
        n_threads: int | None = None,
        window_tokens: int | None = None,
    ):
        self.model = str(model_path_or_uri)
        self.cache_dir = cache_dir
        if n_threads is not None and n_threads < 1:
            raise ValueError(f"n_threads must be 1 or more, got {n_threads}")
        self.n_threads = n_threads
        # Unset: the count is chosen call by call (threads.py); set: llama.cpp gets exactly that.
        self.thread_chooser: ThreadChooser | None = None
        if n_threads is None:
            self.thread_chooser = ThreadChooser(candidate_counts(usable_cores()))
            self._threads_set = self.thread_chooser.current
        else:
            self._threads_set = n_threads
        self.window_tokens = window_tokens
        key: dict[str, Any] = {"provider": "local", "model": self.model}
        if window_tokens is not None:  # another window gives other vectors: cached ones must not be reused
            key["window"] = int(window_tokens)
        payload = json.dumps(key, separators=(",", ":"))
        self.provider_key = hashlib.sha256(payload.encode("utf-8")).hexdigest()
        self._lock = threading.Lock()
        self._llm: Any = None
        self._header: dict[str, Any] | None = None
        self._dims: int | None = None
        self._context: int | None = None  # the loaded model's context (tokens per sequence)
        self._limit_override: int | None = None
        self._load_error: str | None = None

    def __repr__(self) -> str:
        return f"LocalEmbedder({self.model!r})"

    # -- cheap facts (GGUF header; no weights loaded)

    def _model_facts(self) -> dict[str, Any]:
        if self._header is None:
            path = cached_model_path(self.model, self.cache_dir)
            if path is None:
                return {}
            try:
                meta = read_gguf_metadata(
                    path, ("{arch}.context_length", "{arch}.embedding_length", "{arch}.pooling_type")
                )
            except (OSError, ValueError, struct.error):
                meta = {}
            arch = meta.get("general.architecture", "")
            self._header = {
                "context_length": meta.get(f"{arch}.context_length"),
                "embedding_length": meta.get(f"{arch}.embedding_length"),
                "pooling_type": meta.get(f"{arch}.pooling_type"),
            }
        return self._header

    @property
    def max_input_tokens(self) -> int:
        """The model's training context (capped at 2048); 512 until the file is on disk."""
        if self._context is not None:
            limit = self._context
        else:
            trained = self._model_facts().get("context_length")
            limit = min(int(trained), MAX_CONTEXT) if trained else DEFAULT_MAX_INPUT_TOKENS
        return min(limit, self._limit_override) if self._limit_override else limit

    @max_input_tokens.setter
    def max_input_tokens(self, value: int) -> None:
        """Lower the limit (e.g. to leave room); windows never exceed the model's own context."""
        self._limit_override = max(8, int(value))

    @property
    def dims(self) -> int | None:
        if self._dims is None:
            width = self._model_facts().get("embedding_length")
            return int(width) if width else None
        return self._dims

    # -- the protocol

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([text])[0]

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Queries and documents are embedded alike here (``QueryBatchEmbedder``)."""
        return self.embed_documents(texts)

    def embed_documents(self, texts: Sequence[str], progress: Progress | None = None) -> np.ndarray:
        import numpy as np

        texts = list(texts)
        rows: list[np.ndarray] = []
        for start in range(0, len(texts), _PROGRESS_EVERY):
            group = texts[start : start + _PROGRESS_EVERY]
            with self._lock:
                llm = self._load()
                rows.append(self._embed_group(llm, group))
            if progress is not None:
                progress(len(group))
        if not rows:
            return np.zeros((0, self.dims or 0), dtype=np.float32)
        return np.concatenate(rows, axis=0)

    # -- internals (called with the lock held)

    def _load(self) -> Any:
        """The model, loaded once. A failure is remembered and raised as EmbeddingError on every call.

        EmbeddingError (not EmbedderUnavailable) because the embedder was chosen already: search
        treats it as "vectors unavailable, keyword results only" instead of crashing, and a model
        that cannot be downloaded is not retried on every query.
        """
        if self._llm is not None:
            return self._llm
        if self._load_error is not None:
            raise EmbeddingError(self._load_error)
        try:
            return self._load_model()
        except EmbedderUnavailable as exc:
            self._load_error = exc.reason
            raise EmbeddingError(exc.reason) from exc

    def _load_model(self) -> Any:
        try:
            import llama_cpp
        except ImportError as exc:
            raise EmbedderUnavailable(
                f"Local embeddings unavailable: llama-cpp-python is not installed ({INSTALL_HINT})"
            ) from exc
        path = resolve_model_path(self.model, self.cache_dir)
        self._header = None  # the file may have just been downloaded
        facts = self._model_facts()
        trained = int(facts.get("context_length") or 0)
        context = min(trained, MAX_CONTEXT) if trained else 0  # 0: llama.cpp uses the trained context
        pooling = facts.get("pooling_type")
        if pooling is None or int(pooling) == llama_cpp.LLAMA_POOLING_TYPE_NONE:
            pooling = llama_cpp.LLAMA_POOLING_TYPE_MEAN  # one vector per text, whatever the file says
        options: dict[str, Any] = {
            "model_path": str(path),
            "embedding": True,
            "pooling_type": int(pooling),
            "n_ctx": context,
            "n_batch": context or MAX_CONTEXT,
            "n_ubatch": context or MAX_CONTEXT,  # an encoder needs each sequence in one micro-batch
            "n_threads": self._threads_set,
            "n_threads_batch": self._threads_set,
            "verbose": False,
        }
        with _plain_cpu_buffers():
            try:
                llm = llama_cpp.Llama(**options, flash_attn=True)
            except Exception:
                try:  # an architecture without flash-attention kernels: slower, but it runs
                    llm = llama_cpp.Llama(**options, flash_attn=False)
                except Exception as exc:
                    raise EmbedderUnavailable(
                        f"Local embeddings unavailable: could not load {path.name} "
                        f"({type(exc).__name__}: {exc})"
                    ) from exc
        self._context = int(llm.n_ctx())
        self._dims = int(llm.n_embd())
        self._llm = llm
        return llm

    def _embed_group(self, llm: Any, texts: list[str]) -> np.ndarray:
        import numpy as np

        assert self._context is not None and self._dims is not None
        pieces: list[str] = []
        owners: list[int] = []
        weights: list[float] = []
        limit = min(self.max_input_tokens, self.window_tokens or self.max_input_tokens)
        for i, text in enumerate(texts):
            for piece, n_tokens in self._windows(llm, text, limit):
                pieces.append(piece)
                owners.append(i)
                weights.append(float(n_tokens))
        tokens = int(sum(weights))
        threads = self._use_threads(llm, tokens)
        start = time.perf_counter()
        try:
            raw = llm.embed(pieces, normalize=False, truncate=True)
        except Exception as exc:
            raise EmbeddingError(f"local model {Path(self.model).name} failed to embed: {exc}") from exc
        if self.thread_chooser is not None:
            self.thread_chooser.record(threads, tokens, time.perf_counter() - start)
        vectors = np.asarray(raw, dtype=np.float64)
        if vectors.shape != (len(pieces), self._dims):
            raise EmbeddingError(
                f"local model returned shape {vectors.shape} for {len(pieces)} inputs of {self._dims} dims"
            )
        combined = np.zeros((len(texts), self._dims), dtype=np.float64)
        np.add.at(combined, np.asarray(owners), vectors * np.asarray(weights)[:, None])
        return _normalise(combined, texts)

    @property
    def threads(self) -> int:
        """The thread count of the last llama.cpp call (of the next one, before any)."""
        return self._threads_set

    def _use_threads(self, llm: Any, tokens: int) -> int:
        """The thread count for the next call: ``n_threads`` when set, else the chooser's (applied)."""
        if self.thread_chooser is None:
            return self._threads_set
        count = self.thread_chooser.next_count(tokens)
        if count != self._threads_set:
            import llama_cpp

            llama_cpp.llama_set_n_threads(llm.ctx, count, count)
            llm.n_threads = llm.n_threads_batch = count  # what llama-cpp-python reports
            self._threads_set = count
        return count

    @staticmethod
    def _windows(llm: Any, text: str, limit: int) -> list[tuple[str, int]]:
        """``text`` whole when it fits the context, else consecutive token windows as text."""
        tokens = llm.tokenize(text.encode("utf-8"), add_bos=True, special=False)
        if len(tokens) <= limit:
            return [(text, max(1, len(tokens)))]
        # Trigger: a chunk longer than the model's context (word pieces outnumber tiktoken's tokens).
        # Why: llama.cpp would truncate silently; an encoder has no positions past its context.
        # Outcome: windows that leave room for the special tokens and re-tokenisation drift.
        specials = {llm.token_bos(), llm.token_eos()}
        body = [t for t in tokens if t not in specials]
        width = max(8, limit - 8)
        out: list[tuple[str, int]] = []
        for start in range(0, len(body), width):
            window = body[start : start + width]
            piece = llm.detokenize(window).decode("utf-8", "ignore")
            out.append((piece or " ", len(window)))
        return out


def _normalise(matrix: np.ndarray, texts: Sequence[str]) -> np.ndarray:
    import numpy as np

    finite = np.isfinite(matrix).all(axis=1)
    if not finite.all():
        bad = int(np.flatnonzero(~finite)[0])
        raise EmbeddingError(
            f"local model produced NaN or infinite values for input {bad}: {texts[bad][:60]!r}"
        )
    norms = np.linalg.norm(matrix, axis=1)
    if (norms < 1e-10).any():
        bad = int(np.flatnonzero(norms < 1e-10)[0])
        raise EmbeddingError(f"local model produced an all-zero vector for input {bad}: {texts[bad][:60]!r}")
    return (matrix / norms[:, None]).astype(np.float32)


_DEFAULT_PARAMS_LOCK = threading.Lock()


@contextlib.contextmanager
def _plain_cpu_buffers() -> Iterator[None]:
    """While held, models load with ``use_extra_bufts`` off (see the module docstring: AMX crashes).

    ``Llama.__init__`` reads ``llama_cpp.llama_cpp.llama_model_default_params()``; the function is
    swapped for one that returns the defaults with extra buffer types off, under a lock, and restored.
    """
    import llama_cpp.llama_cpp as bindings

    with _DEFAULT_PARAMS_LOCK:
        original = bindings.llama_model_default_params

        def plain_defaults() -> Any:
            params = original()
            params.use_extra_bufts = False
            return params

        bindings.llama_model_default_params = plain_defaults
        try:
            yield
        finally:
            bindings.llama_model_default_params = original
