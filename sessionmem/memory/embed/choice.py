"""Choosing the embedding provider from ``memorySearch`` settings and the environment (§8).

``select_embedder(settings, env)`` returns an :class:`EmbedderSelection`: the embedder to use (or
``None`` for FTS-only mode), what was asked for, and why it differs. Nothing is loaded and no
request is made here; models load and endpoints are called on the first embed, so ``status`` and
FTS-only runs stay fast.

Rules, as OpenClaw's:

- ``auto``: ``local`` only when ``local.modelPath`` names an existing file (not ``hf:`` or a URL);
  then ``openai``, ``gemini``, ``voyage``, ``mistral`` in that order, the first with an API key
  (``remote.apiKey`` or the provider's environment variable). Ollama is never picked automatically.
  A ``remote.baseUrl`` makes ``openai`` an OpenAI-compatible endpoint, usable without a key.
- ``openai``'s endpoint: ``remote.baseUrl``, else ``OPENAI_BASE_URL``, else ``OPENAI_API_BASE`` (the
  variables litellm honours for chat, so memory text goes where the chat goes), else OpenAI's.
  No key anywhere -> FTS-only, with the reason shown in status.
- An explicit provider that cannot be created tries ``fallback`` (using the fallback's default
  model); the result records ``fallback_from`` and the first reason. Missing keys on every path ->
  FTS-only with the reasons; any other failure raises :class:`EmbedderUnavailable` with the
  combined message ``"<reason>\\n\\nFallback to <fb> failed: <reason2>"``.
- At run time (a sync failing with ``EmbeddingError`` after the provider's retries) the index asks
  :func:`create_fallback` for the fallback once and rebuilds with it; see ``MemoryIndex``.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Mapping
from pathlib import Path

from sessionmem.config import DEFAULT_LOCAL_MODEL, MemorySearchConfig
from sessionmem.errors import EmbedderUnavailable, UsageError
from sessionmem.memory.embed.embedder import Embedder, EmbedderSelection
from sessionmem.memory.embed.local_gguf import LocalEmbedder, is_remote_model_ref
from sessionmem.memory.embed.remote import DEFAULT_MODELS, RemoteEmbedder

AUTO_ORDER = ("openai", "gemini", "voyage", "mistral")

API_KEY_ENV: Mapping[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "voyage": ("VOYAGE_API_KEY",),
    "mistral": ("MISTRAL_API_KEY",),
}

# Where litellm sends OpenAI calls when no api_base is given, in its order; embeddings follow chat.
OPENAI_BASE_ENV = ("OPENAI_BASE_URL", "OPENAI_API_BASE")

NO_KEY_REASON = "No API key found for provider openai, gemini, voyage or mistral; no local model configured"

LOCAL_INSTALL_HINT = "pip install 'sessionmem[local]'"


class _MissingKey(Exception):
    """A remote provider has no API key: skipped by ``auto``, FTS-only when nothing else works."""


def select_embedder(settings: MemorySearchConfig, env: Mapping[str, str]) -> EmbedderSelection:
    """The embedder ``settings`` ask for, given the API keys in ``env``; see the module docstring."""
    requested = settings.provider
    if not settings.enabled:
        return EmbedderSelection(None, requested, reason="memory search is disabled (memorySearch.enabled)")
    if requested == "none":
        return EmbedderSelection(None, requested, reason="embeddings are off (memorySearch.provider is none)")
    if requested == "auto":
        return _select_auto(settings, env)

    try:
        return EmbedderSelection(_create(requested, settings, env, settings.model), requested)
    except (_MissingKey, EmbedderUnavailable) as first:
        first_reason = _reason(first)
        fallback = settings.fallback
        if fallback in ("none", requested):
            if isinstance(first, _MissingKey):
                return EmbedderSelection(None, requested, reason=first_reason)
            raise EmbedderUnavailable(first_reason) from first
        try:
            embedder = _create(fallback, settings, env, None)
        except (_MissingKey, EmbedderUnavailable, ValueError) as second:
            combined = f"{first_reason}\n\nFallback to {fallback} failed: {_reason(second)}"
            if isinstance(first, _MissingKey) and isinstance(second, _MissingKey):
                return EmbedderSelection(None, requested, reason=combined)
            raise EmbedderUnavailable(combined) from second
        return EmbedderSelection(embedder, requested, fallback_from=requested, reason=first_reason)


def create_fallback(
    settings: MemorySearchConfig, env: Mapping[str, str], failed: Embedder
) -> Embedder | None:
    """The fallback to switch to after ``failed`` broke at run time (§8 "Runtime fallback").

    Built like a creation-time fallback: the fallback provider's default model (``local`` uses the
    configured ``local.modelPath``). None when no fallback is configured or it is the very provider
    that failed (same provider key). Raises :class:`EmbedderUnavailable` when it cannot be created
    (no API key, no model file), so the caller can keep the original error.
    """
    fallback = settings.fallback
    if fallback in ("none", "auto"):
        return None
    try:
        embedder = _create(fallback, settings, env, None)
    except _MissingKey as exc:
        raise EmbedderUnavailable(str(exc)) from exc
    except UsageError as exc:  # a remote provider refusing its arguments (openai-compatible, no baseUrl)
        raise EmbedderUnavailable(f"fallback {fallback}: {exc}") from exc
    if embedder.provider_key == failed.provider_key:
        return None
    return embedder


def _select_auto(settings: MemorySearchConfig, env: Mapping[str, str]) -> EmbedderSelection:
    path = settings.local.model_path
    if path and not is_remote_model_ref(path) and Path(path).expanduser().is_file():
        return EmbedderSelection(_create("local", settings, env, None), "auto")
    for provider in AUTO_ORDER:
        try:
            return EmbedderSelection(_create(provider, settings, env, settings.model), "auto")
        except _MissingKey:
            continue
    return EmbedderSelection(None, "auto", reason=NO_KEY_REASON)


def _create(
    provider: str, settings: MemorySearchConfig, env: Mapping[str, str], model: str | None
) -> Embedder:
    """A cheap, unloaded embedder for ``provider``; raises _MissingKey or EmbedderUnavailable."""
    if provider == "local":
        return _create_local(settings)
    remote = settings.remote
    api_key = remote.api_key or _env_key(provider, env)
    base_url = remote.base_url
    if provider == "openai" and not base_url:
        base_url = next((env[name].strip() for name in OPENAI_BASE_ENV if env.get(name, "").strip()), None)
    if provider == "openai" and api_key is None and remote.base_url:
        provider = "openai-compatible"  # a keyless local server (vLLM, llama-server, LM Studio...)
    elif provider in API_KEY_ENV and api_key is None:
        names = " or ".join(API_KEY_ENV[provider])
        raise _MissingKey(
            f"No API key found for provider {provider} (set {names} or memorySearch.remote.apiKey)"
        )
    elif provider not in DEFAULT_MODELS:
        raise EmbedderUnavailable(f"unknown embedding provider {provider!r}")
    return RemoteEmbedder(
        provider,
        model or DEFAULT_MODELS[provider],
        base_url=base_url,
        api_key=api_key,
        headers=remote.headers,
        concurrency=max(1, remote.batch.concurrency),
        timeout_s=remote.timeout_seconds,
        batch_timeout_s=remote.batch_timeout_seconds,
    )


def _create_local(settings: MemorySearchConfig) -> Embedder:
    local = settings.local
    ref = local.model_path or DEFAULT_LOCAL_MODEL
    problems: list[str] = []
    if not _installed("llama_cpp"):
        problems.append(f"llama-cpp-python is not installed ({LOCAL_INSTALL_HINT})")
    if is_remote_model_ref(ref):
        if not ref.startswith("hf:"):
            problems.append(f"model {ref!r}: only local files and hf:owner/repo/file.gguf are supported")
        elif not _installed("huggingface_hub"):
            problems.append(f"huggingface_hub is needed to download {ref} ({LOCAL_INSTALL_HINT})")
    elif not Path(ref).expanduser().is_file():
        problems.append(f"model file not found: {ref}")
    if problems:
        raise EmbedderUnavailable(
            "Local embeddings unavailable.\n"
            + "".join(f"- {p}\n" for p in problems)
            + "To fix: install the local extra and set memorySearch.local.modelPath to a GGUF file "
            "(or an hf: URI), or choose a remote provider (openai, gemini, voyage, mistral) with its API key."
        )
    return LocalEmbedder(
        ref, cache_dir=local.model_cache_dir, n_threads=local.n_threads, window_tokens=local.window_tokens
    )


def _installed(module: str) -> bool:
    """Whether ``module`` can be imported, without importing it (llama_cpp takes a while)."""
    if module in sys.modules:
        return sys.modules[module] is not None
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _env_key(provider: str, env: Mapping[str, str]) -> str | None:
    for name in API_KEY_ENV.get(provider, ()):
        value = env.get(name, "").strip()
        if value:
            return value
    return None


def _reason(exc: BaseException) -> str:
    if isinstance(exc, EmbedderUnavailable):
        return exc.reason
    return str(exc)
