"""Every file sessionmem creates has the transcripts' mode, 0600: the index (which holds transcript text
when the sessions source is on) and its -wal/-shm, the locks, daily logs, MEMORY.md and its earlier
versions, the /new hook's file, sessions.json. Every folder it creates is 0700: a folder's names (a
person's id in ``memory/peers/<chat>/``, a ``/new`` slug, a session id) are private too."""

from __future__ import annotations

import ast
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from sessionmem.config import Config, merge
from sessionmem.memory.index import MemoryIndex
from sessionmem.messages import ToolCall
from sessionmem.model.scripted import ScriptedModel
from sessionmem.session.runner import SessionRunner


@pytest.fixture
def usual_umask() -> Iterator[None]:
    old = os.umask(0o022)  # a usual shell umask: without care, new files would be 0644
    yield
    os.umask(old)


def created_files(*roots: Path) -> dict[str, int]:
    """``{<root name>/<path>: mode}`` of every regular file under ``roots``."""
    return {
        f"{root.name}/{p.relative_to(root).as_posix()}": stat.S_IMODE(p.lstat().st_mode)
        for root in roots
        for p in root.rglob("*")
        if p.is_file() and not p.is_symlink()
    }


def created_folders(*roots: Path) -> dict[str, int]:
    """``{<root name>/<path>: mode}`` of ``roots`` and every folder under them."""
    return {
        Path(root.name, p.relative_to(root)).as_posix(): stat.S_IMODE(p.lstat().st_mode)
        for root in roots
        for p in [root, *root.rglob("*")]
        if p.is_dir() and not p.is_symlink()
    }


@pytest.fixture
def used(tmp_path: Path, usual_umask: None) -> Iterator[tuple[Path, Path]]:
    """(workspace, state) after a session wrote through every path: the write tools (MEMORY.md replaced,
    so a version is kept), the transcript, ``/new`` (a peer folder) and the index with transcripts
    (still open: its -wal and -shm files are there)."""
    workspace, state = tmp_path / "workspace", tmp_path / "state"
    config = merge(
        Config(),
        {
            "agents": {"defaults": {"memorySearch": {"sources": ["memory", "sessions"], "provider": "none"}}},
            "hooks": {"internal": {"entries": {"session-memory": {"llmSlug": False}}}},
        },
    )
    model = ScriptedModel(
        [
            [
                ToolCall("a", "memory_append_daily", {"text": "- a daily note"}),
                ToolCall("b", "memory_write", {"path": "MEMORY.md", "content": "- first"}),
            ],
            ToolCall(
                "c", "memory_write", {"path": "MEMORY.md", "content": "- first\n- second", "mode": "replace"}
            ),
            "done",
        ],
        responder=lambda request: "ok",
    )
    runner = SessionRunner(model, config=config, workspace=workspace, state_dir=state)
    index = MemoryIndex.open(
        "main",
        workspace,
        config.for_agent("main").memory_search,
        state_dir=state,
        watch=False,
        sessions_dir=runner.store.sessions_dir,
    )
    runner.memory_index = index
    try:
        session = runner.open()
        session.run_turn_sync("remember things")
        session.run_turn_sync("/new")
        index.sync()
        index.sync(force=True)
        yield workspace, state
    finally:
        index.close()


def test_every_file_sessionmem_creates_is_private(used: tuple[Path, Path]) -> None:
    files = created_files(*used)
    assert any(name.endswith(".sqlite-wal") for name in files) and any(".jsonl" in n for n in files)
    assert any("memory/peers/main/" in name for name in files)  # the /new hook's file
    assert any(".memory-history/MEMORY.md/" in name for name in files)  # the replaced version
    loose = {name: oct(mode) for name, mode in files.items() if mode != 0o600}
    assert loose == {}


def test_every_folder_sessionmem_creates_is_private(used: tuple[Path, Path]) -> None:
    folders = created_folders(*used)
    for made in ("workspace/memory/peers/main", "workspace/.memory-history", "state"):
        assert made in folders
    assert any(name.endswith("/sessions") for name in folders)
    assert any(name.endswith("/locks") for name in folders)
    loose = {name: oct(mode) for name, mode in folders.items() if mode != 0o700}
    assert loose == {}


def test_folders_are_made_only_through_the_private_helper() -> None:
    """Every folder goes through ``safefs.make_private_dirs`` (or ``safefs.folder_under``): a ``mkdir``
    or ``makedirs`` anywhere else would make a folder with the umask's mode."""
    package = Path(__file__).resolve().parent.parent / "sessionmem"
    calls = [
        f"{path.relative_to(package)}:{node.lineno}"
        for path in sorted(package.rglob("*.py"))
        if path.name != "safefs.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in {"mkdir", "makedirs"}
    ]
    assert calls == []
