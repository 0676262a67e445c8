"""Which agent, session and text a chat completion asks for (pure rules, no server)."""

from __future__ import annotations

from typing import Any

import pytest

from sessionmem.server.chat_request import new_input, parse_chat_request, session_key
from sessionmem.server.openai_errors import GatewayError
from sessionmem.tools.client import ToolResult


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


def new_text(messages: list[dict[str, Any]]) -> str:
    text, results = new_input(messages)
    assert results == ()
    return text


def test_the_new_messages_are_the_user_messages_after_the_last_assistant_message() -> None:
    assert new_text([{"role": "system", "content": "be brief"}, user("hi")]) == "hi"
    assert new_text([user("one"), assistant("echo"), user("two"), user("three")]) == "two\n\nthree"
    parts = [{"type": "text", "text": "look"}, {"type": "text", "text": "here"}]
    assert new_text([user("x"), assistant(""), {"role": "user", "content": parts}]) == "look\nhere"


def test_tool_results_after_the_last_assistant_message_continue_the_turn() -> None:
    calls = {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function"}]}
    old_result = {"role": "tool", "tool_call_id": "c0", "content": "old"}
    result = {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "sunny"}]}
    assert new_input([user("x"), assistant("a"), old_result, user("weather?"), calls, result]) == (
        "",
        (ToolResult("c1", "sunny"),),
    )
    with pytest.raises(GatewayError, match="tool results and a new user message in one request"):
        new_input([user("weather?"), calls, result, user("and tomorrow?")])
    with pytest.raises(GatewayError, match="tool_call_id must name the tool call"):
        new_input([user("weather?"), calls, {"role": "tool", "content": "sunny"}])


def test_a_request_without_a_new_user_message_is_refused() -> None:
    with pytest.raises(GatewayError) as refused:
        new_text([user("one"), assistant("echo")])
    assert refused.value.status == 400 and "after the last assistant message" in refused.value.message


def test_client_tools_are_read_and_bad_ones_refused_naming_why() -> None:
    weather = {
        "type": "function",
        "function": {"name": "get_weather", "description": "now", "parameters": {"type": "object"}},
    }
    chat = parse_chat_request({"model": "main", "messages": [user("x")], "tools": [weather]})
    assert [t.name for t in chat.tools] == ["get_weather"] and chat.tools[0].description == "now"
    none = parse_chat_request(
        {"model": "main", "messages": [user("x")], "tools": [weather], "tool_choice": "none"}
    )
    assert none.tools == ()
    image = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:"}}]}
    with pytest.raises(GatewayError, match="only text parts"):
        new_text([image])
    with pytest.raises(GatewayError, match=r"tools\[0\] must be"):
        parse_chat_request({"model": "main", "messages": [user("x")], "tools": [{"type": "function"}]})
    bad_name = {"type": "function", "function": {"name": "get weather"}}
    with pytest.raises(GatewayError, match="letters, digits"):
        parse_chat_request({"model": "main", "messages": [user("x")], "tools": [bad_name]})
    with pytest.raises(GatewayError, match="use 'tools'"):
        parse_chat_request({"model": "main", "messages": [user("x")], "functions": [{"name": "f"}]})


def test_model_names_the_agent_with_or_without_the_prefix() -> None:
    assert parse_chat_request({"model": "sessionmem/work", "messages": [user("x")]}).agent_id == "work"
    assert parse_chat_request({"model": "main", "messages": [user("x")], "stream": True}).stream


def test_the_session_key_from_header_then_user_then_main() -> None:
    assert session_key("main", "agent:main:telegram:direct:42", "ignored") == "agent:main:telegram:direct:42"
    assert session_key("main", "telegram:group:7", None) == "agent:main:telegram:group:7"
    assert session_key("main", None, "alice@example.com") == "agent:main:openai:direct:alice@example.com"
    assert session_key("main", None, None) == "agent:main:main"
    assert session_key("main", "  ", None) == "agent:main:main"


def test_a_key_of_another_agent_is_403_and_a_malformed_one_400() -> None:
    with pytest.raises(GatewayError) as other:
        session_key("main", "agent:work:main", None)
    assert other.value.status == 403 and "belongs to agent 'work'" in other.value.message
    with pytest.raises(GatewayError) as malformed:
        session_key("main", "agent:main", None)
    assert malformed.value.status == 400 and "X-Session-Key" in malformed.value.message
    with pytest.raises(GatewayError) as long_user:
        session_key("main", None, "x" * 500)
    assert long_user.value.status == 400 and "at most 128" in long_user.value.message
