"""The client's own tools through the gateway, with the official ``openai`` client: the model's call of a
tool the client declared comes back as ``tool_calls`` (plain and streamed), the client's next request
with the results (and the whole history, as clients send it) continues the same turn; the agent's memory
tools run server-side and are never shown; the transcript, read back through ``/api/sessions``, holds
the turn whole; results for calls that are not pending, and a tool named like the agent's, are 400."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.server.gateway_support import (
    GATEWAY_KEY,
    RunningGateway,
    after_last_user,
    agent_context,
    keyword_config,
    running_gateway,
)
from tests.support.openai_server import OpenAIServer, text_reply, tool_call_reply

WEATHER: Any = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city now.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
QUESTION = {"role": "user", "content": "What is the weather in Oslo?"}


@pytest.fixture
def gateway(tmp_path: Path, openai_server: OpenAIServer) -> Iterator[RunningGateway]:
    with running_gateway([agent_context(tmp_path, keyword_config())], openai_server) as running:
        yield running


@pytest.fixture
def client(gateway: RunningGateway) -> openai.OpenAI:
    return openai.OpenAI(base_url=gateway.base_url, api_key=GATEWAY_KEY, max_retries=0)


def weather_upstream(*also: tuple[str, dict[str, Any]]) -> Any:
    """Calls get_weather (with ``also``, the agent's own calls, in the same message) for a question;
    answers from its result once the client sent it."""

    def route(body: dict[str, Any]) -> Any:
        results = [m for m in after_last_user(body) if m.get("role") == "tool"]
        weather = [m for m in results if m.get("tool_call_id") == "call_weather"]
        if weather:
            return text_reply(f"In Oslo it is {weather[0]['content']}.")
        calls: list[Any] = [
            *(
                {"id": f"call_{n}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
                for n, a in also
            ),
            {
                "id": "call_weather",
                "type": "function",
                "function": {"name": "get_weather", "arguments": json.dumps({"city": "Oslo"})},
            },
        ]
        return tool_call_reply(calls)

    return route


def transcript_messages(gateway: RunningGateway, key: str = "agent:main:main") -> list[dict[str, Any]]:
    """The session's messages as ``GET /api/sessions/{key}`` shows them."""
    auth = {"authorization": f"Bearer {GATEWAY_KEY}"}
    shown = httpx.get(f"{gateway.url}/api/sessions/{key}", headers=auth)
    assert shown.status_code == 200, shown.text
    return [item for item in shown.json()["transcript"]["items"] if item["kind"] == "message"]


def test_a_client_tool_call_is_passed_through_and_the_turn_continued(
    gateway: RunningGateway, client: openai.OpenAI, openai_server: OpenAIServer
) -> None:
    openai_server.chat.handler = weather_upstream()
    asked = client.chat.completions.create(model="main", messages=[QUESTION], tools=[WEATHER])
    choice = asked.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    [call] = choice.message.tool_calls or []
    assert call.type == "function" and call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Oslo"}
    assert asked.usage is not None and asked.usage.total_tokens > 0
    offered = {t["function"]["name"] for t in openai_server.chat.requests[0].body["tools"]}
    assert {"get_weather", "memory_search", "memory_get"} <= offered

    # as clients do: the whole history, the assistant's tool calls, then the result
    history = [QUESTION, choice.message.model_dump(exclude_none=True)]
    history.append({"role": "tool", "tool_call_id": call.id, "content": "sunny, 21 C"})
    done = client.chat.completions.create(model="main", messages=history, tools=[WEATHER])
    assert done.choices[0].finish_reason == "stop"
    assert done.choices[0].message.content == "In Oslo it is sunny, 21 C."
    sent = openai_server.chat.requests[-1].body["messages"]
    assert [m["role"] for m in sent[-3:]] == ["user", "assistant", "tool"]
    assert sum(m["role"] == "user" for m in sent) == 1  # the same turn, not a new one
    assert len(openai_server.chat.requests) == 2  # no flush, no compaction between

    read_back = transcript_messages(gateway)
    assert [m["role"] for m in read_back] == ["user", "assistant", "tool", "assistant"]
    assert [c["name"] for c in read_back[1]["toolCalls"]] == ["get_weather"]
    assert read_back[2]["toolName"] == "get_weather" and read_back[2]["text"] == "sunny, 21 C"
    assert read_back[3]["text"] == "In Oslo it is sunny, 21 C."


def test_a_streamed_client_tool_call_in_openais_chunks_then_a_streamed_continuation(
    client: openai.OpenAI, openai_server: OpenAIServer
) -> None:
    openai_server.chat.handler = weather_upstream()
    chunks = list(
        client.chat.completions.create(
            model="main",
            messages=[QUESTION],
            tools=[WEATHER],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    deltas = [d for c in chunks if c.choices for d in c.choices[0].delta.tool_calls or []]
    assert [(d.index, d.id, d.function and d.function.name) for d in deltas] == [
        (0, "call_weather", "get_weather")
    ]
    assert deltas[0].function is not None and json.loads(deltas[0].function.arguments or "") == {
        "city": "Oslo"
    }
    finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finish == ["tool_calls"] and chunks[-1].usage is not None

    assistant = {
        "role": "assistant",
        "tool_calls": [
            {"id": "call_weather", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
        ],
    }
    history: Any = [QUESTION, assistant, {"role": "tool", "tool_call_id": "call_weather", "content": "rainy"}]
    streamed = client.chat.completions.create(model="main", messages=history, tools=[WEATHER], stream=True)
    pieces = list(streamed)
    assert "".join(c.choices[0].delta.content or "" for c in pieces if c.choices) == "In Oslo it is rainy."
    assert [c.choices[0].finish_reason for c in pieces if c.choices and c.choices[0].finish_reason] == [
        "stop"
    ]


def test_the_agents_own_calls_in_the_same_message_run_server_side_and_are_never_shown(
    client: openai.OpenAI, openai_server: OpenAIServer
) -> None:
    openai_server.chat.handler = weather_upstream(("memory_search", {"query": "home town"}))
    asked = client.chat.completions.create(model="main", messages=[QUESTION], tools=[WEATHER])
    calls = asked.choices[0].message.tool_calls or []
    assert [c.function.name for c in calls] == ["get_weather"]
    history: Any = [
        QUESTION,
        asked.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": "call_weather", "content": "sunny"},
    ]
    done = client.chat.completions.create(model="main", messages=history, tools=[WEATHER])
    assert done.choices[0].message.content == "In Oslo it is sunny."
    sent = openai_server.chat.requests[-1].body["messages"]
    assert [(m["role"], m.get("tool_call_id")) for m in sent[-3:]] == [
        ("assistant", None),
        ("tool", "call_memory_search"),
        ("tool", "call_weather"),
    ]


def test_results_for_calls_that_are_not_pending_are_400(
    client: openai.OpenAI, openai_server: OpenAIServer
) -> None:
    openai_server.chat.handler = weather_upstream()
    asked = client.chat.completions.create(model="main", messages=[QUESTION], tools=[WEATHER])
    history: Any = [
        QUESTION,
        asked.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": "call_someone_else", "content": "sunny"},
    ]
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="main", messages=history, tools=[WEATHER])
    assert refused.value.code == "tool_call_id_mismatch"
    assert "do not match the pending tool calls ['call_weather']" in str(refused.value)
    assert len(openai_server.chat.requests) == 1  # nothing sent upstream
    history[-1]["tool_call_id"] = "call_weather"  # the right id still continues the turn
    assert (
        client.chat.completions.create(model="main", messages=history, tools=[WEATHER])
        .choices[0]
        .message.content
    )


def test_a_client_tool_named_like_the_agents_own_is_400(
    client: openai.OpenAI, openai_server: OpenAIServer
) -> None:
    clash: Any = [
        {"type": "function", "function": {"name": "memory_search", "parameters": {"type": "object"}}}
    ]
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="main", messages=[QUESTION], tools=clash)
    assert "named like one of the agent's own tools" in str(refused.value)
    assert openai_server.chat.requests == []
