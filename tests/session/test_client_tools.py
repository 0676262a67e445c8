"""The caller's own tools through the runner: the model calls one, the turn ends with the call, the
caller submits its result and the same turn goes on (no flush before it); the agent's own calls of a
mixed message run here; results that do not answer the pending calls are refused, nothing written."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from sessionmem import ClientTool, ToolResult, ToolResultsMismatch, UsageError
from sessionmem.messages import ToolCall
from sessionmem.model.base import ModelRequest
from sessionmem.model.scripted import ScriptedModel, flush_aware
from sessionmem.session.stores.transcript import message_from_dict
from sessionmem.session.stores.transcript_folder import read_messages
from tests.scenarios.harness import make_runner, small_config

WEATHER = ClientTool(
    "get_weather",
    "The weather in a city now.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
BIG = small_config(window=100_000, keep=60)


def weather_model(result_said: str = "sunny") -> Any:
    """Calls get_weather for a question; answers from the tool's result once it has it."""

    def respond(request: ModelRequest) -> Any:
        last = request.messages[-1]
        if last.role == "tool":
            return f"In Oslo it is {last.content[:40]}."
        return ToolCall(f"call-{len(request.messages)}", "get_weather", {"city": "Oslo"})

    return respond


def test_a_client_tool_call_is_returned_and_the_turn_goes_on_with_its_result(
    tmp_path: Path, workspace: Path
) -> None:
    model = ScriptedModel(responder=flush_aware(weather_model()))
    runner, recorder = make_runner(model, tmp_path, workspace, BIG)
    session = runner.open()

    asked = session.run_turn_sync("What is the weather in Oslo?", tools=[WEATHER])
    [call] = asked.tool_calls
    assert call.name == "get_weather" and call.arguments == {"city": "Oslo"}
    assert asked.reply is None and session.pending_tool_calls == (call,)
    offered = [t["function"]["name"] for t in model.calls[0].tools]
    assert "get_weather" in offered and "memory_get" in offered

    done = session.submit_tool_results_sync([ToolResult(call.id, "sunny, 21 C")], tools=[WEATHER])
    assert done.reply == "In Oslo it is sunny, 21 C." and done.tool_calls == ()
    assert session.pending_tool_calls == ()
    sent = model.calls[-1].messages
    assert [m.role for m in sent[-3:]] == ["user", "assistant", "tool"]
    assert sent[-1].tool_call_id == call.id and sent[-1].content == "sunny, 21 C"

    # the transcript as a user would read it back: one turn, the call and its result in place
    path = session.transcript.path
    assert path is not None
    messages = [message_from_dict(entry["message"]) for _, entry in read_messages(path)]
    assert [m.role for m in messages if m is not None] == ["user", "assistant", "tool", "assistant"]
    assert messages[1] is not None and messages[2] is not None
    assert messages[1].tool_calls == (call,) and messages[2].tool_name == "get_weather"
    assert recorder.kinds("turn") == ["turn", "turn"]


def test_the_continuation_is_not_a_new_user_turn_no_flush_before_it(tmp_path: Path, workspace: Path) -> None:
    config = small_config()  # 8,000 tokens: the flush at 6,500, compaction at 7,000
    model = ScriptedModel(responder=flush_aware(weather_model()))
    runner, recorder = make_runner(model, tmp_path, workspace, config)
    session = runner.open()
    [call] = session.run_turn_sync("weather?", tools=[WEATHER]).tool_calls
    budget = session.state.budget
    # a result that takes the projection past the flush threshold, not to compaction
    result = "sunny " * 6100
    done = session.submit_tool_results_sync([ToolResult(call.id, result)], tools=[WEATHER])
    assert done.reply is not None and done.reply.startswith("In Oslo it is sunny")
    projected = session.projection().tokens
    assert budget.compaction_threshold - budget.soft_threshold <= projected < budget.compaction_threshold
    # No flush before the continuation's model call; the flush it made due runs after its reply.
    assert [c.purpose for c in model.calls] == ["turn", "turn", "flush"]
    kinds = recorder.kinds("turn", "memory_work_start", "flush", "memory_work_end")
    assert kinds == ["turn", "turn", "memory_work_start", "flush", "memory_work_end"]
    session.run_turn_sync("thanks")  # the cycle is flushed: no second flush
    assert recorder.kinds("flush") == ["flush"]


def test_a_mixed_message_runs_the_agents_own_calls_and_returns_the_clients(
    tmp_path: Path, workspace: Path
) -> None:
    (workspace / "MEMORY.md").write_text("The user lives in Oslo.\n", encoding="utf-8")
    mine = ToolCall("m1", "memory_get", {"path": "MEMORY.md"})
    theirs = ToolCall("c1", "get_weather", {"city": "Oslo"})
    model = ScriptedModel([[mine, theirs], "Sunny where you live."])
    runner, recorder = make_runner(model, tmp_path, workspace, BIG)
    session = runner.open()

    asked = session.run_turn_sync("weather where I live?", tools=[WEATHER])
    assert asked.tool_calls == (theirs,)  # the agent's own call is never the caller's
    assert [e.name for e in recorder.events if e.kind == "tool_call"] == ["memory_get"]  # type: ignore[attr-defined]
    assert session.pending_tool_calls == (theirs,)

    done = session.submit_tool_results_sync([ToolResult("c1", "sunny")], tools=[WEATHER])
    assert done.reply == "Sunny where you live."
    sent = model.calls[-1].messages
    assert [(m.role, m.tool_call_id) for m in sent[-3:]] == [
        ("assistant", None),
        ("tool", "m1"),
        ("tool", "c1"),
    ]
    model.assert_complete()


def test_results_that_do_not_answer_the_pending_calls_are_refused_nothing_written(
    tmp_path: Path, workspace: Path
) -> None:
    model = ScriptedModel(responder=weather_model())
    runner, _ = make_runner(model, tmp_path, workspace, BIG)
    session = runner.open()
    with pytest.raises(ToolResultsMismatch, match="no tool calls are pending"):
        session.submit_tool_results_sync([ToolResult("x", "42")])
    [call] = session.run_turn_sync("weather?", tools=[WEATHER]).tool_calls
    lines = len(session.transcript.entries())
    with pytest.raises(ToolResultsMismatch, match=r"\['wrong-id'\] do not match the pending tool calls"):
        session.submit_tool_results_sync([ToolResult("wrong-id", "sunny")], tools=[WEATHER])
    with pytest.raises(ToolResultsMismatch, match="given twice"):
        session.submit_tool_results_sync(
            [ToolResult(call.id, "sunny"), ToolResult(call.id, "rain")], tools=[WEATHER]
        )
    assert len(session.transcript.entries()) == lines and len(model.calls) == 1
    assert session.pending_tool_calls == (call,)


def test_a_retry_after_a_failed_continuation_calls_the_model_again_writing_nothing_twice(
    tmp_path: Path, workspace: Path
) -> None:
    from sessionmem.errors import ModelError

    model = ScriptedModel(
        [
            ToolCall("c1", "get_weather", {"city": "Oslo"}),
            ModelError("rate limited", status_code=429),
            "Sunny.",
        ]
    )
    runner, _ = make_runner(model, tmp_path, workspace, BIG)
    session = runner.open()
    session.run_turn_sync("weather?", tools=[WEATHER])
    with pytest.raises(ModelError):
        session.submit_tool_results_sync([ToolResult("c1", "sunny")], tools=[WEATHER])
    assert session.submit_tool_results_sync([ToolResult("c1", "sunny")], tools=[WEATHER]).reply == "Sunny."
    roles = [m.role for _, m in session.context]
    assert roles == ["user", "assistant", "tool", "assistant"]


def test_a_client_tool_named_like_the_agents_own_is_refused(tmp_path: Path, workspace: Path) -> None:
    model = ScriptedModel([])
    runner, _ = make_runner(model, tmp_path, workspace, BIG)
    clash = ClientTool("memory_get", "my own reader")
    with pytest.raises(UsageError, match="named like one of the agent's own tools"):
        runner.open().run_turn_sync("hi", tools=[clash])
    with pytest.raises(UsageError, match="declared twice"):
        runner.open().run_turn_sync("hi", tools=[WEATHER, WEATHER])
    with pytest.raises(UsageError, match="letters, digits"):
        ClientTool("get weather!")
    assert model.calls == []


def test_a_new_user_message_abandons_the_pending_calls(tmp_path: Path, workspace: Path) -> None:
    model = ScriptedModel([ToolCall("c1", "get_weather", {"city": "Oslo"}), "Never mind then."])
    runner, _ = make_runner(model, tmp_path, workspace, BIG)
    session = runner.open()
    session.run_turn_sync("weather?", tools=[WEATHER])

    async def next_turn() -> str | None:
        return (await session.run_turn("forget it")).reply

    assert asyncio.run(next_turn()) == "Never mind then."
    sent = model.calls[-1].messages
    assert all(not m.tool_calls for m in sent) and sent[-1].content == "forget it"
    assert session.pending_tool_calls == ()


def test_a_suspended_turn_is_continued_by_another_runner_from_the_transcript(
    tmp_path: Path, workspace: Path
) -> None:
    first, _ = make_runner(ScriptedModel(responder=weather_model()), tmp_path, workspace, BIG)
    [call] = first.open().run_turn_sync("weather?", tools=[WEATHER]).tool_calls
    first.close()  # a restart of the gateway, or another process on the same store

    model = ScriptedModel(responder=weather_model())
    second, _ = make_runner(model, tmp_path, workspace, BIG)
    session = second.open()
    assert session.pending_tool_calls == (call,)
    done = session.submit_tool_results_sync([ToolResult(call.id, "foggy")], tools=[WEATHER])
    assert done.reply == "In Oslo it is foggy." and [c.purpose for c in model.calls] == ["turn"]
