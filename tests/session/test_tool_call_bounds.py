"""A model's tool-call arguments are bounded where they enter the system (``messages.ToolCall``):
arguments nested deeper than the bound (300 levels crashed the turn with "Recursion limit reached" from
the transcript writer), larger than it, or holding what JSON text cannot, get a tool error like any bad
arguments; the turn goes on, and the transcript records the call in a line that is written and read
back. Tested through real turns: the scripted model, and litellm talking HTTP to a loopback server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sessionmem.messages import (
    MAX_ARGUMENT_CHARS,
    MAX_ARGUMENT_DEPTH,
    REFUSED_ARGUMENTS,
    ToolCall,
    arguments_problem,
)
from sessionmem.model.scripted import ScriptedModel
from sessionmem.tools.define import tool
from tests.scenarios.harness import make_runner, small_config

BIG = small_config(window=100_000, keep=60)


def nested(depth: int) -> dict[str, Any]:
    """``{"a": {"a": ... {"a": 1}}}``, ``depth`` objects deep (built without recursion)."""
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value  # type: ignore[no-any-return]


def nested_text(depth: int) -> str:
    return '{"a": ' * depth + "1" + "}" * depth


class Lookup:
    """A developer's tool that records what reached it."""

    def __init__(self) -> None:
        self.calls: list[str] = []

        @tool
        def lookup(q: Any) -> str:
            """Look something up."""
            self.calls.append(str(q)[:20])
            return f"found {q}" if isinstance(q, str) else "found something"

        self.tool = lookup


def strict_lines(path: Path) -> list[dict[str, Any]]:
    """Every line of the transcript, each of which must be one JSON object (nothing skipped)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def recorded_arguments(lines: list[dict[str, Any]], call_id: str) -> Any:
    for line in lines:
        content = line.get("message", {}).get("content")
        for block in content if isinstance(content, list) else []:
            if block.get("type") == "toolCall" and block.get("id") == call_id:
                return block["arguments"]
    raise AssertionError(f"no tool call {call_id} in the transcript")


BAD_ARGUMENTS = [
    pytest.param(
        {"q": nested(300)}, f"argument 'q' is nested deeper than {MAX_ARGUMENT_DEPTH} levels", id="deep"
    ),
    pytest.param(
        {"q": "x" * (MAX_ARGUMENT_CHARS + 1)},
        f"the arguments hold more than {MAX_ARGUMENT_CHARS:,} characters",
        id="huge",
    ),
    pytest.param(
        {"q": "tea\ud800"},
        "argument 'q' is not valid Unicode: lone surrogate U+D800 at index 3",
        id="surrogate",
    ),
    pytest.param({"q": 2**70}, "argument 'q' holds an integer outside 64 bits", id="integer"),
    pytest.param({"q": {1, 2}}, "argument 'q' holds a set, which JSON cannot", id="set"),
]


@pytest.mark.parametrize(("arguments", "problem"), BAD_ARGUMENTS)
def test_arguments_over_a_bound_are_a_tool_error_and_the_turn_goes_on(
    tmp_path: Path, workspace: Path, arguments: dict[str, Any], problem: str
) -> None:
    lookup = Lookup()
    model = ScriptedModel(
        [ToolCall("c1", "lookup", arguments), ToolCall("c2", "lookup", {"q": "tea"}), "done"]
    )
    runner, _ = make_runner(model, tmp_path, workspace, BIG, tools=[lookup.tool])
    session = runner.open()
    result = session.run_turn_sync("look it up")

    assert result.reply == "done"
    first, second = [m for m in result.messages if m.role == "tool"]
    assert (first.is_error, first.content) == (True, f"Invalid arguments for lookup: {problem}")
    assert (second.is_error, second.content) == (False, "found tea")
    assert lookup.calls == ["tea"]  # the tool never saw the bad arguments

    # Every transcript line is JSON; the bad call is recorded as refused, and the session reads it back.
    path = session.transcript.path
    assert path is not None
    assert recorded_arguments(strict_lines(path), "c1") == {REFUSED_ARGUMENTS: problem}
    model.add_steps("still here")
    again = make_runner(model, tmp_path, workspace, BIG, tools=[lookup.tool])[0].open()
    assert again.run_turn_sync("and now?").reply == "still here"
    sent_back = next(c.arguments for m in model.calls[-1].messages for c in m.tool_calls)
    assert sent_back == {REFUSED_ARGUMENTS: problem}


def test_the_bound_check_has_no_recursion_and_stops_at_a_cycle() -> None:
    assert (
        arguments_problem(nested(100_000))
        == f"argument 'a' is nested deeper than {MAX_ARGUMENT_DEPTH} levels"
    )
    loop: dict[str, Any] = {}
    loop["self"] = loop
    assert arguments_problem(loop) == f"argument 'self' is nested deeper than {MAX_ARGUMENT_DEPTH} levels"
    assert arguments_problem({"q": nested(MAX_ARGUMENT_DEPTH - 1)}) is None  # the bound itself is kept
    assert arguments_problem({"q": [nested(MAX_ARGUMENT_DEPTH - 1)]}) is not None


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        pytest.param(
            '{"q": ' + nested_text(300) + "}",
            f"Invalid arguments for lookup: argument 'q' is nested deeper than {MAX_ARGUMENT_DEPTH} levels",
            id="300-deep",
        ),
        pytest.param(  # litellm decodes them too (Python's json, about 990 levels at most)
            '{"q": ' + nested_text(900) + "}",
            f"Invalid arguments for lookup: argument 'q' is nested deeper than {MAX_ARGUMENT_DEPTH} levels",
            id="900-deep",
        ),
    ],
)
def test_deep_arguments_from_a_provider_are_a_tool_error(
    tmp_path: Path, workspace: Path, openai_server: Any, text: str, problem: str
) -> None:
    from sessionmem import tokens
    from sessionmem.model.litellm import LiteLLMModel
    from tests.support.openai_server import text_reply, tool_call_reply

    lookup = Lookup()
    deep = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": text}}
    fine = {"id": "c2", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "tea"}'}}
    openai_server.chat.push(tool_call_reply([deep, fine]), text_reply("done"))
    tokens.configure_litellm_environment()
    model = LiteLLMModel("openai/test-model", api_base=openai_server.base_url, api_key="k", num_retries=0)
    runner, _ = make_runner(model, tmp_path, workspace, BIG, tools=[lookup.tool])
    session = runner.open()
    result = session.run_turn_sync("look it up")

    assert result.reply == "done"
    first, second = [m for m in result.messages if m.role == "tool"]
    assert first.is_error and first.content.startswith(problem), first.content[:200]
    assert (second.is_error, second.content) == (False, "found tea")
    assert lookup.calls == ["tea"]
    path = session.transcript.path
    assert path is not None
    strict_lines(path)  # every line written is JSON
    # The provider got the whole conversation back, the refused call included, as JSON it could parse.
    follow_up = openai_server.chat.requests[-1].body["messages"]
    assert [m["role"] for m in follow_up][-3:] == ["assistant", "tool", "tool"]
