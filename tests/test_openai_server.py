"""litellm really talks to the loopback server: text, tool calls, streaming, embeddings, errors."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from sessionmem.tokens import configure_litellm_environment
from tests.support.openai_server import (
    OpenAIServer,
    context_length_error,
    delay,
    embedding_reply,
    rate_limit,
    server_error,
    text_reply,
    tool_call_reply,
)


@pytest.fixture(scope="module")
def litellm() -> Any:
    configure_litellm_environment()
    import litellm

    return litellm


def _complete(litellm: Any, server: OpenAIServer, **kwargs: Any) -> Any:
    kwargs.setdefault("messages", [{"role": "user", "content": "hello there"}])
    return litellm.completion(
        model="openai/test-model", api_base=server.base_url, api_key="sk-test", max_retries=0, **kwargs
    )


def test_default_chat_echoes_with_usage_and_records_the_request(
    litellm: Any, openai_server: OpenAIServer
) -> None:
    reply = _complete(litellm, openai_server)
    assert reply.choices[0].message.content == "echo: hello there"
    assert reply.usage.prompt_tokens > 4
    assert reply.usage.completion_tokens > 0
    [request] = openai_server.chat.requests
    assert request.path.endswith("/v1/chat/completions")
    assert request.body["model"] == "test-model"
    assert request.body["messages"][0]["content"] == "hello there"
    assert request.headers["authorization"] == "Bearer sk-test"


def test_scripted_text_then_handler(litellm: Any, openai_server: OpenAIServer) -> None:
    openai_server.chat.push(text_reply("first", prompt_tokens=1234, completion_tokens=5))
    openai_server.chat.handler = lambda body: f"handled {len(body['messages'])}"
    first = _complete(litellm, openai_server)
    second = _complete(litellm, openai_server)
    assert first.choices[0].message.content == "first"
    assert (first.usage.prompt_tokens, first.usage.completion_tokens) == (1234, 5)
    assert second.choices[0].message.content == "handled 1"


def test_tool_calls_reach_litellm(litellm: Any, openai_server: OpenAIServer) -> None:
    openai_server.chat.push(tool_call_reply([("memory_search", {"query": "billing cutover"})]))
    tools = [{"type": "function", "function": {"name": "memory_search", "parameters": {"type": "object"}}}]
    # litellm 1.106 imports its MCP gateway (needs the optional `mcp` package) whenever tools are
    # passed; `_skip_mcp_handler=True` skips that import. The chat adapter must pass it too.
    reply = _complete(litellm, openai_server, tools=tools, _skip_mcp_handler=True)
    [call] = reply.choices[0].message.tool_calls
    assert call.function.name == "memory_search"
    assert json.loads(call.function.arguments) == {"query": "billing cutover"}
    assert reply.choices[0].finish_reason == "tool_calls"
    assert openai_server.chat.requests[0].body["tools"][0]["function"]["name"] == "memory_search"


def test_streaming_text_and_tool_calls(litellm: Any, openai_server: OpenAIServer) -> None:
    openai_server.chat.push(text_reply("one two three"))
    chunks = list(_complete(litellm, openai_server, stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "one two three"

    openai_server.chat.push(tool_call_reply([("memory_get", {"path": "MEMORY.md"})]))
    chunks = list(_complete(litellm, openai_server, stream=True))
    built = litellm.stream_chunk_builder(chunks)
    [call] = built.choices[0].message.tool_calls
    assert call.function.name == "memory_get"
    assert json.loads(call.function.arguments) == {"path": "MEMORY.md"}


def test_context_length_error_is_litellms_context_window_error(
    litellm: Any, openai_server: OpenAIServer
) -> None:
    openai_server.chat.push(context_length_error())
    with pytest.raises(litellm.ContextWindowExceededError) as info:
        _complete(litellm, openai_server)
    assert "maximum context length is 8192 tokens" in str(info.value)
    assert info.value.status_code == 400


def test_rate_limit_and_server_errors(litellm: Any, openai_server: OpenAIServer) -> None:
    openai_server.chat.push(rate_limit(), server_error(500))
    with pytest.raises(litellm.RateLimitError):
        _complete(litellm, openai_server)
    with pytest.raises(litellm.InternalServerError):
        _complete(litellm, openai_server)
    assert len(openai_server.chat.requests) == 2  # max_retries=0: one request each


def test_delay_makes_a_timeout(litellm: Any, openai_server: OpenAIServer) -> None:
    openai_server.chat.push(delay(3.0, "late"))
    with pytest.raises(litellm.Timeout):  # without the timeout the call would get "late"
        _complete(litellm, openai_server, timeout=0.3)


def test_embeddings_default_hashed_vectors(litellm: Any, openai_server: OpenAIServer) -> None:
    response = litellm.embedding(
        model="openai/text-embedding-3-small",
        input=["billing cutover on friday", "billing cutover friday", "a cat sat"],
        api_base=openai_server.base_url,
        api_key="sk-test",
    )
    vectors = [row["embedding"] for row in response.data]
    assert [len(v) for v in vectors] == [384, 384, 384]
    assert all(math.isclose(math.sqrt(sum(x * x for x in v)), 1.0, rel_tol=1e-6) for v in vectors)

    def cos(a: list[float], b: list[float]) -> float:
        return sum(x * y for x, y in zip(a, b, strict=True))

    assert cos(vectors[0], vectors[1]) > cos(vectors[0], vectors[2])
    assert openai_server.embeddings.requests[0].body["input"][0] == "billing cutover on friday"


def test_embeddings_scripted_and_corrupted(litellm: Any, openai_server: OpenAIServer) -> None:
    def embed(texts: list[str]) -> list[list[float]]:
        response = litellm.embedding(
            model="openai/e", input=texts, api_base=openai_server.base_url, api_key="k"
        )
        return [row["embedding"] for row in response.data]

    openai_server.embeddings.push(embedding_reply([[1.0, 0.0]]))
    assert embed(["x"]) == [[1.0, 0.0]]
    openai_server.embeddings.dims = 8
    openai_server.embeddings.corrupt = "zero"
    assert embed(["a", "b"])[1] == [0.0] * 8
    openai_server.embeddings.corrupt = "wrong_dims"
    assert [len(v) for v in embed(["a", "b"])] == [8, 4]


@pytest.mark.parametrize(
    ("model", "extra"),
    [
        ("gemini/gemini-embedding-001", {"task_type": "RETRIEVAL_DOCUMENT"}),
        ("ollama/nomic-embed-text", {}),
        ("voyage/voyage-4-large", {"input_type": "document"}),
    ],
)
def test_other_providers_embedding_routes(
    litellm: Any, openai_server: OpenAIServer, model: str, extra: dict[str, Any]
) -> None:
    response = litellm.embedding(
        model=model, input=["alpha beta", "gamma"], api_base=openai_server.base_url, api_key="k", **extra
    )
    assert [len(row["embedding"]) for row in response.data] == [384, 384]
    [request] = openai_server.embeddings.requests
    if model.startswith("gemini/"):
        assert request.path.endswith(":batchEmbedContents")
        assert request.body["requests"][0]["taskType"] == "RETRIEVAL_DOCUMENT"
    elif model.startswith("voyage/"):
        assert request.body["input_type"] == "document"
