"""Errors that name the problem: a NUL in a query, a foreign database under the index's name, and a
provider that starts answering with vectors of another width (through the loopback OpenAI server)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sessionmem.config import MemorySearchConfig
from sessionmem.memory.embed.embedder import EmbedderSelection
from sessionmem.memory.embed.remote import RemoteEmbedder
from sessionmem.memory.index import MemoryIndex
from sessionmem.memory.search.records import SearchRequest
from sessionmem.memory.tools.reading import handle_memory_search
from tests.memory.support import FTS_ONLY
from tests.support.openai_server import OpenAIServer

FTS = MemorySearchConfig.model_validate({"provider": "none"})


def note(workspace: Path) -> None:
    (workspace / "memory" / "2026-01-05.md").write_text("- The billing cutover moved to March 3.\n")


def test_a_nul_in_the_query_is_not_a_provider_failure(workspace: Path, tmp_path: Path) -> None:
    note(workspace)
    with MemoryIndex.open("main", workspace, FTS, state_dir=tmp_path / "state", watch=False) as index:
        index.sync()
        answer = handle_memory_search(index, {"query": "billing\x00 cutover"})
        direct = index.search(SearchRequest("billing\x00cutover\x07"))
    assert "disabled" not in answer and "unavailable" not in answer, answer
    assert [r["path"] for r in answer["results"]] == ["memory/2026-01-05.md"]
    assert [r.path for r in direct.results] == ["memory/2026-01-05.md"]


def test_a_database_with_the_index_tables_but_other_columns_is_moved_aside(
    workspace: Path, tmp_path: Path
) -> None:
    note(workspace)
    db = tmp_path / "state" / "memory" / "main.sqlite"
    db.parent.mkdir(parents=True)
    conn = sqlite3.connect(db)
    conn.executescript(
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);"
        "INSERT INTO meta VALUES ('schema_version', '1');"
        "CREATE TABLE files (path TEXT PRIMARY KEY, owner TEXT);"
        "CREATE TABLE chunks (id TEXT PRIMARY KEY, body TEXT);"
        "INSERT INTO chunks VALUES ('x', 'not ours');"
    )
    conn.commit()
    conn.close()
    with MemoryIndex.open("main", workspace, FTS, state_dir=tmp_path / "state", watch=False) as index:
        index.sync()
        hits = index.search(SearchRequest("billing cutover")).results
        issues = index.status().issues
    assert [h.path for h in hits] == ["memory/2026-01-05.md"]
    assert any("moved aside" in i and "columns" in i for i in issues), issues
    (aside,) = db.parent.glob("main.sqlite.corrupt-*")
    kept = sqlite3.connect(aside).execute("SELECT body FROM chunks").fetchall()
    assert kept == [("not ours",)]  # nothing lost: the other program's data is still there


def remote(server: OpenAIServer) -> EmbedderSelection:
    embedder = RemoteEmbedder("openai-compatible", "test-embedding", base_url=server.base_url)
    return EmbedderSelection(embedder, "openai")


def test_a_provider_that_changes_width_makes_search_and_status_say_so_and_the_index_rebuild(
    workspace: Path, tmp_path: Path, openai_server: OpenAIServer
) -> None:
    note(workspace)
    state = tmp_path / "state"
    settings = MemorySearchConfig.model_validate({"provider": "openai", "sync": {"onSearch": False}})
    openai_server.embeddings.dims = 64
    with MemoryIndex.open(
        "main", workspace, settings, state_dir=state, selection=remote(openai_server), watch=False
    ) as index:
        index.sync()
        assert index.status().vector_dims == 64
    openai_server.embeddings.dims = 32  # the endpoint now serves another model

    with MemoryIndex.open(
        "main", workspace, settings, state_dir=state, selection=remote(openai_server), watch=False
    ) as index:
        index.selection.embedder.embed_query("probe")  # the provider's width is learned on its first answer
        state_now = index.status()
        assert any("stale" in i and "32" in i and "64" in i for i in state_now.issues), state_now.issues
        assert state_now.dirty

    with MemoryIndex.open(
        "main", workspace, settings, state_dir=state, selection=remote(openai_server), watch=False
    ) as index:
        response = index.search(SearchRequest("when is the billing cutover", min_score=0.0))
        assert response.mode == "fts-only"
        assert any("stale" in w for w in response.warnings), response.warnings
        assert [r.path for r in response.results] == ["memory/2026-01-05.md"]  # keywords still answer
        assert index.wait_idle(60)
        assert index.status().vector_dims == 32
        again = index.search(SearchRequest("when is the billing cutover", min_score=0.0, explain=True))
    assert again.mode == "hybrid" and not again.warnings
    assert again.results[0].explanation is not None and again.results[0].explanation.vector_score is not None


def test_fts_only_index_is_unaffected(workspace: Path, tmp_path: Path) -> None:
    note(workspace)
    with MemoryIndex.open(
        "main", workspace, FTS, state_dir=tmp_path / "state", selection=FTS_ONLY, watch=False
    ) as index:
        assert index.search(SearchRequest("billing cutover")).mode == "fts-only"
