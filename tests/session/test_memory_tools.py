"""Memory write tools: append-only daily logs, MEMORY.md with a backup, the flush's single target."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from freezegun import freeze_time

from sessionmem.config import MemorySearchConfig
from sessionmem.memory.index import MemoryIndex
from sessionmem.memory.search.records import SearchRequest
from sessionmem.memory.tools.history import HISTORY_DIR, versions
from sessionmem.memory.tools.reading import handle_memory_get
from sessionmem.memory.tools.writing import MemoryWriter, flush_write_tools, memory_write_tools, read_tool
from sessionmem.messages import ToolCall
from sessionmem.tools.define import dispatch, tool_map


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
    (saved,) = (workspace / ".memory-history" / "MEMORY.md").iterdir()
    assert saved.read_text() == "# Memory\n- old fact\n"


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


# ---------------------------------------------------------------------------- MEMORY.md history


def test_replace_in_steps_cannot_erase_memory_md(workspace: Path) -> None:
    """Each replace drops just under half (allowed); every earlier version stays recoverable."""
    facts = [f"- fact {i:02d}: the {i}th thing worth keeping about the user" for i in range(40)]
    (workspace / "MEMORY.md").write_text("\n".join(facts) + "\n")
    tools = memory_write_tools(MemoryWriter(workspace, timezone_name="UTC"))
    kept = facts
    for _ in range(2):
        kept = kept[: len(kept) // 2 + 1]
        text, is_error = run(
            tools, "memory_write", path="MEMORY.md", content="\n".join(kept) + "\n", mode="replace"
        )
        assert not is_error, text
        saved = text.split("saved as ", 1)[1].split(" ", 1)[0]
        assert saved.startswith(f"{HISTORY_DIR}/MEMORY.md/") and (workspace / saved).is_file()
        assert "newest 20" in text
    assert (workspace / "MEMORY.md").read_text().count("- fact") == 11
    history = "".join(p.read_text() for p in (workspace / HISTORY_DIR / "MEMORY.md").iterdir())
    assert all(fact in history for fact in facts)
    assert not (workspace / "MEMORY.md.bak").exists()


def test_history_keeps_the_newest_twenty_versions(workspace: Path) -> None:
    writer = MemoryWriter(workspace, timezone_name="UTC")
    for i in range(25):
        writer.replace("MEMORY.md", f"- version {i}\n")
    names = versions(workspace, "MEMORY.md")
    assert len(names) == 20 == len(list((workspace / HISTORY_DIR / "MEMORY.md").iterdir()))
    texts = [(workspace / HISTORY_DIR / "MEMORY.md" / n).read_text() for n in names]
    assert texts == [f"- version {i}\n" for i in range(4, 24)]  # oldest dropped, order kept


def test_history_is_never_indexed_nor_readable_by_the_tools(workspace: Path, tmp_path: Path) -> None:
    writer = MemoryWriter(workspace, timezone_name="UTC")
    writer.replace("MEMORY.md", "- the old zeppelin fact\n")
    writer.replace("MEMORY.md", "- the new fact\n")
    (saved,) = (workspace / HISTORY_DIR / "MEMORY.md").iterdir()
    settings = MemorySearchConfig.model_validate({"provider": "none", "extraPaths": ["."]})
    with MemoryIndex.open("main", workspace, settings, state_dir=tmp_path / "state", watch=False) as index:
        index.sync()
        assert index.search(SearchRequest("zeppelin")).results == ()
    answer = handle_memory_get(workspace, {"path": saved.relative_to(workspace).as_posix()})
    assert answer["text"] == "" and answer["disabled"]


# ---------------------------------------------------------------------------- control characters


def test_writes_strip_nul_and_control_characters_and_say_so(workspace: Path) -> None:
    writer = MemoryWriter(workspace, timezone_name="UTC")
    with freeze_time("2026-03-07 12:00:00"):
        text = writer.append(writer.today_path(), "- tea\x00 with\x07 milk\r\n- and\ttabs\x1b[31m\n")
        writer.replace("MEMORY.md", "# Memory\x00\n- kept\x0b\n")
        flushed, is_error = run(
            flush_write_tools(writer, "memory/2026-03-07.md"),
            "write",
            path="memory/2026-03-07.md",
            content="x\x00y",
        )
    assert (
        "removed 3 control characters" in text and not is_error and "removed 1 control character" in flushed
    )
    assert (workspace / "memory" / "2026-03-07.md").read_text() == "- tea with milk\n- and\ttabs[31m\nxy"
    assert (workspace / "MEMORY.md").read_text() == "# Memory\n- kept\n"


def test_a_file_with_one_bad_byte_is_still_indexed_and_readable(workspace: Path, tmp_path: Path) -> None:
    facts = "".join(f"- fact {i}: the harbour crane number {i} is painted blue\n" for i in range(20))
    (workspace / "memory" / "2026-03-07.md").write_bytes(facts.encode() + b"- a stray \x00 byte\n")
    answer = handle_memory_get(workspace, {"path": "memory/2026-03-07.md"})
    assert "harbour crane number 3" in answer["text"] and "a stray \ufffd byte" in answer["text"]
    settings = MemorySearchConfig.model_validate({"provider": "none"})
    with MemoryIndex.open("main", workspace, settings, state_dir=tmp_path / "state", watch=False) as index:
        report = index.sync()
        hits = index.search(SearchRequest("harbour crane painted blue")).results
        issues = index.status().issues
    assert hits and hits[0].path == "memory/2026-03-07.md"
    assert report.files_indexed == 1 and not any("binary" in issue for issue in issues)
    assert any("control character" in issue and "2026-03-07.md" in issue for issue in issues)
