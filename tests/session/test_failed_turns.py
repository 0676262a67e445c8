"""Turns that fail: only NO_REPLY is silence (an empty answer is an error the caller sees), and a failed
model call never loses the user's message (it stays in the transcript and is sent again with the next
turn). Against litellm over real HTTP, streamed and not."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from sessionmem import tokens
from sessionmem.errors import ModelError
from sessionmem.model.litellm import LiteLLMModel
from sessionmem.session.turn.events import TurnEvent
from tests.scenarios.harness import make_runner, small_config, transcript_lines
from tests.support.openai_server import empty_stream, server_error

BIG = small_config(window=100_000)


def litellm_model(server: Any) -> LiteLLMModel:
    tokens.configure_litellm_environment()
    return LiteLLMModel("openai/test-model", api_base=server.base_url, api_key="sk-test", num_retries=0)


def user_texts(path: Path) -> list[str]:
    return [
        line["message"]["content"]
        for line in transcript_lines(path)
        if line.get("type") == "message" and line["message"]["role"] == "user"
    ]


def assistant_lines(path: Path) -> list[dict[str, Any]]:
    return [
        line["message"]
        for line in transcript_lines(path)
        if line.get("type") == "message" and line["message"]["role"] == "assistant"
    ]


@pytest.mark.parametrize("streamed", [True, False])
def test_an_empty_answer_is_an_error_not_a_silence(
    tmp_path: Path, workspace: Path, openai_server: Any, streamed: bool
) -> None:
    openai_server.chat.push(empty_stream())
    runner, recorder = make_runner(litellm_model(openai_server), tmp_path, workspace, BIG)
    session = runner.open()
    pieces: list[str] = []

    async def turn(text: str) -> Any:
        return await session.run_turn(text, on_partial=pieces.append if streamed else None)

    with pytest.raises(ModelError, match="empty answer"):
        asyncio.run(turn("are you there?"))
    assert pieces == []
    assert not [e for e in recorder.events if isinstance(e, TurnEvent)]  # no silent turn reported
    assert assistant_lines(session.transcript.path) == []  # no empty assistant message on record
    # The question was kept and goes out again with the next message.
    assert asyncio.run(turn("hello?")).reply is not None
    sent = [m["content"] for m in openai_server.chat.requests[-1].body["messages"] if m["role"] == "user"]
    assert sent == ["are you there?", "hello?"]


def test_a_failed_model_call_keeps_the_users_message(
    tmp_path: Path, workspace: Path, openai_server: Any
) -> None:
    openai_server.chat.push(server_error(500))
    runner, _ = make_runner(litellm_model(openai_server), tmp_path, workspace, BIG)
    session = runner.open()
    with pytest.raises(ModelError, match=r"500|server had an error"):
        session.run_turn_sync("my order number is 4521")
    assert user_texts(session.transcript.path) == ["my order number is 4521"]
    # A new runner (a restarted process) still has it in the context it sends.
    again, _ = make_runner(litellm_model(openai_server), tmp_path, workspace, BIG)
    again.open().run_turn_sync("did you get it?")
    sent = [m["content"] for m in openai_server.chat.requests[-1].body["messages"] if m["role"] == "user"]
    assert sent == ["my order number is 4521", "did you get it?"]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (123, "must be a str, not int"),
        (None, "must be a str, not NoneType"),
        (b"hello", "must be a str, not bytes"),
        ("caf\udce9 au lait", r"lone surrogate U\+DCE9 at index 3"),
    ],
)
def test_a_message_that_is_not_text_is_refused_clearly_and_nothing_is_written(
    tmp_path: Path, workspace: Path, text: Any, problem: str
) -> None:
    from sessionmem.errors import UsageError
    from sessionmem.model.scripted import ScriptedModel

    runner, _ = make_runner(ScriptedModel(["fine"]), tmp_path, workspace, BIG)
    session = runner.open()
    with pytest.raises(UsageError, match=problem):
        session.run_turn_sync(text)
    assert user_texts(session.transcript.path) == []
    assert session.run_turn_sync("hello").reply == "fine"
