"""Developer tools in a turn: a blocking sync handler runs in a worker thread (the caller's event loop
keeps going), an async handler is awaited on the loop; both results reach the model."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from sessionmem.messages import ToolCall
from sessionmem.model.scripted import ScriptedModel
from sessionmem.tools.define import tool
from tests.scenarios.harness import make_runner, small_config

BIG = small_config(window=100_000, keep=60)


def test_a_blocking_sync_tool_does_not_block_the_callers_event_loop(tmp_path: Path, workspace: Path) -> None:
    tool_started, loop_answered = threading.Event(), threading.Event()

    @tool
    def slow_lookup(q: str) -> str:
        """Look something up, blocking until a coroutine on the caller's loop answers."""
        tool_started.set()
        answered = loop_answered.wait(30)  # a blocked loop never answers: it runs this very call
        return f"found {q}" if answered else "the event loop was blocked"

    model = ScriptedModel([ToolCall("1", "slow_lookup", {"q": "tea"}), "done"])
    runner, _ = make_runner(model, tmp_path, workspace, BIG, tools=[slow_lookup])

    async def answer_while_the_tool_blocks() -> None:
        while not tool_started.is_set():
            await asyncio.sleep(0.01)
        loop_answered.set()

    async def main() -> str | None:
        task = asyncio.create_task(answer_while_the_tool_blocks())
        try:
            return (await runner.open().run_turn("find tea")).reply
        finally:
            task.cancel()

    assert asyncio.run(main()) == "done"
    assert model.calls[1].messages[-1].content == "found tea"


def test_an_async_tool_is_awaited_on_the_loop_and_a_sync_tool_runs_in_a_thread(
    tmp_path: Path, workspace: Path
) -> None:
    threads: dict[str, int] = {}

    @tool
    async def fetch(url: str) -> dict[str, str]:
        """Fetch a page."""
        await asyncio.sleep(0.01)
        threads["fetch"] = threading.get_ident()
        return {"url": url, "status": "ok"}

    @tool
    def count(text: str) -> int:
        """Count words."""
        threads["count"] = threading.get_ident()
        return len(text.split())

    model = ScriptedModel(
        [
            [
                ToolCall("1", "fetch", {"url": "https://example.test"}),
                ToolCall("2", "count", {"text": "a b c"}),
            ],
            "ok",
        ]
    )
    runner, _ = make_runner(model, tmp_path, workspace, BIG, tools=[fetch, count])

    async def main() -> tuple[str | None, int]:
        return (await runner.open().run_turn("go")).reply, threading.get_ident()

    reply, loop_thread = asyncio.run(main())
    assert reply == "ok"
    results = [(m.tool_call_id, m.content, m.is_error) for m in model.calls[1].messages if m.role == "tool"]
    assert results == [("1", '{"url":"https://example.test","status":"ok"}', False), ("2", "3", False)]
    assert threads["fetch"] == loop_thread
    assert threads["count"] != loop_thread


def test_tool_arguments_that_are_not_json_are_named_as_such(
    tmp_path: Path, workspace: Path, openai_server: Any
) -> None:
    from sessionmem import tokens
    from sessionmem.model.litellm import LiteLLMModel
    from tests.support.openai_server import text_reply, tool_call_reply

    @tool
    def lookup(q: str) -> str:
        """Look something up."""
        return f"found {q}"

    broken = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "tea"'}}
    listed = {"id": "c2", "type": "function", "function": {"name": "lookup", "arguments": '["tea"]'}}
    openai_server.chat.push(tool_call_reply([broken, listed]), text_reply("sorry"))
    tokens.configure_litellm_environment()
    model = LiteLLMModel("openai/test-model", api_base=openai_server.base_url, api_key="k", num_retries=0)
    runner, _ = make_runner(model, tmp_path, workspace, BIG, tools=[lookup])
    result = runner.open().run_turn_sync("look up tea")
    first, second = [m for m in result.messages if m.role == "tool"]
    assert first.is_error and first.content.startswith("Invalid arguments for lookup: not valid JSON")
    assert '{"q": "tea"' in first.content and "_raw" not in first.content
    assert second.is_error and "a JSON array, not an object" in second.content


def test_an_unexpected_argument_is_named_in_a_turn_for_every_tool(tmp_path: Path, workspace: Path) -> None:
    @tool
    def lookup(q: str) -> str:
        """Look something up."""
        return f"found {q}"

    calls = [
        ToolCall("1", "memory_append_daily", {"text": "- a note", "evil": 1}),
        ToolCall("2", "memory_get", {"path": "MEMORY.md", "evil": 1}),
        ToolCall("3", "lookup", {"q": "tea", "evil": 1}),
    ]
    model = ScriptedModel([calls, "done"])
    runner, _ = make_runner(model, tmp_path, workspace, BIG, tools=[lookup])
    result = runner.open().run_turn_sync("go")
    assert result.reply == "done"
    assert [(m.content, m.is_error) for m in result.messages if m.role == "tool"] == [
        ("Invalid arguments for memory_append_daily: unexpected argument 'evil' (it takes: text)", True),
        ("Invalid arguments for memory_get: unexpected argument 'evil' (it takes: path, from, lines)", True),
        ("Invalid arguments for lookup: unexpected argument 'evil' (it takes: q)", True),
    ]
    assert list((workspace / "memory").iterdir()) == []  # the append did not run
