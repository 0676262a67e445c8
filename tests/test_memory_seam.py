"""The seam between sessions and memory (issue 16): the runner reaches the memory index only through the
protocols of ``sessionmem.memory.session_memory``, which ``MemoryIndex`` implements, and the MCP server
writes memory with the memory room's own writer, importing nothing of ``sessionmem.session``."""

from __future__ import annotations

from pathlib import Path

from sessionmem.config import Config
from sessionmem.memory.index import MemoryIndex
from sessionmem.memory.session_memory import ForgettableMemory, SessionMemory
from tests.memory.support import FTS_ONLY
from tests.test_module_shape import all_modules, dependencies


def test_a_memory_index_is_what_the_session_runner_asks_for(tmp_path: Path, workspace: Path) -> None:
    settings = Config().for_agent("main").memory_search
    with MemoryIndex.open(
        "main", workspace, settings, state_dir=tmp_path / "state", selection=FTS_ONLY
    ) as index:
        seam: SessionMemory = index  # mypy checks every signature here
        assert isinstance(seam, SessionMemory) and isinstance(index, ForgettableMemory)
        assert seam.sessions_dir == tmp_path / "state" / "agents" / "main" / "sessions"
    assert not isinstance(object(), SessionMemory)


def test_the_mcp_server_imports_nothing_of_the_sessions() -> None:
    # What it imports, and what those import in turn; the package's lazy facade (``sessionmem``, asked
    # for ``__version__``) loads nothing by itself and stands above every room, so it is not followed.
    modules = all_modules()
    seen, todo, reached = set(), ["sessionmem.server.mcp"], []
    while todo:
        name = todo.pop()
        if name in seen or name == "sessionmem":
            continue
        seen.add(name)
        for target in dependencies(modules[name], modules):
            if target.startswith("sessionmem.session"):
                reached.append(f"{name} imports {target}")
            todo.append(target)
    assert "sessionmem.memory.tools.writing" in seen
    assert reached == []
