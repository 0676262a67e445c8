"""Memory writes on a full disk, for real (the workspace on a 512 KB tmpfs, :mod:`tests.support.full_disk`).

Every write path (``memory_append_daily``, ``memory_write`` append and replace with its history version,
the flush's ``write``, the ``/new`` hook's file) says "no space left on device" and names the file; an
append that does not fit is cut back (no torn note), a replace keeps the old file, no temp file is left;
and a flush whose note could not be written does not count for its cycle: it runs again, and writes its
note once space is back.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from sessionmem.hooks import HookRegistry, load_hooks
from sessionmem.memory.tools.history import HISTORY_DIR
from sessionmem.memory.tools.writing import MemoryWriter, flush_write_tools, memory_write_tools
from sessionmem.messages import ToolCall
from sessionmem.model.scripted import ScriptedModel, echo, flush_aware, flush_write
from sessionmem.session.turn.events import FlushEvent, NewSessionEvent
from sessionmem.tools.define import dispatch, tool_map
from tests.scenarios.harness import make_runner, small_config, store_entry
from tests.support.full_disk import fill, free, slack

KEY = "agent:main:main"


def workspace_on(disk: Path) -> Path:
    workspace = disk / "workspace"
    (workspace / "memory").mkdir(parents=True)
    return workspace


def call(tools: list, name: str, **args: object) -> tuple[str, bool]:
    outcome = asyncio.run(dispatch(tool_map(tools), ToolCall("c1", name, dict(args))))
    return outcome.content, outcome.is_error


def stray_files(workspace: Path) -> list[str]:
    """Temp files a write left behind."""
    return sorted(str(p.relative_to(workspace)) for p in workspace.rglob("*") if ".tmp-" in p.name)


def memory_files(workspace: Path) -> list[str]:
    return sorted(str(p.relative_to(workspace)) for p in (workspace / "memory").rglob("*") if p.is_file())


def test_an_append_that_does_not_fit_is_cut_back_and_names_the_file(disk: Path) -> None:
    workspace = workspace_on(disk)
    writer = MemoryWriter(workspace)
    tools = memory_write_tools(writer)
    rel = writer.today_path()
    daily = workspace / rel
    daily.write_text("- the boiler was serviced on May 2\n")
    (workspace / "MEMORY.md").write_text("# Memory\n- prefers tea\n")
    fill(disk)
    for name, args, path in [
        ("memory_append_daily", {"text": "x" * (slack(daily) + 3000)}, daily),
        (
            "memory_write",
            {"path": "MEMORY.md", "content": "y" * (slack(workspace / "MEMORY.md") + 3000)},
            None,
        ),
    ]:
        target = path or workspace / "MEMORY.md"
        before = target.read_bytes()
        content, is_error = call(tools, name, **args)
        assert is_error, content
        assert "no space left on device" in content and target.name in content, content
        assert "OSError" not in content and "Errno" not in content
        assert target.read_bytes() == before  # cut back: no torn note

    (disk / "filler").unlink()
    assert call(tools, "memory_append_daily", text="- the plumber comes on Friday")[1] is False
    assert daily.read_text() == "- the boiler was serviced on May 2\n- the plumber comes on Friday"


def test_a_replace_on_a_full_disk_keeps_memory_md(disk: Path) -> None:
    workspace = workspace_on(disk)
    tools = memory_write_tools(MemoryWriter(workspace))
    original = "# Memory\n" + "".join(f"- fact {i}\n" for i in range(40))
    (workspace / "MEMORY.md").write_text(original)
    new = original.replace("fact 3\n", "fact 3 (corrected)\n")
    fill(disk)

    content, is_error = call(tools, "memory_write", path="MEMORY.md", content=new, mode="replace")
    assert is_error and "no space left on device" in content, content
    assert HISTORY_DIR in content  # the first write, the saved version, is the one that did not fit
    assert (workspace / "MEMORY.md").read_text() == original
    assert stray_files(workspace) == []

    free(disk, pages=1)  # the saved version fits; the new MEMORY.md does not
    content, is_error = call(tools, "memory_write", path="MEMORY.md", content=new, mode="replace")
    assert is_error and "no space left on device" in content and "MEMORY.md" in content, content
    assert (workspace / "MEMORY.md").read_text() == original
    assert stray_files(workspace) == []

    (disk / "filler").unlink()
    content, is_error = call(tools, "memory_write", path="MEMORY.md", content=new, mode="replace")
    assert not is_error and (workspace / "MEMORY.md").read_text() == new


def test_the_flush_write_on_a_full_disk_names_its_target(disk: Path) -> None:
    workspace = workspace_on(disk)
    tools = flush_write_tools(MemoryWriter(workspace), "memory/2026-03-07.md")
    fill(disk)
    content, is_error = call(tools, "write", path="memory/2026-03-07.md", content="- a durable note")
    assert is_error and "no space left on device" in content and "memory/2026-03-07.md" in content
    assert not (workspace / "memory" / "2026-03-07.md").exists()


def test_a_flush_whose_note_did_not_fit_does_not_count_and_runs_again(disk: Path, tmp_path: Path) -> None:
    workspace = workspace_on(disk)
    config = small_config(window=3000, reserve=500, floor=500, soft=800, keep=400)
    note = "- the invoice number is 4521"
    model = ScriptedModel(responder=flush_aware(echo, flush=flush_write(note)))
    runner, recorder = make_runner(model, tmp_path, workspace, config, hooks=HookRegistry())
    session = runner.open(KEY)
    filler = fill(disk)
    n = 0
    while not recorder.kinds("flush"):
        session.run_turn_sync(f"turn {n}: " + " ".join(f"w{j}" for j in range(40)))
        n += 1
        assert n < 40
    (flush,) = [e for e in recorder.events if isinstance(e, FlushEvent)]
    assert flush.error is not None and "no space left on device" in flush.error and flush.path in flush.error
    entry = store_entry(runner, KEY)
    assert entry.get("memoryFlushCompactionCount") != entry["compactionCount"]  # the cycle is not flushed

    again, recorder = make_runner(model, tmp_path, workspace, config, hooks=HookRegistry())
    reopened = again.open(KEY)  # the transcript, reconciled on open, does not count it either
    entry = store_entry(again, KEY)
    assert entry.get("memoryFlushCompactionCount") != entry["compactionCount"]
    assert not reopened.status().flushed_this_cycle

    filler.unlink()
    reopened.run_turn_sync("and now, with space")
    flushes = [e for e in recorder.events if isinstance(e, FlushEvent)]
    assert flushes and flushes[0].error is None
    assert note in (workspace / flushes[0].path).read_text()
    assert reopened.status().flushed_this_cycle


def test_the_new_hook_file_on_a_full_disk_is_a_named_hook_error_and_no_partial_file(
    disk: Path, tmp_path: Path
) -> None:
    workspace = workspace_on(disk)
    config = small_config(window=100_000)
    model = ScriptedModel(responder=flush_aware(echo, slug="boiler-service"))
    runner, recorder = make_runner(
        model, tmp_path, workspace, config, hooks=load_hooks(config, workspace, tmp_path / "hooks")
    )
    session = runner.open(KEY)
    session.run_turn_sync("the boiler was serviced on May 2")
    before = memory_files(workspace)
    fill(disk)
    session.run_turn_sync("/new")
    (event,) = [e for e in recorder.events if isinstance(e, NewSessionEvent)]
    assert event.memory_file is None
    problems = [e for e in event.hook_errors if "no space left on device" in e]
    assert problems and "boiler-service" in problems[0], event.hook_errors
    assert memory_files(workspace) == before  # no file, not even an empty one
    assert stray_files(workspace) == []
