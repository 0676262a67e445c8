"""A person can be forgotten (DESIGN 21): after ``forget``, nothing sessionmem keeps finds them.

The done-when of the issue: a person's notes are written through every path (the write tools, a replace
that keeps an earlier version, the flush, ``/new``, transcripts as a memory source), the person is
forgotten, and then no tool (``memory_search``, ``memory_get``), search, CLI command, MCP call or SQL
query on the index finds their text, on both index stores and all three session stores; another
person's notes all remain. With the real GGUF model, so cached embeddings are written and must go too.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sessionmem.cli import cli
from sessionmem.memory.search.records import SearchRequest
from tests.memory.stores import rows, store_under_test
from tests.scenarios.harness import result_paths
from tests.session.forget_home import (
    ANA,
    ANA_DISCORD,
    ANA_HOME,
    ANA_THREAD,
    ANA_WORD,
    BEN,
    BEN_HOME,
    BEN_WORD,
    Home,
    blobs_holding,
    files_holding,
)
from tests.support.stores import spec_for

REPO_ROOT = Path(__file__).resolve().parents[2]
ANA_KEYS = [ANA_DISCORD, ANA, ANA_THREAD]


@contextlib.contextmanager
def session_store(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str | None]:
    if kind == "postgresql":
        yield str(request.getfixturevalue("pg_dsn"))
    else:
        yield spec_for(kind, tmp_path / "state" / "agents" / "main" / "sessions")


@pytest.fixture(params=["sessions.json", "sqlite", "postgresql"])
def session_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=["sqlite", "postgresql"])
def index_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def home(
    tmp_path: Path, session_kind: str, index_kind: str, gguf_model: Path, request: pytest.FixtureRequest
) -> Iterator[Home]:
    with (
        session_store(session_kind, tmp_path, request) as spec,
        store_under_test(index_kind) as index_store,
    ):
        home = Home(tmp_path, session_store=spec, index_path=index_store.path, model_path=gguf_model)
        try:
            yield home
        finally:
            home.close()


def kept(home: Home, key: str) -> dict[str, bytes]:
    """The transcripts the store keeps of ``key``, and their stored lines."""
    store = home.runner.store
    return {
        t.name: b"\n".join(store.transcript_lines(t))
        for t in store.kept_transcripts()
        if t.session_key == key
    }


def search_paths(home: Home, word: str) -> set[str]:
    """What the owner's search finds for ``word`` (every match, no floor)."""
    response = home.index.search(SearchRequest(word, max_results=50, min_score=0.0))
    return {hit.path for hit in response.results if word in hit.snippet}


def mcp_search(home: Home, query: str) -> dict[str, Any]:
    """``memory_search`` over MCP (stdio, the official SDK's client), as a desktop assistant asks."""
    pytest.importorskip("mcp", reason="the mcp extra is not installed")
    import anyio
    from mcp import Client, StdioServerParameters

    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "sessionmem.cli", *home.options, "mcp"], env=env
    )

    async def main() -> dict[str, Any]:
        with anyio.fail_after(120):
            async with Client(params) as client:
                found = await client.call_tool("memory_search", {"query": query, "minScore": 0})
                data: dict[str, Any] = json.loads(found.content[0].text)
                return data

    return anyio.run(main)


def store_rows(home: Home, spec: str, word: str) -> list[tuple[Any, ...]]:
    """Rows of the PostgreSQL session store's three tables holding ``word`` (their text, as SQL sees it)."""
    import psycopg

    with psycopg.connect(spec) as conn:
        return [
            tuple(row)
            for table in ("sessionmem_sessions", "sessionmem_transcripts", "sessionmem_transcript_entries")
            for row in conn.execute(
                f"SELECT '{table}' FROM {table} t WHERE t::text LIKE %s", (f"%{word}%",)
            ).fetchall()
        ]


def index_rows_holding(home: Home, *needles: str) -> list[tuple[Any, ...]]:
    """Rows of the index's tables holding one of ``needles``, as SQL sees them."""
    found: list[tuple[Any, ...]] = []
    pg = not isinstance(home.index.path, Path)
    tables = {
        "chunks": "text || ' ' || path || ' ' || audience"
        + (" || ' ' || coalesce(indexed, '')" if pg else ""),
        "files": "path || audience",
        "meta": "value",
    }
    if pg:
        tables["chunks_fts_df"] = "lexeme"
        tables["chunks_fts"] = "fts::text"
    else:
        tables["chunks_fts"] = "text || ' ' || path"
    for table, column in tables.items():
        for needle in needles:
            found += rows(
                home.index, f"SELECT '{table}', {column} FROM {table} WHERE {column} LIKE ?", f"%{needle}%"
            )
    if not pg:  # the keyword index itself, tokens included (FTS5 MATCH reads its segments)
        found += rows(home.index, "SELECT 'fts', rowid FROM chunks_fts WHERE chunks_fts MATCH ?", needles[0])
    return found


@pytest.mark.timeout(600)
def test_a_forgotten_person_is_found_by_nothing_and_the_other_keeps_everything(
    home: Home, session_kind: str
) -> None:
    home.everyone_talks()
    # What Ana left: her folder (MEMORY.md, its earlier version, the daily log with the flush's note, the
    # /new file), her transcripts, cached vectors; and the search finds her.
    notes = home.files_under(ANA_HOME)
    assert any(b"flushed: " + ANA_WORD.encode() in text for text in notes.values())
    assert any(name.rsplit("/", 1)[-1].count("-") == 3 for name in notes)  # the /new file, <date>-<slug>.md
    assert home.files_under(f".memory-history/{ANA_HOME}")
    found = search_paths(home, ANA_WORD)
    # her transcripts are searched whatever the store keeps them as (files, or PostgreSQL rows)
    assert {f"{ANA_HOME}/MEMORY.md"} <= found and any(p.startswith("sessions/") for p in found)
    theirs = "SELECT hash FROM chunks WHERE audience LIKE ? OR audience LIKE ?"  # her chats and threads
    her_hashes = [r[0] for r in rows(home.index, theirs, "peer:%~42", "peer:%~42~%")]
    marks = ",".join("?" * len(her_hashes))
    cached = f"SELECT embedding FROM embedding_cache WHERE hash IN ({marks})"
    her_vectors = [bytes(r[0]) for r in rows(home.index, cached, *her_hashes)]
    assert her_hashes and her_vectors
    ben_notes = home.files_under(BEN_HOME)
    ben_history = home.files_under(f".memory-history/{BEN_HOME}")
    ben_entry = home.runner.store.get(BEN)
    ben_found = search_paths(home, BEN_WORD)
    ben_transcripts = kept(home, BEN)
    ben_cached = rows(home.index, "SELECT COUNT(*) FROM embedding_cache")[0][0] - len(her_vectors)

    report = home.runner.forget_sync("42")

    assert report.issues == ()
    assert list(report.session_keys) == ANA_KEYS
    assert report.folders == (ANA_HOME,)  # her thread and her Discord chat wrote no notes
    assert set(report.notes) == set(notes)
    assert report.index is not None and report.index.cache_entries == len(her_vectors)

    # Ben keeps everything: his notes, earlier versions, entry and transcripts, and what search finds.
    assert home.files_under(BEN_HOME) == ben_notes
    assert home.files_under(f".memory-history/{BEN_HOME}") == ben_history
    assert home.runner.store.get(BEN) == ben_entry
    assert kept(home, BEN) == ben_transcripts
    assert search_paths(home, BEN_WORD) == ben_found and ben_found
    assert rows(home.index, "SELECT COUNT(*) FROM embedding_cache")[0][0] == ben_cached

    # Her notes, earlier versions, transcripts and store entries are gone.
    assert not (home.workspace / ANA_HOME).exists()
    assert not (home.workspace / ".memory-history" / ANA_HOME).exists()
    assert not any(home.runner.store.get(key) for key in ANA_KEYS)
    assert set(home.runner.store.all()) == {BEN}
    assert all(k.session_key == BEN for k in home.runner.store.kept_transcripts())

    # The owner's search, the command line and an MCP client find nothing of her.
    assert search_paths(home, ANA_WORD) == set()
    cli_search = CliRunner().invoke(
        cli, [*home.options, "memory", "search", ANA_WORD, "--min-score", "0", "--json"]
    )
    assert cli_search.exit_code == 0, cli_search.output
    assert ANA_WORD not in cli_search.output and "~direct~42" not in cli_search.output
    cli_get = CliRunner().invoke(cli, [*home.options, "memory", "get", f"{ANA_HOME}/MEMORY.md"])
    assert cli_get.exit_code != 0 and ANA_WORD not in cli_get.output
    over_mcp = json.dumps(mcp_search(home, ANA_WORD))
    assert ANA_WORD not in over_mcp and "~direct~42" not in over_mcp
    # Nor SQL on the index: no row holds her word, her folder or her label, no cached vector of hers.
    assert index_rows_holding(home, ANA_WORD, "~direct~42") == []
    marks = ",".join("?" * len(her_hashes))
    assert rows(home.index, f"SELECT COUNT(*) FROM embedding_cache WHERE hash IN ({marks})", *her_hashes) == [
        (0,)
    ]
    assert rows(home.index, f"SELECT COUNT(*) FROM chunks WHERE hash IN ({marks})", *her_hashes) == [(0,)]
    # Nor any byte of any file sessionmem keeps: stores, transcripts, the index and their logs.
    assert files_holding(home.root, ANA_WORD, "~direct~42", "direct:42") == []
    assert blobs_holding(home.root, her_vectors) == []
    if session_kind == "postgresql":
        assert store_rows(home, str(home.config.session.store), ANA_WORD) == []
        assert store_rows(home, str(home.config.session.store), "direct:42") == []
    # No tool of another person's session, nor of the main session, finds or reads her (last: the
    # searches write her word into those sessions' transcripts).
    for reader in (BEN, "agent:main:main"):
        search, read_memory, read_log = home.tools(
            reader,
            ("memory_search", {"query": f"{ANA_WORD} locker code", "maxResults": 20, "minScore": 0}),
            ("memory_get", {"path": f"{ANA_HOME}/MEMORY.md"}),
            ("memory_get", {"path": f"{ANA_HOME}/{next(iter(notes)).rsplit('/', 1)[-1]}"}),
        )
        assert not any(path.startswith(ANA_HOME) for path in result_paths(search))
        assert ANA_WORD not in search
        assert "error" in json.loads(read_memory) and "error" in json.loads(read_log)
    (ben_search,) = home.tools(BEN, ("memory_search", {"query": f"{BEN_WORD} locker code", "minScore": 0}))
    assert BEN_WORD in ben_search
