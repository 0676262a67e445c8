"""Embedding providers: remote through litellm against the loopback server, local with the real
GGUF model, and provider selection from settings and environment."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sessionmem.cli.output import format_status, status_json
from sessionmem.config import MemorySearchConfig
from sessionmem.errors import EmbedderUnavailable, EmbeddingError, UsageError
from sessionmem.memory.embed.choice import NO_KEY_REASON, select_embedder
from sessionmem.memory.embed.embedder import Embedder
from sessionmem.memory.embed.local_gguf import (
    LocalEmbedder,
    parse_hf_uri,
    read_gguf_metadata,
    resolve_model_path,
)
from sessionmem.memory.embed.remote import (
    RemoteEmbedder,
    RetryPolicy,
    batch_by_bytes,
    provider_key,
)
from sessionmem.memory.index import MemoryIndex
from tests.support.openai_server import (
    OpenAIServer,
    Reply,
    delay,
    embedding_reply,
    hashed_vector,
    http_error,
    rate_limit,
    raw_reply,
    server_error,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
FAST_RETRY = RetryPolicy(base_delay_s=0.01, max_delay_s=0.04)


def remote(server: OpenAIServer, provider: str = "openai", **kwargs: Any) -> RemoteEmbedder:
    kwargs.setdefault("api_key", "sk-test")
    kwargs.setdefault("retry", FAST_RETRY)
    model = kwargs.pop("model", "text-embedding-3-small")
    return RemoteEmbedder(provider, model, base_url=server.base_url, **kwargs)


def expected(text: str, dims: int = 384) -> np.ndarray:
    vec = np.asarray(hashed_vector(text, dims), dtype=np.float32)
    return vec / np.linalg.norm(vec)


# ---------------------------------------------------------------------------- batching and backoff (pure)


def test_batches_are_bounded_by_utf8_bytes_and_oversize_goes_alone() -> None:
    texts = ["a" * 3000, "b" * 3000, "é" * 1500, "c" * 9000, "d" * 10, "e" * 7990]
    # "é" is 2 bytes: 3000 bytes. 3000+3000 fits 8000, +3000 does not.
    assert batch_by_bytes(texts, 8000) == [[0, 1], [2], [3], [4, 5]]
    assert batch_by_bytes([], 8000) == []
    assert batch_by_bytes(["x"] * 5, 2) == [[0, 1], [2, 3], [4]]


def test_backoff_doubles_from_500ms_caps_at_8s_with_jitter_up_to_20_percent() -> None:
    policy = RetryPolicy()
    for retry, base in [(0, 0.5), (1, 1.0), (2, 2.0), (4, 8.0), (9, 8.0)]:
        delays = [policy.delay_s(retry) for _ in range(50)]
        assert all(base <= d <= base * 1.2 + 1e-9 for d in delays)
    assert policy.attempts == 3


# ---------------------------------------------------------------------------- remote through litellm


def test_remote_vectors_come_back_normalised_in_input_order(openai_server: OpenAIServer) -> None:
    texts = [f"note {i} " + "word " * 600 for i in range(7)]  # ~3 KB each -> 2 per batch
    seen: list[int] = []
    embedder = remote(openai_server, concurrency=3)
    vectors = embedder.embed_documents(texts, progress=seen.append)
    assert vectors.shape == (7, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    for text, row in zip(texts, vectors, strict=True):
        np.testing.assert_allclose(row, expected(text), atol=1e-6)
    assert len(openai_server.embeddings.requests) == 4
    assert [len(r.body["input"]) for r in openai_server.embeddings.requests].count(2) == 3
    assert sum(seen) == 7
    assert embedder.dims == 384
    assert isinstance(embedder, Embedder)


def test_remote_query_is_one_vector(openai_server: OpenAIServer) -> None:
    vec = remote(openai_server).embed_query("when is the billing cutover")
    assert vec.shape == (384,)
    np.testing.assert_allclose(vec, expected("when is the billing cutover"), atol=1e-6)


def test_batches_run_concurrently_up_to_the_limit(openai_server: OpenAIServer) -> None:
    lock = threading.Lock()
    state = {"now": 0, "max": 0}

    def slow(body: dict[str, Any]) -> Reply:
        with lock:
            state["now"] += 1
            state["max"] = max(state["max"], state["now"])
        time.sleep(0.15)
        with lock:
            state["now"] -= 1
        return embedding_reply([hashed_vector(t) for t in body["input"]])

    openai_server.embeddings.handler = slow
    remote(openai_server, concurrency=2, batch_max_bytes=10).embed_documents([f"t{i}" * 10 for i in range(6)])
    assert len(openai_server.embeddings.requests) == 6
    assert state["max"] == 2


def test_rate_limit_is_retried_then_succeeds(openai_server: OpenAIServer) -> None:
    openai_server.embeddings.push(rate_limit())
    vec = remote(openai_server).embed_query("hello")
    np.testing.assert_allclose(vec, expected("hello"), atol=1e-6)
    assert len(openai_server.embeddings.requests) == 2


def test_server_errors_are_retried_up_to_three_attempts(openai_server: OpenAIServer) -> None:
    openai_server.embeddings.push(server_error(500), server_error(503))
    remote(openai_server).embed_query("hello")
    assert len(openai_server.embeddings.requests) == 3

    openai_server.embeddings.requests.clear()
    openai_server.embeddings.push(server_error(500), server_error(502), server_error(500))
    with pytest.raises(EmbeddingError, match=r"after 3 attempts.*HTTP 500"):
        remote(openai_server).embed_query("hello")
    assert len(openai_server.embeddings.requests) == 3


def test_rate_limit_message_without_429_is_retried(openai_server: OpenAIServer) -> None:
    openai_server.embeddings.push(http_error(400, "Resource has been exhausted (e.g. check quota)."))
    remote(openai_server).embed_query("hello")
    assert len(openai_server.embeddings.requests) == 2


@pytest.mark.parametrize("status", [400, 401, 404])
def test_client_errors_fail_at_once(openai_server: OpenAIServer, status: int) -> None:
    openai_server.embeddings.push(http_error(status, "'$.input' is invalid", type_="invalid_request_error"))
    with pytest.raises(EmbeddingError, match=f"HTTP {status}") as info:
        remote(openai_server).embed_documents(["a", "b"])
    assert "attempts" not in str(info.value)
    assert len(openai_server.embeddings.requests) == 1


API_KEY = "sk-live-Zq8Tw3Ke"
PROXY_PAGE = (
    b"<html><body>Gateway login for " + API_KEY.encode() + b"\x00\x1b[31m" + b"x" * 5000 + b"</body></html>"
)


@pytest.mark.parametrize("provider", ["openai-compatible", "openai", "mistral", "ollama", "gemini", "voyage"])
def test_a_200_whose_body_is_not_json_is_said_as_such(openai_server: OpenAIServer, provider: str) -> None:
    """It was "HTTP 500" (litellm's label for its own failure to read the body), and retried."""
    openai_server.embeddings.push(*[raw_reply(PROXY_PAGE) for _ in range(3)])
    with pytest.raises(EmbeddingError) as info:
        remote(openai_server, provider, api_key=API_KEY).embed_query("hello")
    message = str(info.value)
    status = "HTTP 200" if provider in ("openai-compatible", "openai", "mistral") else "a success status"
    assert f"at {openai_server.base_url} answered {status} with a body that is not JSON" in message, message
    assert f"{len(PROXY_PAGE)} bytes" in message
    assert "'<html><body>Gateway login for ***\\x00\\x1b[31mxxx" in message  # control bytes escaped
    assert "HTTP 500" not in message and "\x1b" not in message and "\x00" not in message
    assert len(message) < 400  # the first bytes only
    assert len(openai_server.embeddings.requests) == 1  # not retried as a server error
    chain: list[BaseException] = []
    link: BaseException | None = info.value
    while link is not None and link not in chain:
        chain.append(link)
        link = link.__cause__ or link.__context__
    assert not any(API_KEY in f"{e} {e!r}" for e in chain)


def test_the_cli_says_what_the_embedding_server_answered(openai_server: OpenAIServer, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from sessionmem.cli import cli

    workspace = tmp_path / "workspace"
    (workspace / "memory").mkdir(parents=True)
    (workspace / "memory" / "a.md").write_text("- the spare anchor is in the blue locker\n")
    memory_search = {
        "provider": "openai",
        "remote": {"baseUrl": openai_server.base_url, "apiKey": API_KEY},
    }
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps({"agents": {"defaults": {"workspace": str(workspace), "memorySearch": memory_search}}})
    )
    openai_server.embeddings.push(*[raw_reply(PROXY_PAGE) for _ in range(6)])
    result = CliRunner().invoke(
        cli, ["--config", str(config), "--state-dir", str(tmp_path / "s"), "memory", "index"]
    )
    assert result.exit_code == 1, result.output
    assert "answered HTTP 200 with a body that is not JSON (text/html; charset=utf-8" in result.stderr
    assert "HTTP 500" not in result.output and API_KEY not in result.output


def test_default_backoff_waits_half_a_second_before_the_retry(
    openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    openai_server.embeddings.push(rate_limit())
    embedder = remote(openai_server, retry=RetryPolicy())
    waits: list[float] = []
    monkeypatch.setattr(embedder, "_sleep", waits.append)
    embedder.embed_query("x")
    assert len(openai_server.embeddings.requests) == 2
    assert len(waits) == 1 and 0.5 <= waits[0] <= 0.6  # base 0.5 s, jitter up to 20%


def test_timeout_fails_without_hanging(openai_server: OpenAIServer) -> None:
    import litellm  # noqa: F401  (its first import takes seconds: not part of the timeout measured)

    openai_server.embeddings.push(delay(5.0))  # it would answer, had the call waited for it
    with pytest.raises(EmbeddingError, match=r"(?s)embeddings.*Timeout"):
        remote(openai_server, timeout_s=0.3).embed_query("x")
    assert len(openai_server.embeddings.requests) == 1


@pytest.mark.parametrize(
    ("corrupt", "message"),
    [
        ("nan", "NaN or infinite"),
        ("zero", "all-zero vector"),
        ("wrong_dims", "mixed dimensions"),
        ("wrong_count", "returned 1 vectors for 2 inputs"),
    ],
)
def test_bad_vectors_raise_naming_the_problem(
    openai_server: OpenAIServer, corrupt: str, message: str
) -> None:
    openai_server.embeddings.corrupt = corrupt
    with pytest.raises(EmbeddingError, match=message):
        remote(openai_server).embed_documents(["alpha", "beta"])
    assert len(openai_server.embeddings.requests) == 1  # not retried: asking again won't fix it


def test_dimension_change_between_calls_is_an_error(openai_server: OpenAIServer) -> None:
    embedder = remote(openai_server)
    embedder.embed_query("first")
    openai_server.embeddings.dims = 256
    with pytest.raises(EmbeddingError, match="256-dimensional vectors, expected 384"):
        embedder.embed_query("second")


def test_api_key_and_headers_reach_the_server(openai_server: OpenAIServer) -> None:
    embedder = remote(openai_server, api_key="sk-secret", headers={"X-Team": "memory"})
    embedder.embed_query("x")
    [request] = openai_server.embeddings.requests
    assert request.headers["authorization"] == "Bearer sk-secret"
    assert request.headers["x-team"] == "memory"
    assert request.body["model"] == "text-embedding-3-small"
    assert "sk-secret" not in repr(embedder)


def test_keyless_openai_compatible_endpoint(openai_server: OpenAIServer) -> None:
    embedder = RemoteEmbedder("openai-compatible", "nomic-embed", base_url=openai_server.base_url)
    assert embedder.embed_query("x").shape == (384,)
    assert openai_server.embeddings.requests[0].body["model"] == "nomic-embed"
    with pytest.raises(UsageError, match="base_url"):
        RemoteEmbedder("openai-compatible", "m")


def test_voyage_and_gemini_say_query_or_document(openai_server: OpenAIServer) -> None:
    voyage = remote(openai_server, "voyage", model="voyage-4-large")
    voyage.embed_query("q")
    voyage.embed_documents(["d"])
    assert [r.body["input_type"] for r in openai_server.embeddings.requests] == ["query", "document"]

    openai_server.embeddings.requests.clear()
    gemini = remote(openai_server, "gemini", model="gemini-embedding-001")
    gemini.embed_query("q")
    gemini.embed_documents(["d1", "d2"])
    kinds = [req["taskType"] for r in openai_server.embeddings.requests for req in r.body["requests"]]
    assert kinds == ["RETRIEVAL_QUERY", "RETRIEVAL_DOCUMENT", "RETRIEVAL_DOCUMENT"]


def test_ollama_route(openai_server: OpenAIServer) -> None:
    vectors = remote(openai_server, "ollama", model="nomic-embed-text", api_key=None).embed_documents(["a b"])
    np.testing.assert_allclose(vectors[0], expected("a b"), atol=1e-6)
    assert openai_server.embeddings.requests[0].path.endswith("/api/embed")


def test_provider_key_ignores_secrets_but_not_endpoint_model_or_headers() -> None:
    base = provider_key("openai", "m", base_url="http://h/v1", headers={"X-Team": "a"})
    assert base == provider_key(
        "openai", "m", base_url="http://h/v1/", headers={"X-Team": "a", "Authorization": "Bearer k"}
    )
    assert base == provider_key(
        "openai", "m", base_url="http://h/v1", headers={"x-api-key": "k", "X-Team": "a"}
    )
    assert base != provider_key("openai", "m", base_url="http://other/v1", headers={"X-Team": "a"})
    assert base != provider_key("openai", "m2", base_url="http://h/v1", headers={"X-Team": "a"})
    assert base != provider_key("openai", "m", base_url="http://h/v1", headers={"X-Team": "b"})
    a = RemoteEmbedder("openai", "m", api_key="k1", headers={"Authorization": "Bearer 1"})
    b = RemoteEmbedder("openai", "m", api_key="k2")
    assert a.provider_key == b.provider_key
    assert (
        RemoteEmbedder("gemini", "g", dimensions=768).provider_key
        != RemoteEmbedder("gemini", "g").provider_key
    )


# ---------------------------------------------------------------------------- selection


def settings(**values: Any) -> MemorySearchConfig:
    return MemorySearchConfig.model_validate(values)


def select(env: Mapping[str, str] | None = None, **values: Any) -> Any:
    return select_embedder(settings(**values), env or {})


def test_no_key_anywhere_is_fts_only_with_the_reason() -> None:
    selection = select()
    assert selection.embedder is None
    assert selection.mode == "fts-only" and selection.actual == "none"
    assert selection.reason == NO_KEY_REASON


@pytest.mark.parametrize(
    ("env", "provider", "model"),
    [
        ({"OPENAI_API_KEY": "k"}, "openai", "text-embedding-3-small"),
        ({"GEMINI_API_KEY": "k", "VOYAGE_API_KEY": "k"}, "gemini", "gemini-embedding-001"),
        ({"GOOGLE_API_KEY": "k"}, "gemini", "gemini-embedding-001"),
        ({"VOYAGE_API_KEY": "k", "MISTRAL_API_KEY": "k"}, "voyage", "voyage-4-large"),
        ({"MISTRAL_API_KEY": "k"}, "mistral", "mistral-embed"),
        ({"OPENAI_API_KEY": " ", "MISTRAL_API_KEY": "k"}, "mistral", "mistral-embed"),
    ],
)
def test_auto_takes_the_first_provider_with_a_key(env: dict[str, str], provider: str, model: str) -> None:
    selection = select(env)
    assert selection.actual == provider
    assert selection.embedder.model == model
    assert selection.requested == "auto" and selection.fallback_from is None


def test_auto_uses_remote_settings() -> None:
    selection = select(remote={"apiKey": "sk-cfg"}, model="text-embedding-3-large")
    assert (selection.actual, selection.embedder.model) == ("openai", "text-embedding-3-large")
    keyless = select(remote={"baseUrl": "http://127.0.0.1:9/v1"})
    assert keyless.actual == "openai-compatible"
    assert keyless.embedder.base_url == "http://127.0.0.1:9/v1"


def test_selected_endpoint_gets_the_configured_key_headers_and_model(openai_server: OpenAIServer) -> None:
    remote_cfg = {"baseUrl": openai_server.base_url, "apiKey": "sk-cfg", "headers": {"X-Org": "acme"}}
    selection = select({"OPENAI_API_KEY": "sk-env"}, provider="openai", model="my-embed", remote=remote_cfg)
    assert selection.actual == "openai"
    selection.embedder.embed_documents(["hello"])
    [request] = openai_server.embeddings.requests
    assert request.headers["authorization"] == "Bearer sk-cfg"  # remote.apiKey wins over the env
    assert request.headers["x-org"] == "acme"
    assert request.body["model"] == "my-embed"
    rotated = select({}, provider="openai", model="my-embed", remote={**remote_cfg, "apiKey": "sk-new"})
    assert rotated.embedder.provider_key == selection.embedder.provider_key


@pytest.mark.parametrize("variable", ["OPENAI_BASE_URL", "OPENAI_API_BASE"])
def test_auto_embeddings_go_where_chat_goes_when_the_environment_names_an_endpoint(
    openai_server: OpenAIServer, variable: str, tmp_path: Path
) -> None:
    """With OPENAI_API_KEY and a proxy in OPENAI_BASE_URL (or OPENAI_API_BASE), litellm sends chat to
    the proxy: memory text must not go to the public OpenAI host instead."""
    env = {"OPENAI_API_KEY": "sk-env", variable: openai_server.base_url}
    selection = select(env)
    assert selection.actual == "openai", selection.reason
    selection.embedder.embed_documents(["the spare anchor is in locker B"])
    [request] = openai_server.embeddings.requests
    assert request.headers["authorization"] == "Bearer sk-env"
    assert selection.embedder.endpoint == openai_server.base_url
    # The configured baseUrl still wins over the environment.
    configured = select(env, remote={"baseUrl": "http://127.0.0.1:9/v1"})
    assert configured.embedder.endpoint == "http://127.0.0.1:9/v1"
    # And status says where the vectors come from.
    workspace = tmp_path / "ws"
    (workspace / "memory").mkdir(parents=True)
    with MemoryIndex.open(
        "main", workspace, MemorySearchConfig(), state_dir=tmp_path / "state", env=env, watch=False
    ) as index:
        state = index.status()
    path = {"name": "none", "reason": "-"}
    assert state.endpoint == openai_server.base_url
    assert f"Endpoint: {openai_server.base_url}" in format_status(state, path, None)
    assert status_json(state, path, None)["endpoint"] == openai_server.base_url
    assert select({"OPENAI_API_KEY": "sk-env"}).embedder.endpoint == "https://api.openai.com/v1"


def test_mistral_request_reaches_the_server_with_its_key_and_model(openai_server: OpenAIServer) -> None:
    """MISTRAL_API_KEY and the endpoint from settings, as a user configures it; litellm makes the call."""
    selection = select(
        {"MISTRAL_API_KEY": "mk-env"}, provider="mistral", remote={"baseUrl": openai_server.base_url}
    )
    assert selection.actual == "mistral", selection.reason
    assert selection.embedder.model == "mistral-embed"
    documents = selection.embedder.embed_documents(["the spare anchor", "the tide table"])
    query = selection.embedder.embed_query("where is the anchor")

    sent = openai_server.embeddings.requests
    assert [r.path for r in sent] == ["/v1/embeddings", "/v1/embeddings"]
    assert [r.headers["authorization"] for r in sent] == ["Bearer mk-env"] * 2
    assert [(r.body["model"], r.body["input"]) for r in sent] == [
        ("mistral-embed", ["the spare anchor", "the tide table"]),
        ("mistral-embed", ["where is the anchor"]),
    ]
    assert not {"input_type", "task_type", "taskType"} & {k for r in sent for k in r.body}
    assert documents.shape == (2, 384) and selection.embedder.dims == 384
    np.testing.assert_allclose(documents[0], expected("the spare anchor"), atol=1e-6)
    np.testing.assert_allclose(documents[1], expected("the tide table"), atol=1e-6)
    np.testing.assert_allclose(query, expected("where is the anchor"), atol=1e-6)


def test_query_and_batch_timeouts_are_separate_and_come_from_config(openai_server: OpenAIServer) -> None:
    remote_cfg = {"baseUrl": openai_server.base_url, "timeoutSeconds": 0.3, "batchTimeoutSeconds": 5}
    embedder = select({}, provider="openai", remote=remote_cfg).embedder
    openai_server.embeddings.push(delay(1.0))
    rows = embedder.embed_documents(["indexing may take longer"])  # the batch timeout is 5 s
    assert rows.shape == (1, 384)

    openai_server.embeddings.push(delay(1.0))
    with pytest.raises(EmbeddingError, match="Timeout"):
        embedder.embed_query("when is the cutover")  # a search waits 0.3 s, not the batch's 5 s
    assert len(openai_server.embeddings.requests) == 2  # the timed-out query was not retried


def test_timeout_defaults_are_a_minute_for_queries_and_two_for_batches() -> None:
    embedder = select({"OPENAI_API_KEY": "k"}, provider="openai").embedder
    assert (embedder.timeout_s, embedder.batch_timeout_s) == (60.0, 120.0)


def test_auto_prefers_an_existing_local_model_file(tmp_path: Path) -> None:
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    selection = select({"OPENAI_API_KEY": "k"}, local={"modelPath": str(model)})
    assert selection.actual == "local" and selection.embedder.model == str(model)
    # hf: URIs and missing files are never picked automatically
    assert select({"OPENAI_API_KEY": "k"}, local={"modelPath": "hf:a/b/c.gguf"}).actual == "openai"
    assert select({}, local={"modelPath": str(tmp_path / "missing.gguf")}).embedder is None


def test_explicit_provider_without_key_is_fts_only() -> None:
    selection = select(provider="openai")
    assert selection.embedder is None and selection.requested == "openai"
    assert "No API key found for provider openai" in (selection.reason or "")
    assert "OPENAI_API_KEY" in (selection.reason or "")


def test_explicit_provider_falls_back_and_records_why() -> None:
    selection = select({"MISTRAL_API_KEY": "k"}, provider="voyage", fallback="mistral", model="voyage-3")
    assert selection.actual == "mistral"
    assert selection.embedder.model == "mistral-embed"  # the fallback's own default
    assert selection.fallback_from == "voyage"
    assert "No API key found for provider voyage" in (selection.reason or "")


def test_both_missing_keys_is_fts_only_with_both_reasons() -> None:
    selection = select(provider="voyage", fallback="mistral")
    assert selection.embedder is None
    assert "provider voyage" in (selection.reason or "")
    assert "Fallback to mistral failed: No API key found for provider mistral" in (selection.reason or "")


def test_local_setup_errors_raise_unless_a_fallback_works(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.gguf")
    with pytest.raises(EmbedderUnavailable, match="model file not found"):
        select(provider="local", local={"modelPath": missing})
    with pytest.raises(EmbedderUnavailable, match=r"(?s)model file not found.*Fallback to openai failed"):
        select(provider="local", fallback="openai", local={"modelPath": missing})
    selection = select(
        {"OPENAI_API_KEY": "k"}, provider="local", fallback="openai", local={"modelPath": missing}
    )
    assert selection.actual == "openai" and selection.fallback_from == "local"


def test_local_without_llama_cpp_says_how_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # what an install without the extra looks like
    for provider in ("local", "auto"):  # a configured model file makes auto insist on local
        with pytest.raises(
            EmbedderUnavailable, match=r"(?s)Local embeddings unavailable.*sessionmem\[local\]"
        ):
            select({"OPENAI_API_KEY": "k"}, provider=provider, local={"modelPath": str(model)})


def test_provider_none_and_disabled() -> None:
    assert select({"OPENAI_API_KEY": "k"}, provider="none").embedder is None
    assert select({"OPENAI_API_KEY": "k"}, enabled=False).embedder is None


def test_selection_loads_nothing_until_the_first_embed(tmp_path: Path) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not a model")
    selection = select(provider="local", local={"modelPath": str(broken)})  # loading it would fail here
    assert selection.actual == "local"
    assert selection.embedder.max_input_tokens == 512  # unreadable header: the safe default
    if _has_llama():
        with pytest.raises(EmbeddingError, match=r"could not load broken\.gguf"):
            selection.embedder.embed_query("x")


def _has_llama() -> bool:
    import importlib.util

    return importlib.util.find_spec("llama_cpp") is not None


# ---------------------------------------------------------------------------- local model


def test_hf_uri_parsing() -> None:
    assert parse_hf_uri("hf:ggml-org/embeddinggemma-300M-GGUF/embeddinggemma-300M-Q8_0.gguf") == (
        "ggml-org/embeddinggemma-300M-GGUF",
        "embeddinggemma-300M-Q8_0.gguf",
    )
    assert parse_hf_uri("hf:o/r/sub/dir/m.gguf") == ("o/r", "sub/dir/m.gguf")
    for bad in ("hf:o/r", "hf:o/r/readme.md", "o/r/m.gguf"):
        with pytest.raises(EmbedderUnavailable, match=r"hf:owner/repo/file\.gguf|not an hf"):
            parse_hf_uri(bad)


def test_hf_download_failure_says_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(EmbedderUnavailable, match=r"could not download m\.gguf .*modelPath"):
        resolve_model_path("hf:nobody/no-such-repo/m.gguf", cache_dir=str(tmp_path))
    with pytest.raises(EmbedderUnavailable, match="URLs are not supported"):
        resolve_model_path("https://example.com/m.gguf")


def test_missing_llama_cpp_gives_the_install_hint(gguf_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # what an install without the extra looks like
    embedder = LocalEmbedder(str(gguf_model))
    for _ in range(2):  # the failure is remembered, and said the same way each time
        with pytest.raises(EmbeddingError, match=r"pip install 'sessionmem\[local\]'"):
            embedder.embed_query("x")


HF_REPO, HF_FILE = "acme/minilm-gguf", "all-MiniLM-L6-v2.Q8_0.gguf"
HF_REVISION = "0123456789abcdef0123456789abcdef01234567"

_EMBED_IN_A_FRESH_PROCESS = """
import json, os, sys
from sessionmem.cli.output import format_status, status_json
from sessionmem.config import MemorySearchConfig
from sessionmem.memory.embed.choice import select_embedder
from sessionmem.memory.embed.local_gguf import resolve_model_path

settings = MemorySearchConfig.model_validate({"provider": "local", "local": {"modelPath": sys.argv[1]}})
selection = select_embedder(settings, dict(os.environ))
embedder = selection.embedder
dims_before_loading = embedder.dims
vector = embedder.embed_query(sys.argv[2])
print(json.dumps({
    "actual": selection.actual, "model": embedder.model, "dims": dims_before_loading,
    "path": str(resolve_model_path(sys.argv[1])), "vector": [float(x) for x in vector],
}))
"""


def prefilled_hf_cache(hub: Path, model: Path) -> Path:
    """huggingface_hub's cache layout for one file of ``HF_REPO`` at ``HF_REVISION``, on ``main``:
    ``models--owner--repo/{blobs/<sha256>, snapshots/<rev>/<file> -> ../../blobs/<sha256>, refs/main}``.
    Returns the snapshot file."""
    repo = hub / f"models--{HF_REPO.replace('/', '--')}"
    digest = hashlib.sha256(model.read_bytes()).hexdigest()
    (repo / "blobs").mkdir(parents=True)
    (repo / "blobs" / digest).symlink_to(model)
    snapshot = repo / "snapshots" / HF_REVISION / HF_FILE
    snapshot.parent.mkdir(parents=True)
    snapshot.symlink_to(Path("..") / ".." / "blobs" / digest)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(HF_REVISION, encoding="utf-8")
    return snapshot


@pytest.mark.local_model
def test_hf_uri_resolves_offline_from_a_prefilled_cache(
    tmp_path: Path, gguf_model: Path, minilm: LocalEmbedder
) -> None:
    """``local.modelPath: hf:owner/repo/file.gguf`` with the file already in HF_HOME's cache and
    HF_HUB_OFFLINE=1: no download, the cached file loads and embeds. huggingface_hub reads these
    variables when imported, so this runs in a fresh interpreter, as a user's command would."""
    home = tmp_path / "hf-home"
    snapshot = prefilled_hf_cache(home / "hub", gguf_model)
    env = dict(os.environ)
    env.update(
        HF_HOME=str(home),
        HF_HUB_CACHE=str(home / "hub"),
        HF_HUB_OFFLINE="1",
        PYTHONPATH=str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", ""),
    )
    uri, text = f"hf:{HF_REPO}/{HF_FILE}", "where is the spare anchor"
    proc = subprocess.run(
        [sys.executable, "-c", _EMBED_IN_A_FRESH_PROCESS, uri, text],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (answer["actual"], answer["model"]) == ("local", uri)
    assert answer["dims"] == 384  # read from the cached file's header before loading
    assert Path(answer["path"]) == snapshot
    vector = np.asarray(answer["vector"], dtype=np.float32)
    np.testing.assert_allclose(
        vector, minilm.embed_query(text), atol=1e-5
    )  # the same model as the file given by path


@pytest.fixture(scope="module")
def minilm(request: pytest.FixtureRequest) -> LocalEmbedder:
    path = request.getfixturevalue("gguf_model")
    return LocalEmbedder(str(path))


@pytest.mark.local_model
def test_gguf_header_gives_facts_without_loading(gguf_model: Path) -> None:
    meta = read_gguf_metadata(gguf_model)
    assert meta["general.architecture"] == "bert"
    assert meta["bert.context_length"] == 512
    fresh = LocalEmbedder(str(gguf_model))
    assert (fresh.dims, fresh.max_input_tokens, fresh.provider, fresh.model) == (
        384,
        512,
        "local",
        str(gguf_model),
    )
    assert isinstance(fresh, Embedder)


@pytest.mark.local_model
def test_first_local_embedding_does_not_crash_the_process(gguf_model: Path) -> None:
    # In a child process: on CPUs with AMX, llama.cpp's repacked (extra) weight buffers made the first
    # embedding die with SIGSEGV, which would take the whole test run down with it.
    script = (
        "import sys\n"
        "from sessionmem.memory.embed.local_gguf import LocalEmbedder\n"
        "embedder = LocalEmbedder(sys.argv[1])\n"
        "vector = embedder.embed_query('the billing cutover is on the first of December')\n"
        "print(len(vector))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(gguf_model)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
    assert done.stdout.split() == ["384"]


@pytest.mark.local_model
def test_local_vectors_are_normalised_and_meaningful(minilm: LocalEmbedder) -> None:
    texts = [
        "The billing cutover to the new invoicing platform happens on March 14.",
        "We move customers to the new billing system in mid March.",
        "Tomatoes need more sun; move the pots to the balcony.",
    ]
    vectors = minilm.embed_documents(texts)
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.2
    query = minilm.embed_query("when is the billing cutover")
    assert int(np.argmax(vectors @ query)) in (0, 1)


@pytest.mark.local_model
def test_local_batch_equals_single(minilm: LocalEmbedder) -> None:
    texts = ["short", "a somewhat longer sentence about memory search", "日本語のメモ", "x " * 200]
    batch = minilm.embed_documents(texts)
    singles = np.stack([minilm.embed_query(t) for t in texts])
    # Q8 kernels round differently with batch shape; what matters is the direction (cosine).
    cosines = np.sum(batch * singles, axis=1)
    assert cosines.min() > 0.999, cosines


@pytest.mark.local_model
def test_local_long_and_empty_input_do_not_crash(minilm: LocalEmbedder) -> None:
    paragraph = (
        "The staging Kubernetes cluster was upgraded to the new release. The ingress certificates were "
        "renewed and the load balancer health checks pass again. Node pools were drained one at a time. "
    )
    long_text = paragraph * 40  # ~1,700 word pieces, far past the 512-token context
    vectors = minilm.embed_documents(
        [long_text, "", "kubernetes cluster upgrade and certificate renewal", "tomatoes need more sun"]
    )
    assert np.isfinite(vectors).all()
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[2] > vectors[0] @ vectors[3] + 0.2  # still about what it says


@pytest.mark.local_model
def test_local_embedder_is_thread_safe(minilm: LocalEmbedder) -> None:
    texts = [f"note number {i} about the deploy" for i in range(12)]
    expected_rows = minilm.embed_documents(texts)
    results: dict[int, np.ndarray] = {}

    def work(k: int) -> None:
        results[k] = minilm.embed_documents(texts)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for rows in results.values():
        np.testing.assert_allclose(rows, expected_rows, atol=1e-5)


@pytest.mark.local_model
def test_local_progress_reports_every_text(minilm: LocalEmbedder) -> None:
    seen: list[int] = []
    minilm.embed_documents([f"t{i}" for i in range(40)], progress=seen.append)
    assert sum(seen) == 40 and len(seen) >= 3
