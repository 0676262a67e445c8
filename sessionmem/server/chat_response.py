"""What the gateway answers, in OpenAI's shapes: a chat completion, its stream's chunks, the models.

Pure: values in, JSON-ready dicts (and server-sent event lines) out. ``usage`` is in every response:
the completion's, and the stream's last chunk (the one with ``finish_reason``), plus, when the client
asked ``stream_options.include_usage``, the extra chunk with no choices OpenAI sends then. The usage is
the turn's own model calls (its tool loop included; the silent flush and compaction are the gateway's).
A silent turn (the model answered ``NO_REPLY``) is an empty ``content``, never the token.

A turn suspended on the client's own tools answers with their ``tool_calls`` and ``finish_reason:
"tool_calls"`` (``content`` null unless the model wrote text before calling them); streamed, each call is
one delta in OpenAI's shape (``index``, ``id``, ``type``, ``function`` with its whole ``arguments``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import Any

import orjson

from sessionmem.messages import Message, ToolCall, Usage

DONE = b"data: [DONE]\n\n"
OWNER = "sessionmem"


def completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex[:24]}"


def usage_json(usage: Usage) -> dict[str, int]:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.output,
        "total_tokens": usage.total_tokens,
    }


def tool_calls_json(calls: Sequence[ToolCall]) -> list[dict[str, Any]]:
    """``calls`` as an assistant message's ``tool_calls`` (the transcript's own spelling of them)."""
    return list(Message.assistant(tool_calls=tuple(calls)).to_openai()["tool_calls"]) if calls else []


def finish_reason(calls: Sequence[ToolCall]) -> str:
    return "tool_calls" if calls else "stop"


def completion(
    model: str,
    reply: str | None,
    usage: Usage,
    *,
    id: str | None = None,
    tool_calls: Sequence[ToolCall] = (),
) -> dict[str, Any]:
    """A ``chat.completion`` with one choice: the reply, or the client's tool calls (``tool_calls``)."""
    message: dict[str, Any] = {"role": "assistant", "content": reply or ""}
    if tool_calls:
        message = {"role": "assistant", "content": reply or None, "tool_calls": tool_calls_json(tool_calls)}
    return {
        "id": id or completion_id(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": finish_reason(tool_calls),
                "logprobs": None,
            }
        ],
        "usage": usage_json(usage),
    }


def tool_call_deltas(calls: Sequence[ToolCall]) -> list[dict[str, Any]]:
    """The stream's deltas for ``calls``: one per call, with its ``index``, as OpenAI streams them."""
    return [{"tool_calls": [{"index": at, **call}]} for at, call in enumerate(tool_calls_json(calls))]


def chunk(
    id: str,
    model: str,
    created: int,
    delta: dict[str, Any],
    *,
    finish_reason: str | None = None,
    usage: Usage | None = None,
) -> dict[str, Any]:
    """A ``chat.completion.chunk`` with one choice (``delta``)."""
    body: dict[str, Any] = {
        "id": id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}],
    }
    if usage is not None:
        body["usage"] = usage_json(usage)
    return body


def usage_chunk(id: str, model: str, created: int, usage: Usage) -> dict[str, Any]:
    """The chunk with no choices and the usage (``stream_options.include_usage``)."""
    return {
        "id": id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [],
        "usage": usage_json(usage),
    }


def sse(data: dict[str, Any]) -> bytes:
    """One server-sent event carrying ``data`` as JSON."""
    return b"data: " + orjson.dumps(data) + b"\n\n"


def models(agent_ids: Sequence[str]) -> dict[str, Any]:
    """``GET /v1/models``: each agent as ``sessionmem/<id>`` and as ``<id>`` (both name it)."""
    data = []
    for agent_id in agent_ids:
        for name in (f"sessionmem/{agent_id}", agent_id):
            data.append({"id": name, "object": "model", "created": 0, "owned_by": OWNER})
    return {"object": "list", "data": data}
