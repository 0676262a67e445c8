"""The watcher on watchdog's real observer: changes mark the index dirty and sync after the debounce."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sessionmem.config import MemorySearchConfig
from sessionmem.memory.embed.embedder import EmbedderSelection
from sessionmem.memory.index import MemoryIndex
from sessionmem.memory.store.database import connect

pytestmark = pytest.mark.timeout(60)

FTS_ONLY = EmbedderSelection(None, "none", reason="no provider in tests")


def indexed_paths(index: MemoryIndex) -> set[str]:
    conn, _ = connect(index.path)
    try:
        return {row[0] for row in conn.execute("SELECT path FROM files")}
    finally:
        conn.close()


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


@pytest.fixture
def watched(workspace: Path, tmp_path: Path) -> Iterator[Callable[..., MemoryIndex]]:
    opened: list[MemoryIndex] = []

    def _open(debounce_ms: int = 200, ws: Path = workspace, **values: Any) -> MemoryIndex:
        config = MemorySearchConfig.model_validate({"sync": {"watchDebounceMs": debounce_ms}, **values})
        index = MemoryIndex.open("main", ws, config, state_dir=tmp_path / "state", selection=FTS_ONLY)
        opened.append(index)
        index.sync()
        index.start_watching()
        return index

    yield _open
    for index in opened:
        index.close()


def test_new_file_is_indexed_after_the_debounce(workspace: Path, watched: Any) -> None:
    index = watched(debounce_ms=300)
    assert not index.dirty
    (workspace / "memory" / "new.md").write_text("fresh note\n", encoding="utf-8")
    assert wait_for(lambda: index.dirty or "memory/new.md" in indexed_paths(index))
    assert wait_for(lambda: "memory/new.md" in indexed_paths(index))
    assert wait_for(lambda: not index.dirty)


def test_a_change_waits_for_the_debounce(workspace: Path, watched: Any) -> None:
    index = watched(debounce_ms=600_000)
    (workspace / "memory" / "new.md").write_text("fresh note\n", encoding="utf-8")
    assert wait_for(lambda: index.dirty)  # the watcher saw it...
    assert "memory/new.md" not in indexed_paths(index)  # ...and syncs only when the pause ends


def test_a_library_opened_index_watches_without_being_asked(workspace: Path, tmp_path: Path) -> None:
    config = MemorySearchConfig.model_validate({"sync": {"watchDebounceMs": 100}})  # sync.watch: default on
    with MemoryIndex.open(
        "main", workspace, config, state_dir=tmp_path / "state", selection=FTS_ONLY
    ) as index:
        index.sync()
        (workspace / "memory" / "new.md").write_text("fresh note\n", encoding="utf-8")
        assert wait_for(lambda: "memory/new.md" in indexed_paths(index))  # no start_watching() call


@pytest.mark.parametrize(
    ("setting", "watch"), [(True, False), (False, None)], ids=["watch=False", "sync.watch=false"]
)
def test_an_unwatched_index_starts_no_threads(
    workspace: Path, tmp_path: Path, setting: bool, watch: bool | None
) -> None:
    config = MemorySearchConfig.model_validate({"sync": {"watch": setting, "watchDebounceMs": 50}})
    before = set(threading.enumerate())
    state = tmp_path / "state"
    with MemoryIndex.open(
        "main", workspace, config, state_dir=state, selection=FTS_ONLY, watch=watch
    ) as index:
        assert set(threading.enumerate()) - before == set()  # no observer, no timer
        index.sync()
        (workspace / "memory" / "new.md").write_text("fresh note\n", encoding="utf-8")
        time.sleep(0.4)
        assert indexed_paths(index) == set()  # nothing watched: the next sync (or search) finds it
        assert index.sync().files_indexed == 1


def test_each_event_restarts_the_debounce(workspace: Path, watched: Any) -> None:
    index = watched(debounce_ms=600)
    for i in range(6):
        (workspace / "memory" / f"burst{i}.md").write_text(f"burst {i}\n", encoding="utf-8")
        time.sleep(0.1)
    # 0.6 s after the first write, but only 0.1 s after the last: the timer was reset, nothing synced.
    assert indexed_paths(index) == set()
    assert wait_for(lambda: len(indexed_paths(index)) == 6)


def test_change_delete_and_move_are_followed(workspace: Path, watched: Any) -> None:
    note = workspace / "memory" / "a.md"
    note.write_text("first version\n", encoding="utf-8")
    index = watched()
    assert indexed_paths(index) == {"memory/a.md"}
    note.rename(workspace / "memory" / "b.md")
    assert wait_for(lambda: indexed_paths(index) == {"memory/b.md"})
    (workspace / "memory" / "b.md").unlink()
    assert wait_for(lambda: indexed_paths(index) == set())
    (workspace / "MEMORY.md").write_text("long-term\n", encoding="utf-8")
    assert wait_for(lambda: indexed_paths(index) == {"MEMORY.md"})


def test_irrelevant_files_do_not_mark_dirty(workspace: Path, watched: Any) -> None:
    index = watched()
    (workspace / "memory" / "node_modules").mkdir()
    time.sleep(0.3)
    index.sync()  # the folder creation is a memory-tree event; settle it
    (workspace / "memory" / "notes.txt").write_text("not markdown\n", encoding="utf-8")
    (workspace / "memory" / "node_modules" / "pkg.md").write_text("dependency docs\n", encoding="utf-8")
    (workspace / "README.md").write_text("not memory\n", encoding="utf-8")
    time.sleep(0.5)
    assert not index.dirty
    assert indexed_paths(index) == set()


def test_memory_folder_created_after_start_is_watched(tmp_path: Path, watched: Any) -> None:
    ws = tmp_path / "late"
    ws.mkdir()
    index = watched(ws=ws)
    (ws / "memory").mkdir()
    time.sleep(0.3)  # the observer schedules the new folder
    (ws / "memory" / "2026-02-01.md").write_text("late note\n", encoding="utf-8")
    assert wait_for(lambda: "memory/2026-02-01.md" in indexed_paths(index))


def test_extra_paths_are_watched(workspace: Path, tmp_path: Path, watched: Any) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    single = tmp_path / "single" / "todo.md"
    single.parent.mkdir()
    index = watched(extraPaths=[str(notes), str(single)])
    (notes / "deep").mkdir()
    (notes / "deep" / "idea.md").write_text("an idea\n", encoding="utf-8")
    assert wait_for(lambda: "../notes/deep/idea.md" in indexed_paths(index))
    single.write_text("todo list\n", encoding="utf-8")
    assert wait_for(lambda: "../single/todo.md" in indexed_paths(index))


def test_close_stops_watching(workspace: Path, watched: Any) -> None:
    index = watched()
    index.close()
    (workspace / "memory" / "after.md").write_text("after close\n", encoding="utf-8")
    time.sleep(0.4)
    assert "memory/after.md" not in indexed_paths(index)
