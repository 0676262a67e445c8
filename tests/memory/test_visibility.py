"""The index records who may see each file and filters on it inside every query (DESIGN decision 14).

Real parts: SQLite with FTS5 and sqlite-vec, and PostgreSQL (``index_store``), the real MiniLM GGUF
model for the vector paths.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from sessionmem.config import Config, MemorySearchConfig, merge
from sessionmem.errors import ConfigError
from sessionmem.memory.embed.embedder import EmbedderSelection
from sessionmem.memory.embed.local_gguf import LocalEmbedder
from sessionmem.memory.index import MemoryIndex
from sessionmem.memory.search.records import SearchRequest, VectorPath
from sessionmem.messages import Message
from sessionmem.privacy import EVERYTHING, reader_visibility
from sessionmem.session.stores.transcript_folder import Transcript
from tests.memory.stores import SQLITE, StoreUnderTest, open_store, rows
from tests.memory.support import FTS_ONLY

GROUP = reader_visibility("agent:main:discord:group:7")


def settings(**search: object) -> MemorySearchConfig:
    return (
        merge(
            Config(),
            {"agents": {"defaults": {"memorySearch": {"sources": ["memory", "sessions"], **search}}}},
        )
        .for_agent("main")
        .memory_search
    )


def fill(workspace: Path, sessions: Path) -> None:
    (workspace / "MEMORY.md").write_text("- The owner's blood type is AB negative.\n")
    (workspace / "memory" / "notes.md").write_text("- Blood donation day is on Friday in the lobby.\n")
    peers = workspace / "memory" / "peers" / "discord~group~1"
    peers.mkdir(parents=True)
    (peers / "2026-01-01-x.md").write_text("- Group one says blood type O is the universal donor.\n")
    for key, text in (
        ("agent:main:telegram:direct:42", "my blood type is B positive, keep it between us"),
        ("agent:main:discord:group:7", "who can give blood on friday?"),
        (None, "an old blood test result from a transcript without a key"),
    ):
        name = (key or "nokey").replace(":", "-")
        transcript = Transcript.open(sessions / f"{name}.jsonl", name, workspace, session_key=key)
        transcript.append_message(Message.user(text))


def stored(index: MemoryIndex, sql: str) -> list[tuple[str, str]]:
    """Rows of the index as a client of its store reads them."""
    return [(str(a), str(b)) for a, b in rows(index, sql)]


def filled_index(
    workspace: Path,
    tmp_path: Path,
    selection: EmbedderSelection = FTS_ONLY,
    store: StoreUnderTest = SQLITE,
) -> MemoryIndex:
    """The index of a workspace and sessions folder holding every audience (:func:`fill`), synced."""
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    fill(workspace, sessions)
    index = MemoryIndex.open(
        "main", workspace, store.settings(settings()), state_dir=tmp_path / "state", selection=selection,
        watch=False, sessions_dir=sessions,
    )  # fmt: skip
    index.sync()
    return index


def paths(index: MemoryIndex, visibility: object, query: str = "blood type") -> list[str]:
    request = SearchRequest(query, max_results=20, min_score=0.0, visibility=visibility)  # type: ignore[arg-type]
    return [r.path for r in index.search(request).results]


def test_each_file_records_its_audience(workspace: Path, tmp_path: Path, index_store: StoreUnderTest) -> None:
    with filled_index(workspace, tmp_path, store=index_store) as index:
        rows = dict(stored(index, "SELECT path, audience FROM files"))
        chunk_audiences = set(stored(index, "SELECT path, audience FROM chunks"))
    assert rows == {
        "MEMORY.md": "owner",
        "memory/notes.md": "shared",
        "memory/peers/discord~group~1/2026-01-01-x.md": "peer:discord~group~1",
        "sessions/agent-main-telegram-direct-42.jsonl": "peer:telegram~direct~42",
        "sessions/agent-main-discord-group-7.jsonl": "peer:discord~group~7",
        "sessions/nokey.jsonl": "owner",
    }
    assert chunk_audiences == set(rows.items())


def test_keyword_search_of_a_group_sees_shared_notes_and_its_own_chat(
    workspace: Path, tmp_path: Path, index_store: StoreUnderTest
) -> None:
    with filled_index(workspace, tmp_path, store=index_store) as index:
        assert len(paths(index, EVERYTHING, "blood")) == 6
        assert sorted(paths(index, GROUP, "blood")) == [
            "memory/notes.md",
            "sessions/agent-main-discord-group-7.jsonl",
        ]


@pytest.fixture(scope="module")
def minilm(request: pytest.FixtureRequest) -> LocalEmbedder:
    return LocalEmbedder(str(request.getfixturevalue("gguf_model")))


def test_every_vector_path_leaves_out_what_the_reader_may_not_see(
    workspace: Path, tmp_path: Path, minilm: LocalEmbedder, index_store: StoreUnderTest
) -> None:
    with filled_index(workspace, tmp_path, EmbedderSelection(minilm, "local"), index_store) as index:
        assert "MEMORY.md" in paths(index, EVERYTHING)
        assert set(paths(index, GROUP)) <= {"memory/notes.md", "sessions/agent-main-discord-group-7.jsonl"}
        router = index._get_searcher()._vectors
        query = minilm.embed_query("what is the owner's blood type")
        allowed = sorted(GROUP.labels or ())
        audience = dict(stored(index, "SELECT id, audience FROM chunks"))
        router.warm(minilm.model)
        names = ("matrix", "sqlite-vec", "brute-force") if index_store.kind == "sqlite" else ("matrix",)
        for name in names:
            hits = router.serve(
                VectorPath(name, "test"), query, 10, model=minilm.model, sources=["memory", "sessions"],
                audiences=allowed,
            )  # fmt: skip
            assert hits, name
            assert {audience[cid] for cid, _ in hits} <= set(allowed), name
            everything = router.serve(
                VectorPath(name, "test"), query, 10, model=minilm.model, sources=["memory", "sessions"]
            )
            assert "owner" in {audience[cid] for cid, _ in everything}, name


def test_an_index_written_before_audiences_gains_them_and_rebuilds(workspace: Path, tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    fill(workspace, sessions)
    state = tmp_path / "state"
    with MemoryIndex.open(
        "main", workspace, settings(), state_dir=state, selection=FTS_ONLY, watch=False, sessions_dir=sessions
    ) as index:
        index.sync()
        db = index.path
    # What an index of the previous release looks like: no audience columns, meta without "audience".
    conn = sqlite3.connect(db)
    for table in ("files", "chunks"):
        conn.execute(f"CREATE TABLE {table}_old AS SELECT * FROM {table}")
        conn.execute(f"DROP TABLE {table}")
        conn.execute(f"ALTER TABLE {table}_old RENAME TO {table}")
        conn.execute(f"ALTER TABLE {table} DROP COLUMN audience")
    meta = conn.execute("SELECT value FROM meta WHERE key = 'memory_index_meta_v1'").fetchone()[0]
    conn.execute(
        "UPDATE meta SET value = ? WHERE key = 'memory_index_meta_v1'",
        (meta.replace('"audience": 1, ', ""),),
    )
    conn.commit()
    conn.close()
    quiet = settings(sync={"onSearch": False})  # no background sync before the first look
    with MemoryIndex.open(
        "main", workspace, quiet, state_dir=state, selection=FTS_ONLY, watch=False, sessions_dir=sessions
    ) as index:
        before = paths(index, GROUP, "blood")  # not synced yet: every old row counts as the owner's
        assert before == []
        report = index.sync()
        assert report.full
        assert "MEMORY.md" not in paths(index, GROUP, "blood")
        assert "memory/notes.md" in paths(index, GROUP, "blood")


def agent_home(tmp_path: Path, name: str, note: str) -> Path:
    workspace = tmp_path / name
    (workspace / "memory").mkdir(parents=True)
    (workspace / "memory" / "notes.md").write_text(f"- {note}\n")
    return workspace


def test_two_agents_on_one_store_are_refused_whoever_opens_or_syncs_first(
    tmp_path: Path, index_store: StoreUnderTest
) -> None:
    # One store.path for both agents, without {agentId} (SQLite: one file; PostgreSQL: one schema).
    shared = (
        settings(store={"path": str(tmp_path / "one.sqlite")}) if index_store.kind == "sqlite" else settings()
    )
    shared = index_store.settings(shared)
    alice_ws = agent_home(tmp_path, "alice", "alice keeps TOKENALICE11 here")
    bob_ws = agent_home(tmp_path, "bob", "bob keeps TOKENBOB99 here")

    def open_as(agent: str, workspace: Path) -> MemoryIndex:
        return MemoryIndex.open(
            agent, workspace, shared, state_dir=tmp_path / agent, selection=FTS_ONLY, watch=False,
            sessions_dir=tmp_path / agent / "sessions",
        )  # fmt: skip

    alice = open_as("alice", alice_ws)
    try:
        # Neither has synced yet: bob is refused all the same, and his notes never reach the store.
        with pytest.raises(ConfigError, match=r"belongs to agent 'alice'.*must contain \{agentId\}"):
            open_as("bob", bob_ws)
        alice.sync()
        assert paths(alice, EVERYTHING, "TOKENBOB99") == []
        assert paths(alice, EVERYTHING, "TOKENALICE11") == ["memory/notes.md"]
        alice.sync(force=True)  # a full rebuild writes a fresh index: still alice's
        with pytest.raises(ConfigError, match="belongs to agent 'alice'"):
            open_as("bob", bob_ws)
        # An index synced by an earlier release says whose it is in its meta only: still refused.
        store = open_store(alice)
        try:
            with store.atomic():
                store.execute("DELETE FROM meta WHERE key = ?", ("memory_index_owner",))
        finally:
            store.close()
        with pytest.raises(ConfigError, match="belongs to agent 'alice'"):
            open_as("bob", bob_ws)
        assert paths(alice, EVERYTHING, "TOKENBOB99") == []
    finally:
        alice.close()
