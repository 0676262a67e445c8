"""A loopback OpenAI-compatible HTTP server for tests: litellm talks to it over real HTTP.

It speaks ``POST /v1/chat/completions`` (plain JSON, or SSE when ``stream: true``) and
``POST /v1/embeddings`` (any path ending in those suffixes works, so ``api_base`` may or may not
end in ``/v1``), plus Gemini's ``:batchEmbedContents``/``:embedContent`` and Ollama's ``/api/embed``
so litellm's ``gemini/`` and ``ollama/`` embedding routes can be pointed at it too.

Each endpoint answers from a queue of scripted replies first, then from its ``handler``
(``fn(body) -> reply``; returning ``None`` falls through), then from a deterministic default.
Every request is recorded.

Use (the ``openai_server`` fixture is registered in ``tests/conftest.py``)::

    from tests.support.openai_server import (
        context_length_error, delay, embedding_reply, http_error, rate_limit, raw_reply, server_error,
        text_reply, tool_call_reply,
    )

    def test_something(openai_server):
        import litellm

        openai_server.chat.push(text_reply("hello", prompt_tokens=120, completion_tokens=3))
        openai_server.chat.push(tool_call_reply([("memory_search", {"query": "billing"})]))
        openai_server.chat.push(rate_limit())                  # 429
        openai_server.chat.push(server_error(503))             # or http_error(status, message)
        openai_server.chat.push(context_length_error())        # 400 context_length_exceeded
        openai_server.chat.push(delay(2.0, text_reply("late")))  # for timeouts
        openai_server.embeddings.push(raw_reply(b"<html>502</html>"))  # a body that is not JSON
        openai_server.chat.handler = lambda body: text_reply("from a function")

        litellm.completion(model="openai/test-model", api_base=openai_server.base_url,
                           api_key="sk-test", messages=[{"role": "user", "content": "hi"}])
        assert openai_server.chat.requests[0].body["model"] == "test-model"
        assert openai_server.chat.requests[0].headers["authorization"] == "Bearer sk-test"

        openai_server.embeddings.dims = 384           # default hashed bag-of-words vectors
        openai_server.embeddings.corrupt = "nan"      # or "zero", "wrong_dims", "wrong_count"
        openai_server.embeddings.push(embedding_reply([[0.1, 0.2]]))

A reply is a :class:`Reply` (status, JSON body, headers, delay). ``push`` also accepts a plain
``str`` (chat: assistant text), a ``dict`` (sent as the 200 JSON body as is) or, for embeddings, a
list of vectors. litellm's own retries are the OpenAI SDK's: pass ``max_retries=0`` to
``litellm.completion`` when a test counts requests after an error. (``litellm.embedding`` turns
``max_retries=0`` into 2; ``sessionmem.memory.embed.remote`` works around that.) litellm 1.106
imports its MCP gateway whenever ``tools`` are passed; add ``_skip_mcp_handler=True``.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import math
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

DEFAULT_DIMS = 384

# ---------------------------------------------------------------------------- replies


@dataclass
class Reply:
    """One HTTP answer: status, JSON body, extra headers, and a delay before answering."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    fill_prompt_tokens: bool = False  # compute usage.prompt_tokens from the request's messages
    use_default: bool = False  # answer with the endpoint's default (after ``delay_s``)
    stream: list[dict[str, Any]] | None = None  # the SSE chunks to send to a streaming request, as given
    raw: bytes | None = None  # sent as the body as is (not JSON), with ``headers`` (a content-type)


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def _completion(
    message: dict[str, Any],
    finish_reason: str,
    prompt_tokens: int,
    completion_tokens: int,
    model: str = "test-model",
) -> dict[str, Any]:
    return {
        "id": "chatcmpl-" + hashlib.sha1(json.dumps(message, sort_keys=True).encode()).hexdigest()[:12],
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": usage(prompt_tokens, completion_tokens),
    }


def text_reply(text: str, *, prompt_tokens: int | None = None, completion_tokens: int | None = None) -> Reply:
    """An assistant text reply. Token counts left as ``None`` are computed from the request."""
    body = _completion(
        {"role": "assistant", "content": text},
        "stop",
        prompt_tokens or 0,
        completion_tokens if completion_tokens is not None else _count(text),
    )
    return Reply(body=body, fill_prompt_tokens=prompt_tokens is None)


def tool_call_reply(
    calls: Sequence[tuple[str, dict[str, Any]] | dict[str, Any]],
    *,
    text: str | None = None,
    prompt_tokens: int | None = None,
    completion_tokens: int | None = None,
) -> Reply:
    """An assistant turn calling tools: ``[(name, arguments), ...]`` or OpenAI ``tool_calls`` dicts."""
    tool_calls: list[dict[str, Any]] = []
    for i, call in enumerate(calls):
        if isinstance(call, tuple):
            name, arguments = call
            tool_calls.append(
                {
                    "id": f"call_{i}_{name}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(arguments)},
                }
            )
        else:
            tool_calls.append(call)
    message = {"role": "assistant", "content": text, "tool_calls": tool_calls}
    body = _completion(
        message,
        "tool_calls",
        prompt_tokens or 0,
        completion_tokens if completion_tokens is not None else _count(json.dumps(tool_calls)),
    )
    return Reply(body=body, fill_prompt_tokens=prompt_tokens is None)


def http_error(
    status: int,
    message: str,
    *,
    type_: str = "server_error",
    code: str | None = None,
    param: str | None = None,
    headers: dict[str, str] | None = None,
) -> Reply:
    """An error in OpenAI's shape: ``{"error": {"message", "type", "param", "code"}}``."""
    body = {"error": {"message": message, "type": type_, "param": param, "code": code}}
    return Reply(status=status, body=body, headers=dict(headers or {}))


def rate_limit(message: str = "Rate limit reached for requests. Please try again in 20ms.") -> Reply:
    return http_error(429, message, type_="requests", code="rate_limit_exceeded")


def server_error(
    status: int = 500, message: str = "The server had an error while processing your request."
) -> Reply:
    return http_error(status, message, type_="server_error")


def context_length_error(limit: int = 8192, used: int = 9000) -> Reply:
    """Exactly what OpenAI returns when the prompt is over the context window."""
    message = (
        f"This model's maximum context length is {limit} tokens. However, your messages resulted in "
        f"{used} tokens. Please reduce the length of the messages."
    )
    return http_error(
        400, message, type_="invalid_request_error", code="context_length_exceeded", param="messages"
    )


def empty_stream() -> Reply:
    """A server that answers ``stream: true`` with no chunk at all (only ``data: [DONE]``), and a
    non-streamed request with an empty assistant message."""
    return dataclasses.replace(text_reply("", completion_tokens=0), stream=[])


def raw_reply(body: bytes, *, status: int = 200, content_type: str = "text/html; charset=utf-8") -> Reply:
    """A body that is not JSON (a proxy's error page, a truncated answer), sent as is."""
    return Reply(status=status, raw=body, headers={"content-type": content_type})


def delay(seconds: float, reply: Reply | str | None = None) -> Reply:
    """``reply`` (default: the endpoint's default answer) sent after ``seconds``."""
    if reply is None:
        return Reply(delay_s=seconds, use_default=True)
    base = reply if isinstance(reply, Reply) else text_reply(reply)
    return dataclasses.replace(base, delay_s=seconds)


def embedding_reply(
    vectors: list[list[float]], *, model: str = "test-embedding", prompt_tokens: int = 0
) -> Reply:
    body = {
        "object": "list",
        "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)],
        "model": model,
        "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens},
    }
    return Reply(body=body)


# ---------------------------------------------------------------------------- deterministic defaults

_WORD = re.compile(r"\w+", re.UNICODE)


def _count(text: str) -> int:
    """A token count for usage figures: tiktoken when available (offline), else words."""
    if not text:
        return 0
    try:
        from sessionmem.tokens import count_tokens

        return count_tokens(text)
    except Exception:  # pragma: no cover - only without tiktoken files
        return len(_WORD.findall(text))


def count_message_tokens(messages: list[dict[str, Any]]) -> int:
    """Prompt tokens as the server reports them: content tokens plus 4 per message."""
    total = 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            content = " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
        total += 4 + _count(content or "")
        if message.get("tool_calls"):
            total += _count(json.dumps(message["tool_calls"]))
    return total


def hashed_vector(text: str, dims: int = DEFAULT_DIMS) -> list[float]:
    """A deterministic unit vector: lower-cased words hashed into ``dims`` buckets (bag of words).

    Texts sharing words get a positive cosine, so search tests can reason about rankings.
    """
    vec = [0.0] * dims
    for word in _WORD.findall(text.lower()) or [text]:
        digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
        bucket = int.from_bytes(digest[:4], "little") % dims
        vec[bucket] += 1.0 if digest[4] & 1 else -1.0
    norm = math.sqrt(sum(x * x for x in vec))
    if norm == 0.0:
        vec[0] = 1.0
        return vec
    return [x / norm for x in vec]


# ---------------------------------------------------------------------------- endpoints


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]  # lower-cased names
    body: Any


ReplyLike = Reply | str | dict[str, Any] | list[Any]
Handler = Callable[[Any], ReplyLike | None]


class Endpoint:
    """Scripted replies (a FIFO queue), then ``handler``, then the default answer."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.handler: Handler | None = None
        self.requests: list[RecordedRequest] = []
        self._queue: deque[ReplyLike] = deque()
        self._lock = threading.Lock()

    def push(self, *replies: ReplyLike) -> None:
        with self._lock:
            self._queue.extend(replies)

    @property
    def pending(self) -> int:
        return len(self._queue)

    def _next(self, body: Any) -> Reply | None:
        with self._lock:
            scripted = self._queue.popleft() if self._queue else None
        if scripted is None and self.handler is not None:
            scripted = self.handler(body)
        return None if scripted is None else self._coerce(scripted)

    def _coerce(self, reply: ReplyLike) -> Reply:
        if isinstance(reply, Reply):
            return reply
        if isinstance(reply, dict):
            return Reply(body=reply)
        raise TypeError(f"{self.name}: cannot send {type(reply).__name__} as a reply")


class ChatEndpoint(Endpoint):
    def __init__(self) -> None:
        super().__init__("chat")

    def _coerce(self, reply: ReplyLike) -> Reply:
        if isinstance(reply, str):
            return text_reply(reply)
        return super()._coerce(reply)

    def default(self, body: dict[str, Any]) -> Reply:
        """Echo the last user message, deterministically."""
        messages = body.get("messages") or []
        last = next((m for m in reversed(messages) if m.get("role") == "user"), None)
        content = last.get("content") if last else ""
        if isinstance(content, list):
            content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        return text_reply(f"echo: {content}")


class EmbeddingsEndpoint(Endpoint):
    """Default: :func:`hashed_vector` of each input, ``dims`` wide, optionally corrupted."""

    def __init__(self) -> None:
        super().__init__("embeddings")
        self.dims = DEFAULT_DIMS
        self.corrupt: str | None = None  # None | "nan" | "zero" | "wrong_dims" | "wrong_count"

    def _coerce(self, reply: ReplyLike) -> Reply:
        if isinstance(reply, list):
            return embedding_reply(reply)
        return super()._coerce(reply)

    def default(self, body: dict[str, Any]) -> Reply:
        texts = embedding_inputs(body)
        vectors = [hashed_vector(str(t), self.dims) for t in texts]
        if self.corrupt == "nan" and vectors:
            vectors[-1][0] = float("nan")
        elif self.corrupt == "zero" and vectors:
            vectors[-1] = [0.0] * self.dims
        elif self.corrupt == "wrong_dims" and vectors:
            vectors[-1] = vectors[-1][: self.dims // 2]
        elif self.corrupt == "wrong_count" and vectors:
            vectors = vectors[:-1]
        tokens = sum(_count(str(t)) for t in texts)
        return embedding_reply(vectors, model=str(body.get("model", "test-embedding")), prompt_tokens=tokens)


def embedding_inputs(body: dict[str, Any]) -> list[str]:
    """The texts of an embeddings request: OpenAI/Ollama ``input``, or Gemini ``requests``/``content``."""
    if "requests" in body:  # Gemini batchEmbedContents
        return [" ".join(p.get("text", "") for p in r["content"]["parts"]) for r in body["requests"]]
    if "content" in body:  # Gemini embedContent
        return [" ".join(p.get("text", "") for p in body["content"]["parts"])]
    inputs = body.get("input")
    return [inputs] if isinstance(inputs, str) else [str(t) for t in inputs or []]


def _as_flavor(flavor: str, body: Any) -> Any:
    """An OpenAI embeddings body rewritten in the Gemini or Ollama response shape."""
    if flavor == "openai" or not isinstance(body, dict) or "data" not in body:
        return body
    vectors = [row["embedding"] for row in body["data"]]
    if flavor == "gemini-batch":
        return {"embeddings": [{"values": v} for v in vectors]}
    if flavor == "gemini":
        return {"embedding": {"values": vectors[0] if vectors else []}}
    return {
        "model": body.get("model"),
        "embeddings": vectors,  # ollama /api/embed
        "prompt_eval_count": (body.get("usage") or {}).get("prompt_tokens", 0),
    }


# ---------------------------------------------------------------------------- the server


class OpenAIServer:
    """The server running in a background thread on 127.0.0.1 (a free port)."""

    def __init__(self) -> None:
        self.chat = ChatEndpoint()
        self.embeddings = EmbeddingsEndpoint()
        self.requests: list[RecordedRequest] = []
        self._stop = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="openai-server", daemon=True)

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> OpenAIServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()  # wakes delayed replies
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- request handling (runs in the server's threads)

    def _endpoint(self, path: str) -> tuple[Endpoint, str] | None:
        """The endpoint for ``path`` and the response flavor (OpenAI, Gemini or Ollama shape)."""
        clean = path.split("?", 1)[0].rstrip("/")
        if clean.endswith("/chat/completions"):
            return self.chat, "openai"
        if clean.endswith("/embeddings"):
            return self.embeddings, "openai"
        if clean.endswith(":batchEmbedContents"):
            return self.embeddings, "gemini-batch"
        if clean.endswith(":embedContent"):
            return self.embeddings, "gemini"
        if clean.endswith("/api/embed"):
            return self.embeddings, "ollama"
        return None

    def _answer(self, endpoint: Endpoint, body: Any) -> Reply:
        body_messages = body.get("messages") or []
        reply = endpoint._next(body)
        if reply is not None and reply.delay_s > 0:
            self._stop.wait(reply.delay_s)
        if reply is None or reply.use_default:
            assert isinstance(endpoint, ChatEndpoint | EmbeddingsEndpoint)
            reply = endpoint.default(body)
        if reply.fill_prompt_tokens and isinstance(reply.body, dict):
            body = copy.deepcopy(reply.body)
            prompt = count_message_tokens(body_messages)
            body["usage"]["prompt_tokens"] = prompt
            body["usage"]["total_tokens"] = prompt + body["usage"].get("completion_tokens", 0)
            reply = dataclasses.replace(reply, body=body, fill_prompt_tokens=False)
        return reply


def _make_handler(server: OpenAIServer) -> type[BaseHTTPRequestHandler]:
    class _Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                self._send_json(200, {"object": "list", "data": [{"id": "test-model", "object": "model"}]})
            else:
                self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw or b"null")
            except json.JSONDecodeError:
                body = raw.decode("utf-8", "replace")
            recorded = RecordedRequest(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
            server.requests.append(recorded)
            route = server._endpoint(self.path)
            if route is None:
                self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                return
            endpoint, flavor = route
            endpoint.requests.append(recorded)
            try:
                reply = server._answer(endpoint, body if isinstance(body, dict) else {})
            except Exception as exc:  # a broken test handler shows up as a 500 the test can see
                reply = server_error(500, f"test handler failed: {exc!r}")
            streaming = isinstance(body, dict) and body.get("stream") and endpoint is server.chat
            if reply.raw is not None:
                self._send_raw(reply.status, reply.raw, reply.headers)
            elif streaming and reply.status == 200:
                self._send_sse(
                    iter(reply.stream) if reply.stream is not None else _stream_chunks(reply.body, body)
                )
            else:
                payload = _as_flavor(flavor, reply.body) if reply.status == 200 else reply.body
                self._send_json(reply.status, payload, reply.headers)

        def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
            self._send_raw(
                status,
                json.dumps(payload).encode("utf-8"),
                {"content-type": "application/json", **(headers or {})},
            )

        def _send_raw(self, status: int, data: bytes, headers: dict[str, str]) -> None:
            try:
                self.send_response(status)
                self.send_header("content-length", str(len(data)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
                pass

        def _send_sse(self, chunks: Iterator[dict[str, Any]]) -> None:
            try:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("connection", "close")
                self.end_headers()
                for chunk in chunks:
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass
            self.close_connection = True

    return _Handler


def _stream_chunks(completion: dict[str, Any], request: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The completion cut into OpenAI ``chat.completion.chunk`` events (text in word pieces)."""
    choice = completion["choices"][0]
    message = choice["message"]
    base = {
        "id": completion["id"],
        "object": "chat.completion.chunk",
        "created": completion["created"],
        "model": completion["model"],
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    yield chunk({"role": "assistant", "content": ""})
    for piece in re.findall(r"\S+\s*|\s+", message.get("content") or ""):
        yield chunk({"content": piece})
    for i, call in enumerate(message.get("tool_calls") or []):
        yield chunk(
            {
                "tool_calls": [
                    {
                        "index": i,
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": call["function"]["name"], "arguments": ""},
                    }
                ]
            }
        )
        yield chunk({"tool_calls": [{"index": i, "function": {"arguments": call["function"]["arguments"]}}]})
    yield chunk({}, choice["finish_reason"])
    if (request.get("stream_options") or {}).get("include_usage"):
        yield {**base, "choices": [], "usage": completion["usage"]}


@pytest.fixture
def openai_server() -> Iterator[OpenAIServer]:
    """A fresh loopback OpenAI-compatible server per test."""
    with OpenAIServer() as server:
        yield server
