"""Hostile memory tool arguments: a value that is not a string, or a string with a lone surrogate (text
no file, transcript or JSON result can hold), gets a clear tool error naming the argument, and nothing is
written. The same tools serve the runner (through its dispatcher) and the MCP server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from sessionmem.memory.tools.reading import MemoryTools, reading_tools
from sessionmem.memory.tools.writing import MemoryWriter, flush_write_tools, memory_write_tools, read_tool
from sessionmem.messages import ToolCall
from sessionmem.server.mcp import MemoryServerTools
from sessionmem.tools.define import Tool, dispatch, tool, tool_map

LONE = "\ud800"


class NoSearch:
    """An index that must never be asked: a bad argument is refused before the search."""

    def search(self, request: Any) -> Any:
        raise AssertionError(f"searched with {request!r}")


def write(workspace: Path, name: str, args: dict[str, Any], *, flush: bool = False) -> tuple[str, bool]:
    writer = MemoryWriter(workspace)
    tools = flush_write_tools(writer, "memory/2026-03-07.md") if flush else memory_write_tools(writer)
    outcome = asyncio.run(dispatch(tool_map(tools), ToolCall("c1", name, args)))
    return outcome.content, outcome.is_error


def files(workspace: Path) -> dict[str, bytes]:
    return {str(p.relative_to(workspace)): p.read_bytes() for p in workspace.rglob("*") if p.is_file()}


@pytest.mark.parametrize(
    ("name", "args", "argument"),
    [
        ("memory_append_daily", {"text": 42}, "text"),
        ("memory_append_daily", {"text": ["a note"]}, "text"),
        ("memory_append_daily", {"text": None}, "text"),
        ("memory_append_daily", {"text": f"a note{LONE}"}, "text"),
        ("memory_write", {"path": 1, "content": "fact"}, "path"),
        ("memory_write", {"path": f"MEMORY.md{LONE}", "content": "fact"}, "path"),
        ("memory_write", {"path": "MEMORY.md", "content": {"fact": 1}}, "content"),
        ("memory_write", {"path": "MEMORY.md", "content": f"fact{LONE}"}, "content"),
        ("memory_write", {"path": "MEMORY.md", "content": "fact", "mode": 3}, "mode"),
        ("memory_write", {"path": "MEMORY.md", "content": "fact", "mode": f"replace{LONE}"}, "mode"),
    ],
)
def test_write_tools_name_the_bad_argument_and_write_nothing(
    workspace: Path, name: str, args: dict[str, Any], argument: str
) -> None:
    (workspace / "MEMORY.md").write_text("# Memory\n- kept\n")
    before = files(workspace)
    content, is_error = write(workspace, name, args)
    assert is_error
    assert f"'{argument}'" in content, content
    assert "string" in content or "surrogate" in content, content
    assert "UnicodeEncodeError" not in content and "failed:" not in content
    orjson.dumps(content)  # the error itself can go into the transcript
    assert files(workspace) == before


@pytest.mark.parametrize(
    ("name", "args", "argument"),
    [
        ("write", {"path": "memory/2026-03-07.md", "content": 7}, "content"),
        ("write", {"path": "memory/2026-03-07.md", "content": f"note{LONE}"}, "content"),
        ("write", {"path": ["memory/2026-03-07.md"], "content": "note"}, "path"),
        ("memory_append_daily", {"text": f"{LONE}note"}, "text"),
    ],
)
def test_the_flush_write_tools_name_the_bad_argument(
    workspace: Path, name: str, args: dict[str, Any], argument: str
) -> None:
    content, is_error = write(workspace, name, args, flush=True)
    assert is_error and f"'{argument}'" in content, content
    assert not (workspace / "memory" / "2026-03-07.md").exists()


@pytest.mark.parametrize(
    ("name", "args", "argument"),
    [
        ("memory_search", {"query": 5}, "query"),
        ("memory_search", {"query": ["billing"]}, "query"),
        ("memory_search", {"query": f"billing{LONE}"}, "query"),
        ("memory_search", {"query": "billing", "after": f"2026-01-01{LONE}"}, "after"),
        ("memory_get", {"path": 5}, "path"),
        ("memory_get", {"path": f"MEMORY.md{LONE}"}, "path"),
        ("memory_get", {"path": "MEMORY.md", "from": f"1{LONE}"}, "from"),
    ],
)
def test_read_tools_name_the_bad_argument_in_a_result_that_can_be_recorded(
    workspace: Path, name: str, args: dict[str, Any], argument: str
) -> None:
    (workspace / "MEMORY.md").write_text("# Memory\n- the billing cutover is in March\n")
    tools = MemoryTools(index=NoSearch(), workspace=workspace)
    text = tools.call(name, args)
    orjson.dumps(text)  # no lone surrogate echoed back: the transcript can record it
    answer = json.loads(text)
    assert answer.get("argument") == argument, answer
    assert f"'{argument}'" in answer["error"]


def test_the_mcp_server_reports_them_as_errors(workspace: Path) -> None:
    writer = MemoryWriter(workspace)
    served = MemoryServerTools(
        memory=MemoryTools(index=NoSearch(), workspace=workspace),
        status=dict,
        writes=memory_write_tools(writer),
    )
    for name, args, argument in [
        ("memory_search", {"query": f"x{LONE}"}, "query"),
        ("memory_append_daily", {"text": f"x{LONE}"}, "text"),
        ("memory_write", {"path": "MEMORY.md", "content": 12}, "content"),
    ]:
        text, is_error = asyncio.run(served.call(name, args))
        assert is_error and f"'{argument}'" in text, (name, text)
    assert files(workspace) == {}


# ---------------------------------------------------------------------------- unexpected arguments


def every_tool(workspace: Path) -> dict[str, Tool]:
    """Every kind of tool a session or the MCP server offers: the reading tools, the write tools, the
    flush's, memory_read, and a developer's own."""
    writer = MemoryWriter(workspace)

    @tool
    def lookup(q: str, limit: int = 3) -> str:
        """Look something up."""
        return f"found {q}"

    tools = [
        *reading_tools(MemoryTools(index=NoSearch(), workspace=workspace)),
        *memory_write_tools(writer),
        read_tool(writer),
        lookup,
    ]
    flush = {t.name: t for t in flush_write_tools(writer, "memory/2026-03-07.md")}
    return {**tool_map(tools), "write": flush["write"]}


GOOD_ARGUMENTS = {
    "memory_search": {"query": "billing"},
    "memory_get": {"path": "MEMORY.md"},
    "memory_append_daily": {"text": "- a note"},
    "memory_write": {"path": "MEMORY.md", "content": "- a fact"},
    "write": {"path": "memory/2026-03-07.md", "content": "- a note"},
    "memory_read": {"path": "MEMORY.md"},
    "lookup": {"q": "tea"},
}


@pytest.mark.parametrize("name", sorted(GOOD_ARGUMENTS))
def test_an_unexpected_argument_is_named_with_the_tool_and_nothing_runs(workspace: Path, name: str) -> None:
    tools = every_tool(workspace)
    call = ToolCall("c1", name, {**GOOD_ARGUMENTS[name], "evil": 1})
    outcome = asyncio.run(dispatch(tools, call))
    assert outcome.is_error
    assert outcome.content.startswith(f"Invalid arguments for {name}: unexpected argument 'evil' (it takes: ")
    assert "<locals>" not in outcome.content and "keyword argument" not in outcome.content
    assert files(workspace) == {}  # nothing written, nothing searched (NoSearch would have raised)


def test_the_tool_says_what_it_takes_and_what_is_missing(workspace: Path) -> None:
    tools = every_tool(workspace)
    evil = asyncio.run(
        dispatch(tools, ToolCall("c1", "memory_append_daily", {"text": "x", "evil": 1, "_x": 2}))
    )
    assert (
        evil.content
        == "Invalid arguments for memory_append_daily: unexpected arguments 'evil', '_x' (it takes: text)"
    )
    missing = asyncio.run(dispatch(tools, ToolCall("c2", "lookup", {"limit": 2})))
    assert missing.content == "Invalid arguments for lookup: missing a required argument: 'q'"
    # the reading tools' own parameter (the tool's name) is no argument a model can set
    hidden = asyncio.run(
        dispatch(tools, ToolCall("c3", "memory_search", {"query": "x", "_name": "memory_get"}))
    )
    assert hidden.content.startswith("Invalid arguments for memory_search: unexpected argument '_name'")


def test_the_mcp_server_names_an_unexpected_argument_too(workspace: Path) -> None:
    served = MemoryServerTools(
        memory=MemoryTools(index=NoSearch(), workspace=workspace),
        status=dict,
        writes=memory_write_tools(MemoryWriter(workspace)),
    )
    for name in ("memory_search", "memory_get", "memory_append_daily", "memory_write"):
        text, is_error = asyncio.run(served.call(name, {**GOOD_ARGUMENTS[name], "evil": 1}))
        assert is_error and text.startswith(f"Invalid arguments for {name}: unexpected argument 'evil'"), text
    assert files(workspace) == {}
