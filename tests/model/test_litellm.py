"""LiteLLMModel end to end: litellm over real HTTP to the loopback OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import Any

import pytest

from sessionmem.errors import ContextWindowExceeded, ModelError
from sessionmem.messages import Message, ToolCall
from sessionmem.model.base import ModelReply, ModelRequest
from sessionmem.model.litellm import LiteLLMModel, context_window, parse_tool_arguments
from tests.support.openai_server import (
    OpenAIServer,
    context_length_error,
    server_error,
    text_reply,
    tool_call_reply,
)

TOOLS = (
    {
        "type": "function",
        "function": {
            "name": "memory_search",
            "description": "Search memory",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
        },
    },
)


def model_for(server: OpenAIServer, **kw: Any) -> LiteLLMModel:
    return LiteLLMModel("openai/test-model", api_base=server.base_url, api_key="sk-test", num_retries=0, **kw)


def run(model: LiteLLMModel, request: ModelRequest) -> ModelReply:
    return asyncio.run(model.complete(request))


def test_text_reply_with_usage(openai_server: OpenAIServer) -> None:
    openai_server.chat.push(text_reply("Hello there", prompt_tokens=120, completion_tokens=3))
    model = model_for(openai_server, extra_headers={"x-trace": "t1"})
    request = ModelRequest((Message.system("be brief"), Message.user("hi")), max_tokens=50)
    reply = run(model, request)
    assert reply.message.role == "assistant"
    assert reply.message.content == "Hello there"
    assert reply.message.usage is not None
    assert (reply.message.usage.input, reply.message.usage.output) == (120, 3)
    assert reply.stop_reason == "stop"
    assert reply.provider == "openai"
    sent = openai_server.chat.requests[0]
    assert sent.body["model"] == "test-model"
    assert sent.body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
    ]
    assert sent.body["max_tokens"] == 50
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert sent.headers["x-trace"] == "t1"


def test_tool_calls_are_parsed_and_history_is_sent_back(openai_server: OpenAIServer) -> None:
    openai_server.chat.push(tool_call_reply([("memory_search", {"query": "billing cutover"})]))
    openai_server.chat.push(
        tool_call_reply(
            [
                {
                    "id": "call_bad",
                    "type": "function",
                    "function": {"name": "memory_search", "arguments": "{oops"},
                }
            ]
        )
    )
    model = model_for(openai_server)
    first = run(model, ModelRequest((Message.user("when is the billing cutover?"),), tools=TOOLS))
    (call,) = first.message.tool_calls
    assert call.name == "memory_search" and call.arguments == {"query": "billing cutover"}
    assert first.stop_reason == "toolUse"
    assert openai_server.chat.requests[0].body["tools"] == list(TOOLS)
    assert not any(
        k.startswith("_") for k in openai_server.chat.requests[0].body
    )  # internal flags stay local

    history = (
        Message.user("when is the billing cutover?"),
        first.message,
        Message.tool(call, "memory/2026-11-03.md: cutover on the 14th"),
    )
    second = run(model, ModelRequest(history, tools=TOOLS))
    assert second.message.tool_calls[0].arguments == {"_raw": "{oops"}  # the runner reports it to the model
    sent = openai_server.chat.requests[1].body["messages"]
    assert sent[1]["tool_calls"][0]["function"]["name"] == "memory_search"
    assert sent[2] == {
        "role": "tool",
        "content": "memory/2026-11-03.md: cutover on the 14th",
        "tool_call_id": call.id,
    }


def test_cached_prompt_tokens_become_cache_read(openai_server: OpenAIServer) -> None:
    reply = text_reply("cached", prompt_tokens=1000, completion_tokens=5)
    reply.body["usage"]["prompt_tokens_details"] = {"cached_tokens": 800}
    openai_server.chat.push(reply)
    usage = run(model_for(openai_server), ModelRequest((Message.user("hi"),))).message.usage
    assert usage is not None
    assert (usage.input, usage.cache_read, usage.output) == (200, 800, 5)
    assert usage.prompt_tokens == 1000  # what the prompt occupied in the window


def test_context_length_400_becomes_context_window_exceeded(openai_server: OpenAIServer) -> None:
    openai_server.chat.push(context_length_error(limit=8192, used=9000))
    with pytest.raises(ContextWindowExceeded, match="maximum context length is 8192") as info:
        run(model_for(openai_server), ModelRequest((Message.user("long"),)))
    assert info.value.status_code == 400


def test_server_error_becomes_model_error_with_status(openai_server: OpenAIServer) -> None:
    openai_server.chat.push(server_error(500))
    with pytest.raises(ModelError) as info:
        run(model_for(openai_server), ModelRequest((Message.user("hi"),)))
    assert not isinstance(info.value, ContextWindowExceeded)
    assert info.value.status_code == 500


def test_tool_argument_parsing() -> None:
    assert parse_tool_arguments('{"a": 1}') == {"a": 1}
    assert parse_tool_arguments("") == {}
    assert parse_tool_arguments(None) == {}
    assert parse_tool_arguments("[1, 2]") == {"_raw": "[1, 2]"}
    assert parse_tool_arguments("{not json") == {"_raw": "{not json"}


def test_request_kwargs_round_trip_tool_calls() -> None:
    call = ToolCall("c1", "memory_get", {"path": "MEMORY.md"})
    kw = LiteLLMModel("openai/x", timeout=5).request_kwargs(
        ModelRequest((Message.assistant(tool_calls=(call,)),))
    )
    assert kw["timeout"] == 5 and "api_base" not in kw and "tools" not in kw
    assert kw["messages"][0]["tool_calls"][0]["function"]["arguments"] == '{"path":"MEMORY.md"}'


def test_context_window_lookup_is_offline_and_never_raises() -> None:
    assert context_window("gpt-4o-mini") == 128000
    assert context_window("no-such-provider/no-such-model") is None


def test_importing_sessionmem_does_not_import_litellm() -> None:
    code = (
        "import sys, sessionmem, sessionmem.model.litellm, sessionmem.testing,"
        " sessionmem.session.stores.sessions_json;"
        "sys.exit(1 if 'litellm' in sys.modules else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


# ---------------------------------------------------------------------------- the blocking call


def test_complete_sync_text_tools_usage_and_the_same_request(openai_server: OpenAIServer) -> None:
    openai_server.chat.push(text_reply("Hello there", prompt_tokens=120, completion_tokens=3))
    openai_server.chat.push(tool_call_reply([("memory_search", {"query": "billing"})]))
    model = model_for(openai_server, extra_headers={"x-trace": "t1"})
    request = ModelRequest((Message.system("be brief"), Message.user("hi")), max_tokens=50)
    reply = model.complete_sync(request)
    assert (reply.message.content, reply.stop_reason, reply.provider) == ("Hello there", "stop", "openai")
    assert reply.message.usage is not None
    assert (reply.message.usage.input, reply.message.usage.output) == (120, 3)
    called = model.complete_sync(ModelRequest((Message.user("billing?"),), tools=TOOLS))
    assert called.stop_reason == "toolUse"
    assert [(c.name, c.arguments) for c in called.message.tool_calls] == [
        ("memory_search", {"query": "billing"})
    ]
    first = openai_server.chat.requests[0]
    assert first.body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
    ]
    assert first.body["max_tokens"] == 50 and "stream" not in first.body
    assert first.headers["x-trace"] == "t1"
    assert openai_server.chat.requests[1].body["tools"] == list(TOOLS)


def test_complete_sync_maps_errors_like_the_async_call(openai_server: OpenAIServer) -> None:
    openai_server.chat.push(context_length_error(limit=8192, used=9000), server_error(503))
    model = model_for(openai_server)
    with pytest.raises(ContextWindowExceeded, match="maximum context length is 8192"):
        model.complete_sync(ModelRequest((Message.user("long"),)))
    with pytest.raises(ModelError) as info:
        model.complete_sync(ModelRequest((Message.user("hi"),)))
    assert info.value.status_code == 503 and not isinstance(info.value, ContextWindowExceeded)


def test_run_turn_sync_over_litellm(openai_server: OpenAIServer, tmp_path: Any, workspace: Any) -> None:
    from tests.scenarios.harness import make_runner, small_config

    openai_server.chat.push(text_reply("Hi from the server"))
    runner, _ = make_runner(model_for(openai_server), tmp_path, workspace, small_config(window=100_000))
    assert runner.open().run_turn_sync("hello").reply == "Hi from the server"


# ---------------------------------------------------------------------------- streaming


async def collect(model: LiteLLMModel, request: ModelRequest) -> tuple[list[str], ModelReply]:
    pieces: list[str] = []
    final = None
    async for item in model.stream(request):
        if isinstance(item, ModelReply):
            final = item
        else:
            pieces.append(item)
    assert final is not None
    return pieces, final


def test_stream_text_and_usage(openai_server: OpenAIServer) -> None:
    openai_server.chat.push(text_reply("Hello there, friend", prompt_tokens=120, completion_tokens=4))
    pieces, reply = asyncio.run(collect(model_for(openai_server), ModelRequest((Message.user("hi"),))))
    assert len(pieces) > 1 and "".join(pieces) == reply.message.content == "Hello there, friend"
    assert reply.message.usage is not None
    assert (reply.message.usage.input, reply.message.usage.output) == (120, 4)
    assert (reply.stop_reason, reply.provider, reply.model) == ("stop", "openai", "test-model")
    body = openai_server.chat.requests[0].body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


def test_stream_assembles_tool_calls(openai_server: OpenAIServer) -> None:
    openai_server.chat.push(
        tool_call_reply(
            [("memory_search", {"query": "billing"}), ("memory_get", {"path": "MEMORY.md"})],
            text="Let me look",
            completion_tokens=30,
        )
    )
    request = ModelRequest((Message.user("billing?"),), tools=TOOLS)
    pieces, reply = asyncio.run(collect(model_for(openai_server), request))
    assert "".join(pieces) == reply.message.content == "Let me look"
    assert reply.stop_reason == "toolUse"
    assert [(c.id, c.name, c.arguments) for c in reply.message.tool_calls] == [
        ("call_0_memory_search", "memory_search", {"query": "billing"}),
        ("call_1_memory_get", "memory_get", {"path": "MEMORY.md"}),
    ]
    assert reply.message.usage is not None and reply.message.usage.output == 30


def test_stream_context_overflow_is_raised_before_any_text(openai_server: OpenAIServer) -> None:
    openai_server.chat.push(context_length_error(limit=8192, used=9000))
    with pytest.raises(ContextWindowExceeded):
        asyncio.run(collect(model_for(openai_server), ModelRequest((Message.user("long"),))))


def test_streamed_turn_over_litellm(openai_server: OpenAIServer, tmp_path: Any, workspace: Any) -> None:
    from sessionmem.model.base import supports_streaming
    from tests.scenarios.harness import make_runner, small_config, store_entry

    openai_server.chat.push(text_reply("NO_REPLY"), text_reply("Sure, here it is.", prompt_tokens=77))
    model = model_for(openai_server)
    assert supports_streaming(model)
    runner, _ = make_runner(model, tmp_path, workspace, small_config(window=100_000))
    session = runner.open()
    partials: list[str] = []
    assert session.run_turn_sync("anything?", on_partial=partials.append).reply is None
    assert partials == []
    result = session.run_turn_sync("show me", on_partial=partials.append)
    assert result.reply == "Sure, here it is." == "".join(partials) and len(partials) > 1
    assert store_entry(runner)["inputTokens"] == 77  # usage of the streamed reply reaches sessions.json
    assert all(r.body.get("stream") is True for r in openai_server.chat.requests)


# ---------------------------------------------------------------------------- quiet blocking calls

TURNS_IN_A_CHILD = """
import asyncio, logging, sys
from pathlib import Path
from sessionmem.config import Config
from sessionmem.model.litellm import LiteLLMModel
from sessionmem.session.runner import SessionRunner

base, home, mode, turns = sys.argv[1], Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
records = []
class Keep(logging.Handler):
    def emit(self, record):
        records.append(record.getMessage())
logging.getLogger().addHandler(Keep(logging.DEBUG))
for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy"):
    logging.getLogger(name).addHandler(Keep(logging.WARNING))
model = LiteLLMModel("openai/test-model", api_base=base, api_key="sk-test", num_retries=0)
config = Config.from_dict({"agents": {"defaults": {"contextTokens": 100000}}})
runner = SessionRunner(model, config=config, workspace=home / "ws", state_dir=home / "st")
session = runner.open()
if mode == "sync":
    replies = [session.run_turn_sync(f"message {i}").reply for i in range(turns)]
    runner.close()
else:
    async def main():
        out = [(await session.run_turn(f"message {i}")).reply for i in range(turns)]
        await runner.aclose()
        return out
    replies = asyncio.run(main())
assert replies == [f"echo: message {i}" for i in range(turns)], replies
print("\\n".join(r for r in records if "LoggingWorker" in r or "loop" in r))
"""


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_blocking_turns_are_as_quiet_as_async_ones(
    openai_server: OpenAIServer, tmp_path: Any, mode: str
) -> None:
    """run_turn_sync starts an event loop per turn; litellm's logging worker must not complain about it
    (it printed 'LoggingWorker: event loop changed' 21 times in 60 turns)."""
    child = subprocess.run(
        [sys.executable, "-c", TURNS_IN_A_CHILD, openai_server.base_url, str(tmp_path), mode, "30"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert child.returncode == 0, child.stderr[-3000:]
    assert child.stderr == ""
    assert child.stdout.strip() == ""  # no logging record about the loop, at any level
    assert len(openai_server.chat.requests) == 30
