"""Streaming a turn's reply through ``on_partial``: pieces add up to the reply, nothing of a NO_REPLY
answer is shown, a reply that only starts like the token is released once it clearly is not, and the
silent flush is never streamed."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from sessionmem.messages import Message, ToolCall
from sessionmem.model.base import ModelReply, ModelRequest, StreamingModel, supports_streaming
from sessionmem.model.scripted import ScriptedModel, flush_aware
from sessionmem.tools.define import tool
from tests.scenarios.harness import FLUSH_MARKER, make_runner, small_config

BIG = small_config(window=100_000, keep=60)


def streamed_turn(
    tmp_path: Path, workspace: Path, reply: str, chunk: int = 3
) -> tuple[list[str], str | None, ScriptedModel]:
    model = ScriptedModel([reply], stream_chunk_chars=chunk)
    runner, _ = make_runner(model, tmp_path, workspace, BIG)
    partials: list[str] = []
    result = runner.open().run_turn_sync("hi", on_partial=partials.append)
    return partials, result.reply, model


@pytest.mark.parametrize("chunk", [1, 2, 3, 8])
def test_a_no_reply_answer_shows_nothing(tmp_path: Path, workspace: Path, chunk: int) -> None:
    partials, reply, model = streamed_turn(tmp_path, workspace, "NO_REPLY", chunk)
    assert partials == [] and reply is None
    assert len(model.streamed) == 1  # it was streamed, and held back


def test_partials_add_up_to_the_reply(tmp_path: Path, workspace: Path) -> None:
    partials, reply, _ = streamed_turn(tmp_path, workspace, "Hello there")
    assert reply == "Hello there"
    assert len(partials) > 1 and "".join(partials) == reply


def test_a_reply_starting_like_the_token_is_released_once_it_is_not(tmp_path: Path, workspace: Path) -> None:
    partials, reply, _ = streamed_turn(tmp_path, workspace, "NOpe, sorry", chunk=2)
    assert reply == "NOpe, sorry"
    assert partials[0] == "NOpe"  # "NO" was held back, then let go with the next piece
    assert "".join(partials) == reply


def test_a_trailing_token_is_not_shown(tmp_path: Path, workspace: Path) -> None:
    partials, reply, _ = streamed_turn(tmp_path, workspace, "Done.\n\nNO_REPLY", chunk=2)
    assert reply == "Done." and "".join(partials) == "Done."


def test_the_flush_is_never_streamed(tmp_path: Path, workspace: Path) -> None:
    model = ScriptedModel(
        responder=flush_aware(lambda r: "reply " + " ".join(f"w{i}" for i in range(40)), flush="FLUSH TEXT"),
    )
    config = small_config(window=3000, reserve=500, floor=500, soft=300, keep=400)
    runner, recorder = make_runner(model, tmp_path, workspace, config)
    session = runner.open()
    partials: list[str] = []
    replies = []
    for i in range(12):
        before = len(partials)
        replies.append(
            session.run_turn_sync(f"turn {i}: " + " ".join(f"x{j}" for j in range(60)), partials.append)
        )
        assert "".join(partials[before:]) == replies[-1].reply
    assert "flush" in recorder.kinds() and "compaction" in recorder.kinds()
    assert all(r.purpose == "turn" for r in model.streamed)
    assert any(FLUSH_MARKER in m.content for c in model.calls if c.purpose == "flush" for m in c.messages)
    assert "FLUSH" not in "".join(partials)


def test_async_callback_and_tool_calls_in_a_streamed_turn(tmp_path: Path, workspace: Path) -> None:
    @tool
    def lookup(q: str) -> str:
        """Look up."""
        return f"found {q}"

    model = ScriptedModel([ToolCall("1", "lookup", {"q": "tea"}), "Tea is in the cupboard."])
    runner, _ = make_runner(model, tmp_path, workspace, BIG, tools=[lookup])
    partials: list[str] = []

    async def on_partial(text: str) -> None:
        await asyncio.sleep(0)
        partials.append(text)

    async def main() -> str | None:
        return (await runner.open().run_turn("where is the tea?", on_partial=on_partial)).reply

    assert asyncio.run(main()) == "Tea is in the cupboard." == "".join(partials)
    assert model.calls[1].messages[-1].content == "found tea"


class CompleteOnly:
    """A model without the streaming capability."""

    name = "complete-only"

    async def complete(self, request: ModelRequest) -> ModelReply:
        return ModelReply(Message.assistant("plain answer"))


def test_a_model_that_cannot_stream_still_answers(tmp_path: Path, workspace: Path) -> None:
    assert not supports_streaming(CompleteOnly())
    assert supports_streaming(ScriptedModel()) and isinstance(ScriptedModel(), StreamingModel)
    runner, _ = make_runner(CompleteOnly(), tmp_path, workspace, BIG)
    partials: list[Any] = []
    assert runner.open().run_turn_sync("hi", on_partial=partials.append).reply == "plain answer"
    assert partials == []
