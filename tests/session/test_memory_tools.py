"""Memory write tools: append-only daily logs, MEMORY.md with a backup, the flush's single target."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from freezegun import freeze_time

from sessionmem.messages import ToolCall
from sessionmem.session.memory_tools import MemoryWriter, flush_write_tools, memory_write_tools, read_tool
from sessionmem.session.tools import dispatch, tool_map


def run(tools: list, name: str, **args: object) -> tuple[str, bool]:
    outcome = asyncio.run(dispatch(tool_map(tools), ToolCall("c1", name, dict(args))))
    return outcome.content, outcome.is_error


def test_flush_write_appends_to_its_target_with_a_separator(workspace: Path) -> None:
    daily = workspace / "memory" / "2026-03-07.md"
    daily.write_text("seed")
    tools = flush_write_tools(MemoryWriter(workspace, timezone_name="UTC"), "memory/2026-03-07.md")
    text, is_error = run(tools, "write", path="memory/2026-03-07.md", content="new note")
    assert (text, is_error) == ("Appended content to memory/2026-03-07.md.", False)
    assert daily.read_text() == "seed\nnew note"


@pytest.mark.parametrize("path", ["MEMORY.md", "memory/2026-03-06.md", "notes.md", "../escape.md", "SOUL.md"])
def test_flush_write_refuses_every_other_path(workspace: Path, path: str) -> None:
    (workspace / "MEMORY.md").write_text("# Long-term\n- keep me\n")
    tools = flush_write_tools(MemoryWriter(workspace, timezone_name="UTC"), "memory/2026-03-07.md")
    with freeze_time("2026-03-07 12:00:00"):
        text, is_error = run(tools, "write", path=path, content="overwrite!")
    assert is_error
    assert text == "Memory flush writes are restricted to memory/2026-03-07.md; use that path only."
    assert (workspace / "MEMORY.md").read_text() == "# Long-term\n- keep me\n"
    assert not (workspace / "memory" / "2026-03-06.md").exists()


@pytest.fixture(params=["UTC", "Asia/Tokyo", "America/Los_Angeles"])
def machine_zone(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The machine's own time zone must not move the user's date (freezegun's clock is naive)."""
    monkeypatch.setenv("TZ", request.param)
    time.tzset()
    yield request.param
    monkeypatch.undo()
    time.tzset()


def test_flush_crossing_midnight_may_write_the_new_days_log(workspace: Path, machine_zone: str) -> None:
    tools = flush_write_tools(MemoryWriter(workspace, timezone_name="UTC"), "memory/2026-03-07.md")
    with freeze_time("2026-03-08 00:00:05"):
        text, is_error = run(tools, "write", path="memory/2026-03-08.md", content="after midnight")
    assert not is_error, text
    assert (workspace / "memory" / "2026-03-08.md").read_text() == "after midnight"


def test_append_is_not_repeated_when_the_model_re_emits_its_note(workspace: Path) -> None:
    tools = flush_write_tools(MemoryWriter(workspace), "memory/2026-03-07.md")
    run(tools, "memory_append_daily", text="- user prefers tea\n")
    text, is_error = run(tools, "memory_append_daily", text="- user prefers tea\n")
    assert not is_error and "nothing appended" in text
    assert (workspace / "memory" / "2026-03-07.md").read_text() == "- user prefers tea\n"


@freeze_time("2026-11-23 05:30:00")
def test_append_daily_uses_the_users_date(workspace: Path, machine_zone: str) -> None:
    events: list[tuple[str, str, int]] = []
    writer = MemoryWriter(
        workspace, timezone_name="America/Los_Angeles", on_write=lambda *e: events.append(e)
    )
    _text, is_error = run(memory_write_tools(writer), "memory_append_daily", text="- dentist on Friday")
    assert not is_error
    assert (workspace / "memory" / "2026-11-22.md").read_text() == "- dentist on Friday"
    assert events == [("memory/2026-11-22.md", "append", len("- dentist on Friday"))]


def test_memory_md_replace_keeps_a_backup(workspace: Path) -> None:
    (workspace / "MEMORY.md").write_text("# Memory\n- old fact\n")
    tools = memory_write_tools(MemoryWriter(workspace))
    text, is_error = run(
        tools, "memory_write", path="MEMORY.md", content="# Memory\n- new fact\n", mode="replace"
    )
    assert not is_error, text
    assert (workspace / "MEMORY.md").read_text() == "# Memory\n- new fact\n"
    assert (workspace / "MEMORY.md.bak").read_text() == "# Memory\n- old fact\n"


def test_memory_md_replace_that_drops_most_of_it_is_refused(workspace: Path) -> None:
    original = "# Memory\n" + "".join(f"- fact number {i}\n" for i in range(60))
    (workspace / "MEMORY.md").write_text(original)
    text, is_error = run(
        memory_write_tools(MemoryWriter(workspace)),
        "memory_write",
        path="MEMORY.md",
        content="# Memory\n",
        mode="replace",
    )
    assert is_error and "drops more than half" in text
    assert (workspace / "MEMORY.md").read_text() == original


@pytest.mark.parametrize("path", ["memory/2026-01-01.md", "AGENTS.md", "/etc/passwd"])
def test_memory_write_only_writes_memory_md(workspace: Path, path: str) -> None:
    text, is_error = run(memory_write_tools(MemoryWriter(workspace)), "memory_write", path=path, content="x")
    assert is_error and "only writes MEMORY.md" in text


def test_memory_read_is_limited_to_memory_files(workspace: Path) -> None:
    (workspace / "memory" / "notes.md").write_text("a\nb\nc\n")
    (workspace / "secret.txt").write_text("no")
    tools = [read_tool(MemoryWriter(workspace))]
    assert run(tools, "memory_read", path="memory/notes.md", **{"from": 2, "lines": 1}) == ("b", False)
    _text, is_error = run(tools, "memory_read", path="secret.txt")
    assert is_error
