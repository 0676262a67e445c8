"""ScriptedModel: steps, responders, recorded calls, deterministic usage, automatic overflow."""

from __future__ import annotations

import asyncio

import pytest

from sessionmem.errors import ContextWindowExceeded, ModelError
from sessionmem.messages import Message, ToolCall, Usage
from sessionmem.model.base import Model, ModelReply, ModelRequest
from sessionmem.model.scripted import (
    NO_REPLY,
    ScriptedModel,
    ScriptExhausted,
    count_request_tokens,
    flush_aware,
    flush_write,
)
from sessionmem.tokens import count_tokens


def ask(model: ScriptedModel, text: str = "hello", **kw: object) -> ModelReply:
    request = ModelRequest((Message.system("You are helpful."), Message.user(text)), **kw)  # type: ignore[arg-type]
    return asyncio.run(model.complete(request))


def test_is_a_model_named_scripted() -> None:
    model = ScriptedModel()
    assert isinstance(model, Model)
    assert model.name == "scripted"
    assert ScriptedModel.__test__ is False


def test_each_kind_of_step() -> None:
    call = ToolCall("c1", "memory_search", {"query": "x"})
    given = ModelReply(Message.assistant("as given", usage=Usage(7, 3)), model="m", provider="p")
    model = ScriptedModel(
        [
            "plain text",
            Message.assistant("a message"),
            call,
            [call, ToolCall("c2", "memory_get", {"path": "MEMORY.md"})],
            given,
            lambda req: f"saw {req.messages[-1].content}",
            ModelError("provider down", status_code=503),
        ]
    )
    assert ask(model).message.content == "plain text"
    assert ask(model).message.content == "a message"
    reply = ask(model)
    assert reply.message.tool_calls == (call,) and reply.stop_reason == "toolUse"
    assert [c.id for c in ask(model).message.tool_calls] == ["c1", "c2"]
    reply = ask(model)
    assert reply.message.usage == Usage(7, 3) and reply.model == "m" and reply.provider == "p"
    assert ask(model, "ping").message.content == "saw ping"
    with pytest.raises(ModelError, match="provider down") as info:
        ask(model)
    assert info.value.status_code == 503
    model.assert_complete()
    assert len(model.calls) == 7
    assert model.calls[5].messages[-1].content == "ping"


def test_async_callable_step() -> None:
    async def later(req: ModelRequest) -> str:
        await asyncio.sleep(0)
        return "async ok"

    assert ask(ScriptedModel([later])).message.content == "async ok"


def test_running_out_raises_and_assert_complete_reports_leftovers() -> None:
    model = ScriptedModel(["one", "two"])
    ask(model)
    with pytest.raises(AssertionError, match="1 of 2 steps were never used"):
        model.assert_complete()
    ask(model)
    with pytest.raises(ScriptExhausted, match="ran out of steps after 2"):
        ask(model)


def test_responder_answers_after_the_steps() -> None:
    model = ScriptedModel(["first"], responder=lambda req: f"echo {req.messages[-1].content}")
    assert ask(model).message.content == "first"
    assert ask(model, "a").message.content == "echo a"
    assert ask(model, "b").message.content == "echo b"


def test_usage_is_counted_and_deterministic() -> None:
    tools = ({"type": "function", "function": {"name": "memory_search", "parameters": {"type": "object"}}},)
    request = ModelRequest((Message.system("sys"), Message.user("how are the billing plans?")), tools=tools)
    r1 = asyncio.run(ScriptedModel(["Fine, thanks."]).complete(request))
    r2 = asyncio.run(ScriptedModel(["Fine, thanks."]).complete(request))
    assert r1.message.usage == r2.message.usage
    assert r1.message.usage is not None
    assert r1.message.usage.input == count_request_tokens(request)
    assert r1.message.usage.output == count_tokens("Fine, thanks.")
    # Tool schemas count towards the prompt.
    bare = ModelRequest(request.messages)
    assert count_request_tokens(request) > count_request_tokens(bare)
    # A longer history costs more.
    longer = ModelRequest((*request.messages, Message.assistant("ok"), Message.user("more")), tools=tools)
    assert count_request_tokens(longer) > count_request_tokens(request)


def test_overflow_raises_without_consuming_the_step() -> None:
    model = ScriptedModel(["short reply"], context_window=50)
    with pytest.raises(ContextWindowExceeded, match="exceeds the context window of 50"):
        ask(model, "word " * 100)
    assert model.remaining == 1  # the same step answers the retry after compaction
    assert ask(model, "short").message.content == "short reply"
    assert ScriptedModel(overflow_at=10).context_window == 10


def test_flush_aware_routes_by_purpose() -> None:
    model = ScriptedModel(responder=flush_aware(lambda req: "normal", summary="SUMMARY"))
    assert ask(model, purpose="turn").message.content == "normal"
    assert ask(model, purpose="flush").message.content == NO_REPLY
    assert ask(model, purpose="compaction").message.content == "SUMMARY"


def test_flush_write_calls_the_tool_then_goes_silent() -> None:
    handler = flush_write("- decided X", path="memory/2026-11-22.md")
    model = ScriptedModel(responder=flush_aware(flush=handler))
    first = ask(model, purpose="flush")
    (call,) = first.message.tool_calls
    assert call.name == "write" and call.arguments == {
        "path": "memory/2026-11-22.md",
        "content": "- decided X",
    }
    follow_up = ModelRequest(
        (Message.user("flush"), first.message, Message.tool(call, "ok")),
        purpose="flush",
    )
    assert asyncio.run(model.complete(follow_up)).message.content == NO_REPLY


def test_non_assistant_message_step_is_rejected() -> None:
    with pytest.raises(Exception, match="expected assistant"):
        ask(ScriptedModel([Message.user("wrong")]))
