"""Transcripts archived by ``/new`` stay searchable: real SQLite with sqlite-vec, transcripts written by
``Transcript`` and by a ``SessionRunner`` with ``ScriptedModel``, the bundled session-memory hook."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from sessionmem.config import Config, merge
from sessionmem.errors import MemoryPathError
from sessionmem.hooks import HookRegistry
from sessionmem.memory.index import MemoryIndex
from sessionmem.memory.search.records import SearchRequest
from sessionmem.memory.sync.session_text import entry_date, list_session_files
from sessionmem.memory.tools.paths import resolve_memory_target
from sessionmem.messages import Message
from sessionmem.model.base import ModelRequest
from sessionmem.model.scripted import ScriptedModel, flush_aware, last_user_text
from sessionmem.session.runner import Session, SessionRunner
from sessionmem.session.stores.transcript_folder import archive_name
from tests.memory.stores import StoreUnderTest, rows
from tests.memory.support import (
    HashEmbedder,
    chat,
    chunk_rows,
    index_opener,
    jsonl_messages,
    make_config,
    new_transcript,
    sessions_dir,
)

WHEN = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)


@pytest.fixture
def open_index(
    workspace: Path, state: Path, index_store: StoreUnderTest
) -> Iterator[Callable[..., MemoryIndex]]:
    """Opens the main agent's index, on each store in turn."""
    with index_opener(workspace, state, index_store) as opener:
        yield opener


def respond(request: ModelRequest) -> str:
    if request.purpose == "slug":
        return "harbour-notes"
    return f"Noted: {last_user_text(request)}"


def with_hook(config: Config, **options: Any) -> Config:
    return merge(config, {"hooks": {"internal": {"entries": {"session-memory": options}}}})


def start_session(
    config: Config, index: MemoryIndex, state: Path, workspace: Path, hooks: HookRegistry | None = None
) -> Session:
    model = ScriptedModel(responder=flush_aware(respond))
    runner = SessionRunner(
        model, config=config, workspace=workspace, state_dir=state, memory_index=index, hooks=hooks
    )
    return runner.open()


def vec_ids(index: MemoryIndex) -> set[str]:
    """The ids of the chunks with a vector (sqlite-vec's table in SQLite, the chunks' own in PostgreSQL)."""
    if isinstance(index.path, Path):
        return {row[0] for row in rows(index, "SELECT id FROM chunks_vec")}
    return {row[0] for row in rows(index, "SELECT id FROM chunks WHERE embedding IS NOT NULL")}


def archive_of(live: Path) -> Path:
    (archived,) = live.parent.glob(f"{live.name}.reset.*")
    return archived


def search_after_new(session: Session, index: MemoryIndex, query: str) -> list[dict[str, Any]]:
    """memory_search from the new session: the first call starts the sync the /new hook marked due."""
    memory = session.tools.memory
    memory.call("memory_search", {"query": query})
    assert index.wait_idle(10)
    results: list[dict[str, Any]] = json.loads(memory.call("memory_search", {"query": query}))["results"]
    return results


# ---------------------------------------------------------------------------- end to end


def test_a_fact_from_a_session_ended_by_new_is_still_found_and_readable(
    open_index: Callable[..., MemoryIndex], state: Path, workspace: Path
) -> None:
    # The hook keeps only the last two messages, so the fact survives in the archived transcript alone.
    config = with_hook(make_config(), messages=2)
    embedder = HashEmbedder()
    index = open_index(config, embedder)
    session = start_session(config, index, state, workspace)
    session.run_turn_sync("The harbour master is called Ingrid Solberg and her office is on pier nine.")
    for i in range(4):
        session.run_turn_sync(f"filler {i}: we talked about tomatoes, beans and the compost heap again")
    index.sync()  # what a delta pass or a search would have done by now
    live = session.transcript.path
    live_rows = chunk_rows(index, f"sessions/{live.name}")
    assert len(live_rows) >= 3
    session.run_turn_sync("One more thing: the ferry to the island leaves at 7:40 on Fridays.")  # not indexed
    embedded_before = list(embedder.texts)

    session.run_turn_sync("/new")
    archived = archive_of(live)
    assert not live.exists() and session.transcript.path != live

    results = search_after_new(session, index, "who is the harbour master Ingrid")
    hit = next(r for r in results if r["path"].startswith("sessions/"))
    assert hit["path"] == f"sessions/{archived.name}" and ".jsonl.reset." in hit["path"]
    assert "Ingrid Solberg" in hit["snippet"]
    # The hit is dated by its first message's timestamp.
    with archived.open("rb") as handle:
        first = orjson.loads(handle.readlines()[hit["startLine"] - 1])
    assert hit["date"] == entry_date(first)

    # memory_get reads the archived transcript's lines the hit names.
    lines = jsonl_messages(archived, hit["startLine"], hit["endLine"])
    got = json.loads(
        session.tools.memory.call(
            "memory_get",
            {"path": hit["path"], "from": hit["startLine"], "lines": hit["endLine"] - hit["startLine"] + 1},
        )
    )
    assert got["path"] == hit["path"]
    assert got["text"].splitlines() == lines
    assert "User: The harbour master is called Ingrid Solberg" in got["text"]

    # The rows moved in place: nothing is left under the live name; every chunk before the last one
    # is the same row (rowid, lines, text, write time), with an id (and vector) for its new path.
    assert chunk_rows(index, f"sessions/{live.name}") == []
    archive_rows = chunk_rows(index, hit["path"])
    tail_line = live_rows[-1][2]
    kept = [r for r in live_rows if r[2] < tail_line]
    assert kept and [(r[0], *r[2:]) for r in archive_rows[: len(kept)]] == [(r[0], *r[2:]) for r in kept]
    assert not {r[1] for r in archive_rows} & {r[1] for r in live_rows}
    assert {r[1] for r in archive_rows} <= vec_ids(index)
    assert not {r[1] for r in live_rows} & vec_ids(index)
    assert any("ferry" in r[4] for r in archive_rows)  # the lines appended after the last pass

    # No text was embedded twice: after /new only new text (the ferry line, the hook's memory file).
    embedded_after = embedder.texts[len(embedded_before) :]
    assert len(embedder.texts) == len(set(embedder.texts))
    assert embedded_after and not set(embedded_after) & set(embedded_before)
    assert not any("Ingrid" in text for text in embedded_after)

    # The archive is not a live file: delta tracking ignores it, the live listing leaves it out.
    scheduler = index.session_delta
    assert scheduler is not None and scheduler.wants(archived) is None
    assert all(".reset." not in name for name in scheduler.tracked())
    assert list_session_files(sessions_dir(state)) == [session.transcript.path]


def test_the_hooks_memory_file_and_the_archived_transcript_come_back_once(
    open_index: Callable[..., MemoryIndex], state: Path, workspace: Path
) -> None:
    config = make_config(tokens=400, overlap=0)
    index = open_index(config, HashEmbedder())
    session = start_session(config, index, state, workspace)
    session.run_turn_sync("We should move the greenhouse tomatoes to the east bed next spring.")
    session.run_turn_sync("Also order the copper tape against slugs before March.")
    live = session.transcript.path
    session.run_turn_sync("/new")
    archived = archive_of(live)
    (memory_file,) = (workspace / "memory" / "peers" / "main").glob("*-harbour-notes.md")

    results = search_after_new(session, index, "greenhouse tomatoes east bed copper tape slugs")
    # Both copies are indexed, but one conversation comes back once.
    assert chunk_rows(index, f"sessions/{archived.name}")
    assert chunk_rows(index, f"memory/peers/main/{memory_file.name}")
    paths = [r["path"] for r in results]
    saved = f"memory/peers/main/{memory_file.name}"
    assert paths.count(saved) + paths.count(f"sessions/{archived.name}") == 1


def test_new_without_the_session_memory_hook_still_leaves_the_archive_searchable(
    open_index: Callable[..., MemoryIndex], state: Path, workspace: Path
) -> None:
    config = merge(
        make_config(), {"hooks": {"internal": {"entries": {"session-memory": {"enabled": False}}}}}
    )
    index = open_index(config, HashEmbedder())
    session = start_session(config, index, state, workspace)
    session.run_turn_sync("The spare anchor is stored in locker B under the tarpaulin.")
    index.sync()
    live = session.transcript.path
    session.run_turn_sync("/new")
    archived = archive_of(live)
    assert list((workspace / "memory").rglob("*.md")) == []  # nothing but the archive keeps the conversation
    results = search_after_new(session, index, "where is the spare anchor")
    assert [r["path"] for r in results if r["source"] == "sessions"] == [f"sessions/{archived.name}"]


# ---------------------------------------------------------------------------- the rename, in detail


def test_a_renamed_transcript_keeps_its_rows_and_nothing_is_embedded_again(
    open_index: Callable[..., MemoryIndex], state: Path, workspace: Path
) -> None:
    embedder = HashEmbedder()
    index = open_index(make_config(), embedder)
    transcript = new_transcript(state, workspace)
    chat(transcript, index, 30, topic="gardening")
    index.sync()
    before = chunk_rows(index, "sessions/s1.jsonl")
    embedded = len(embedder.texts)

    archived = transcript.path.rename(archive_name(transcript.path, WHEN))
    report = index.sync()

    rel = f"sessions/{archived.name}"
    after = chunk_rows(index, rel)
    assert (report.files_renamed, report.embedded, report.chunks_written) == (1, 0, 0)
    assert len(embedder.texts) == embedded
    assert [(r[0], *r[2:]) for r in after] == [(r[0], *r[2:]) for r in before]
    assert chunk_rows(index, "sessions/s1.jsonl") == []
    hits = index.search(SearchRequest(query="gardening number7", explain=True)).results
    assert hits[0].path == rel
    assert hits[0].explanation is not None and hits[0].explanation.vector_score  # vectors moved too
    assert index.sync().wrote is False  # the archive is now an unchanged file


def test_an_archive_that_is_not_the_indexed_file_is_indexed_from_its_own_content(
    open_index: Callable[..., MemoryIndex], state: Path, workspace: Path
) -> None:
    index = open_index(make_config())  # FTS only: moving rows works without vectors too
    transcript = new_transcript(state, workspace)
    chat(transcript, index, 12, topic="gardening")
    index.sync()
    # The live file goes, and an archive of that name appears holding another conversation.
    transcript.path.unlink()
    other = new_transcript(state, workspace, name="tmp")
    chat(other, index, 6, topic="astronomy")
    archived = other.path.rename(archive_name(sessions_dir(state) / "s1.jsonl", WHEN))
    index.sync()
    rows = chunk_rows(index, f"sessions/{archived.name}")
    assert rows and all("gardening" not in r[4] for r in rows)
    assert any("astronomy" in r[4] for r in rows)
    assert chunk_rows(index, "sessions/s1.jsonl") == []


def test_deleted_sessions_stay_out_of_search_and_memory_get(
    open_index: Callable[..., MemoryIndex], state: Path, workspace: Path
) -> None:
    index = open_index(make_config(), HashEmbedder())
    transcript = new_transcript(state, workspace)
    transcript.append_message(Message.user("the vault combination is 31-07-22"))
    index.sync()
    assert index.search(SearchRequest(query="vault combination")).results
    deleted = transcript.path.rename(transcript.path.with_name("s1.jsonl.deleted.2026-03-01T10-00-00.000Z"))
    index.sync()
    assert not index.search(SearchRequest(query="vault combination")).results
    assert chunk_rows(index, f"sessions/{deleted.name}") == []
    with pytest.raises(MemoryPathError, match="invalid session transcript name"):
        resolve_memory_target(workspace, f"sessions/{deleted.name}", sessions_dir=sessions_dir(state))
