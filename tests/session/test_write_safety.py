"""No write leaves the workspace: symlinks and hard links are never written through, on every write path
(daily log appends, the flush, MEMORY.md replace and its earlier versions, the /new hook's file), even
when a file or a folder is swapped for a symlink while the writes run."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import sys
import threading
from pathlib import Path

import pytest

from sessionmem.config import Config
from sessionmem.hooks import COMMAND_NEW, HookEvent, load_hooks
from sessionmem.memory.tools.writing import MemoryWriter, flush_write_tools
from sessionmem.messages import Message, ToolCall
from sessionmem.session.stores.transcript_folder import Transcript
from sessionmem.tools.define import ToolError, dispatch, tool_map

OUTSIDE = "must never change\n"
DAY = "memory/2026-03-07.md"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "target.md").write_text(OUTSIDE)
    return folder


def untouched(outside: Path) -> bool:
    return [p.name for p in outside.iterdir()] == ["target.md"] and (
        outside / "target.md"
    ).read_text() == OUTSIDE


def test_replace_never_writes_through_a_backup_symlink(workspace: Path, outside: Path) -> None:
    (workspace / "MEMORY.md").write_text("- old fact\n")
    (workspace / "MEMORY.md.bak").symlink_to(outside / "target.md")
    with contextlib.suppress(ToolError):  # refused, or done without the symlink: never written through
        MemoryWriter(workspace).replace("MEMORY.md", "- old fact\n- new fact\n")
    assert untouched(outside)


@pytest.mark.parametrize("link", [".memory-history", ".memory-history/MEMORY.md"])
def test_replace_never_saves_a_version_through_a_symlinked_history_folder(
    workspace: Path, outside: Path, link: str
) -> None:
    (workspace / "MEMORY.md").write_text("- old fact\n")
    (workspace / link).parent.mkdir(parents=True, exist_ok=True)
    (workspace / link).symlink_to(outside, target_is_directory=True)
    with pytest.raises(ToolError, match="symlink"):
        MemoryWriter(workspace).replace("MEMORY.md", "- old fact\n- new fact\n")
    assert untouched(outside)
    assert (workspace / "MEMORY.md").read_text() == "- old fact\n"  # nothing replaced without its version


@pytest.mark.parametrize("link", ["memory", "memory/peers", "memory/peers/main"])
def test_the_new_hook_never_writes_through_a_symlinked_folder(
    workspace: Path, outside: Path, tmp_path: Path, link: str
) -> None:
    target = workspace / link
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        target.rmdir()
    target.symlink_to(outside, target_is_directory=True)
    sessions = tmp_path / "state" / "agents" / "main" / "sessions"
    transcript = Transcript.open(sessions / "s1.jsonl", "s1", workspace, session_key="agent:main:main")
    transcript.append_message(Message.user("the boat key is under the mat"))
    event = HookEvent(
        name=COMMAND_NEW,
        workspace=workspace,
        state_dir=tmp_path / "state",
        previous_session_entry={"sessionId": "s1"},
        transcript_path=transcript.path,
        config=Config(),
    )
    (outcome,) = [
        o for o in asyncio.run(load_hooks(event.config, workspace).emit(event)) if o.hook == "session-memory"
    ]
    assert not outcome.ok and "symlink" in str(outcome.error)
    assert untouched(outside)


def exchange(a: Path, b: Path) -> None:
    """Swap two paths in one atomic step (Linux renameat2 RENAME_EXCHANGE): never a moment without either."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.renameat2(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


AT_FDCWD, RENAME_EXCHANGE = -100, 2


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the atomic swap uses Linux's renameat2")
@pytest.mark.parametrize("swapped", ["file", "folder"])
def test_appends_never_land_outside_while_the_log_is_swapped_for_a_symlink(
    workspace: Path, outside: Path, swapped: str
) -> None:
    """A thread swaps the daily log (or its folder) with a symlink to a place outside and back, as fast
    as it can, while 3,000 appends run. Appends that meet the symlink are refused; none lands outside."""
    rel = "memory/peers/main/2026-03-07.md"
    log = workspace / rel
    log.parent.mkdir(parents=True)
    log.write_text("")
    victim = log if swapped == "file" else log.parent
    link = victim.with_name(victim.name + ".link")
    link.symlink_to(outside / "target.md" if swapped == "file" else outside)
    stop = threading.Event()
    swaps = 0

    def swap() -> None:
        nonlocal swaps
        while not stop.is_set():
            exchange(victim, link)  # the symlink takes the real one's place ...
            exchange(victim, link)  # ... and gives it back
            swaps += 1

    writer = MemoryWriter(workspace)
    thread = threading.Thread(target=swap)
    thread.start()
    written = refused = 0
    try:
        for i in range(3000):
            try:
                writer.append(rel, f"- note {i}\n")
                written += 1
            except ToolError:
                refused += 1
    finally:
        stop.set()
        thread.join()
    assert untouched(outside), (written, refused, swaps)
    assert swaps > 100 and written > 0 and written + refused == 3000
    assert log.read_text().count("- note ") == written


def test_a_hard_link_to_a_file_elsewhere_is_not_appended_to(workspace: Path, outside: Path) -> None:
    os.link(outside / "target.md", workspace / DAY)
    with pytest.raises(ToolError, match="hard links"):
        MemoryWriter(workspace).append(DAY, "- note")
    assert untouched(outside)


def test_the_flush_write_refuses_a_symlinked_daily_log(workspace: Path, outside: Path) -> None:
    (workspace / DAY).symlink_to(outside / "target.md")
    tools = tool_map(flush_write_tools(MemoryWriter(workspace, timezone_name="UTC"), DAY))
    outcome = asyncio.run(dispatch(tools, ToolCall("c1", "write", {"path": DAY, "content": "- flushed"})))
    assert outcome.is_error and "symlink" in outcome.content
    assert untouched(outside)
