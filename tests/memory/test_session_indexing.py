"""Session transcripts in the memory index, end to end: real SQLite with sqlite-vec, transcripts written by
``Transcript`` and the runner (ScriptedModel), the delta scheduler's real timer thread."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from sessionmem.memory.embed.embedder import EmbedderSelection
from sessionmem.memory.index import MemoryIndex
from sessionmem.memory.search.records import SearchRequest
from sessionmem.memory.tools.reading import MemoryTools
from sessionmem.messages import Message
from sessionmem.model.scripted import ScriptedModel, echo, flush_aware
from sessionmem.session.lifecycle.archive import memory_body, recent_content
from sessionmem.session.runner import SessionRunner
from sessionmem.session.stores.transcript_folder import read_entries
from tests.memory.stores import StoreUnderTest, rows
from tests.memory.support import (
    HashEmbedder,
    chat,
    chunk_rows,
    index_opener,
    jsonl_messages,
    make_config,
    new_transcript,
)

SECRET = "sk-proj-9f8e7d6c5b4a39281706f5e4d3c2b1a0ZZ"


@pytest.fixture
def open_index(
    workspace: Path, state: Path, index_store: StoreUnderTest
) -> Iterator[Callable[..., MemoryIndex]]:
    """Opens the main agent's index, on each store in turn."""
    with index_opener(workspace, state, index_store) as opener:
        yield opener


def indexed_size(index: MemoryIndex, path: str) -> int | None:
    found = rows(index, "SELECT size FROM files WHERE path = ?", path)
    return None if not found else int(found[0][0])


# ---------------------------------------------------------------------------- opt-in


def test_sources_listing_sessions_is_the_opt_in(
    open_index: Callable[..., MemoryIndex], state: Path, workspace: Path
) -> None:
    transcript = new_transcript(state, workspace)
    transcript.append_message(Message.user("the boat is called Marigold"))
    on = open_index(make_config())
    on.sync()
    assert on.source_names() == ["memory", "sessions"]
    assert chunk_rows(on, "sessions/s1.jsonl")[0][4] == "User: the boat is called Marigold"
    off = open_index(make_config(sources=("memory",)))
    off.notify_transcript_appended(transcript.path)  # ignored: sessions are not a source
    assert off.session_delta is None
    off.sync()
    assert chunk_rows(off, "sessions/s1.jsonl") == []


# ---------------------------------------------------------------------------- delta scheduling


def test_appends_below_the_thresholds_index_nothing_new(
    open_index: Callable[..., MemoryIndex], state: Path, workspace: Path
) -> None:
    embedder = HashEmbedder()
    index = open_index(make_config(delta_messages=50), embedder)
    transcript = new_transcript(state, workspace)
    chat(transcript, index, 10)
    index.sync()
    assert index.wait_idle(10)
    before_rows = chunk_rows(index, "sessions/s1.jsonl")
    before_size = indexed_size(index, "sessions/s1.jsonl")
    embedded = len(embedder.texts)
    time.sleep(0.01)
    chat(transcript, index, 20, start=10)  # a few normal turns: 20 lines < 50
    assert index.wait_idle(10)
    assert index.session_delta is not None and index.session_delta.checks >= 1  # the check did run
    assert chunk_rows(index, "sessions/s1.jsonl") == before_rows
    assert indexed_size(index, "sessions/s1.jsonl") == before_size  # no sync touched the file
    assert len(embedder.texts) == embedded
    # The pending growth carries over: 35 more lines make 55 >= 50, and the file is indexed.
    chat(transcript, index, 35, start=30)
    assert index.wait_idle(10)
    assert indexed_size(index, "sessions/s1.jsonl") == transcript.size_bytes()


def test_crossing_delta_messages_indexes_only_the_new_lines(
    open_index: Callable[..., MemoryIndex], state: Path, workspace: Path
) -> None:
    embedder = HashEmbedder()
    config = make_config(delta_messages=50)
    index = open_index(config, embedder)
    transcript = new_transcript(state, workspace)
    chat(transcript, index, 30)
    index.sync()
    assert index.wait_idle(10)
    old = chunk_rows(index, "sessions/s1.jsonl")
    assert len(old) >= 4
    tail_line = old[-1][2]  # the last chunk is the only one that may be re-chunked
    old_lines = len(transcript.path.read_bytes().splitlines())
    embedder.texts.clear()
    time.sleep(0.01)  # a row written from here on has a later updated_at

    chat(transcript, index, 55, start=30, topic="sailing")  # crosses deltaMessages on its own
    assert index.wait_idle(10)
    assert indexed_size(index, "sessions/s1.jsonl") == transcript.size_bytes()

    new = chunk_rows(index, "sessions/s1.jsonl")
    untouched = [row for row in old if row[2] < tail_line]
    assert untouched and new[: len(untouched)] == untouched  # same rowids, ids, lines, text
    added = new[len(untouched) :]
    assert all(row[2] >= tail_line for row in added)
    assert any(row[3] > old_lines for row in added)
    assert "sailing" in added[-1][4]
    # Only chunks with new text were embedded: every embedded text is one of the added chunks, and
    # none of the untouched chunks was sent again.
    assert embedder.texts and set(embedder.texts) <= {row[4] for row in added}
    assert not set(embedder.texts) & {row[4] for row in untouched}
    # The boundaries are stable: a from-scratch index of the same file gives the same chunks.
    fresh = open_index(config.model_copy(), HashEmbedder())
    fresh_rows = [(r[2], r[3], r[4]) for r in chunk_rows(_synced(fresh), "sessions/s1.jsonl")]
    assert fresh_rows == [(r[2], r[3], r[4]) for r in new]


def _synced(index: MemoryIndex) -> MemoryIndex:
    index.sync(force=True)
    return index


def test_crossing_delta_bytes_triggers_too(
    open_index: Callable[..., MemoryIndex], state: Path, workspace: Path
) -> None:
    index = open_index(make_config(delta_messages=1000, delta_bytes=2_000))
    transcript = new_transcript(state, workspace)
    transcript.append_message(Message.user("x " * 1500))  # one long message, 3 KB
    index.notify_transcript_appended(transcript.path)
    assert index.wait_idle(10)
    assert indexed_size(index, "sessions/s1.jsonl") == transcript.size_bytes()


def test_a_rewritten_transcript_is_indexed_again_from_the_start(
    open_index: Callable[..., MemoryIndex], state: Path, workspace: Path
) -> None:
    index = open_index(make_config())
    transcript = new_transcript(state, workspace)
    chat(transcript, index, 30, topic="gardening")
    index.sync()
    # Rewritten in place (e.g. truncated after a compaction, then continued): nothing of the old
    # content may survive in the index, and the line numbers are the new file's.
    transcript.path.unlink()
    transcript = new_transcript(state, workspace)
    chat(transcript, index, 6, topic="astronomy")
    index.sync()
    rows = chunk_rows(index, "sessions/s1.jsonl")
    assert rows and all("gardening" not in r[4] for r in rows)
    assert any("astronomy" in r[4] for r in rows)
    assert rows[0][2] == 2  # line 1 is the header


def test_search_does_not_wait_for_transcript_indexing(
    open_index: Callable[..., MemoryIndex], state: Path, workspace: Path
) -> None:
    (workspace / "MEMORY.md").write_text("- The spare key is under the blue pot.\n")
    index = open_index(make_config(debounce_ms=5_000))
    index.sync()
    transcript = new_transcript(state, workspace)
    chat(transcript, index, 60)  # a check is pending for five seconds
    found = index.search(SearchRequest(query="spare key"))
    assert found.results[0].path == "MEMORY.md"
    # Answered while the check is still pending: the search did not wait for it
    assert index.session_delta is not None and index.session_delta.pending


# ---------------------------------------------------------------------------- hits, memory_get, secrets


def test_a_session_hit_points_at_its_jsonl_lines_and_memory_get_reads_them(
    open_index: Callable[..., MemoryIndex], state: Path, workspace: Path
) -> None:
    config = make_config(tokens=400, overlap=0)
    index = open_index(config, HashEmbedder())
    transcript = new_transcript(state, workspace)
    chat(transcript, index, 8)
    transcript.append_custom("note", {"x": 1})  # a non-message line between messages
    transcript.append_message(Message.user(f"my deploy token is {SECRET} and the harbour code is 4471"))
    transcript.append_message(Message.assistant("Noted: the harbour code is 4471."))
    index.sync()
    hits = [
        r for r in index.search(SearchRequest(query="harbour code 4471")).results if r.source == "sessions"
    ]
    assert hits
    hit = hits[0]
    assert hit.path == "sessions/s1.jsonl"
    lines = jsonl_messages(transcript.path, hit.start_line, hit.end_line)
    assert lines[-1] == "Assistant: Noted: the harbour code is 4471."
    assert "\n".join(lines).startswith(hit.snippet)  # the hit's text is the messages on its lines

    tools = MemoryTools.from_config(config, "main", index=index, workspace=workspace)
    got = json.loads(
        tools.call(
            "memory_get",
            {"path": hit.path, "from": hit.start_line, "lines": hit.end_line - hit.start_line + 1},
        )
    )
    assert got["path"] == "sessions/s1.jsonl"
    assert got["text"].splitlines() == lines
    assert "harbour code is 4471" in got["text"]
    assert SECRET not in got["text"] and "redacted" in got["text"].lower()
    # The secret cannot be found by search either.
    for query in (SECRET, "deploy token"):
        for result in index.search(SearchRequest(query=query)).results:
            assert SECRET not in result.snippet


def test_runner_memory_get_opens_session_hits(
    open_index: Callable[..., MemoryIndex], tmp_path: Path, state: Path, workspace: Path
) -> None:
    config = make_config()
    index = open_index(config)
    runner = SessionRunner(
        ScriptedModel(responder=flush_aware(echo)),
        config=config,
        workspace=workspace,
        state_dir=state,
        memory_index=index,
    )
    session = runner.open()
    session.run_turn_sync("the lighthouse keeper is named Ansel")
    index.sync(session_files=[session.transcript.path])
    memory = session.tools.memory
    found = json.loads(memory.call("memory_search", {"query": "lighthouse keeper"}))
    hit = next(r for r in found["results"] if r["path"].startswith("sessions/"))
    got = json.loads(memory.call("memory_get", {"path": hit["path"], "from": hit["startLine"], "lines": 5}))
    assert "User: the lighthouse keeper is named Ansel" in got["text"]


# ---------------------------------------------------------------------------- post-compaction sync


@pytest.mark.parametrize("mode", ["off", "async", "await"])
def test_post_compaction_sync(
    mode: str, open_index: Callable[..., MemoryIndex], state: Path, workspace: Path
) -> None:
    # Thresholds out of reach: only the post-compaction sync can index the transcript.
    config = make_config(delta_messages=10_000, delta_bytes=10_000_000, post_index_sync=mode)
    index = open_index(config)
    model = ScriptedModel(responder=flush_aware(echo, summary="The user talked about kites."))
    runner = SessionRunner(model, config=config, workspace=workspace, state_dir=state, memory_index=index)
    session = runner.open()
    for i in range(6):
        session.run_turn_sync(f"kite number {i} is red and flies over the dunes near the old harbour")
    rel = f"sessions/{session.transcript.path.name}"
    assert indexed_size(index, rel) is None
    result = session.compact_sync()
    assert result.ok, result
    if mode == "await":  # indexed before compact() returned
        assert indexed_size(index, rel) == session.transcript.size_bytes()
    assert index.wait_idle(10)
    if mode == "off":
        assert indexed_size(index, rel) is None
    else:
        assert indexed_size(index, rel) == session.transcript.size_bytes()
        assert any("kite number 0" in r[4] for r in chunk_rows(index, rel))


# ---------------------------------------------------------------------------- one conversation, one hit


def test_an_archived_conversation_and_its_transcript_come_back_once(
    open_index: Callable[..., MemoryIndex], state: Path, workspace: Path
) -> None:
    index = open_index(make_config(tokens=400, overlap=0), HashEmbedder())
    transcript = new_transcript(state, workspace)
    turns = [
        Message.user("We should move the greenhouse tomatoes to the east bed next spring."),
        Message.assistant("Agreed, the east bed gets morning sun and drains better for tomatoes."),
        Message.user("Also order the copper tape against slugs before March."),
        Message.assistant("I will remember the copper tape order before March."),
    ]
    for msg in turns:
        transcript.append_message(msg)
    # What the /new hook writes (sessionmem.session.lifecycle.archive), from the same transcript.
    entries = [obj for _, obj in read_entries(transcript.path)]
    body = memory_body(
        datetime(2026, 3, 1, 9, 0),
        "agent:main:main",
        "s1",
        "cli",
        recent_content(entries),
    )
    (workspace / "memory" / "2026-03-01-greenhouse-plans.md").write_text(body)
    # An unrelated note that shares words but is not the same text.
    (workspace / "memory" / "2026-02-01.md").write_text("- Tomatoes in the east bed did poorly in 2025.\n")
    index.sync()
    sources = {r[0] for r in rows(index, "SELECT source FROM chunks")}
    assert sources == {"memory", "sessions"}

    results = index.search(
        SearchRequest(query="greenhouse tomatoes east bed copper tape", max_results=6)
    ).results
    paths = [r.path for r in results]
    assert paths.count("memory/2026-03-01-greenhouse-plans.md") + paths.count("sessions/s1.jsonl") == 1
    assert "memory/2026-02-01.md" in paths  # near in topic, not a duplicate: kept


def _cand(source: str, text: str, score: float, path: str = "") -> Any:
    from sessionmem.memory.search.ranking import Candidate

    cid = f"{source}:{path}:{score}"
    return Candidate(cid, path or source, source, 1, 1, text, merged=score)


def test_collapse_keeps_the_better_copy_and_memory_on_ties() -> None:
    from sessionmem.memory.search.ranking import collapse_cross_source

    convo = "user: move the greenhouse tomatoes to the east bed\nassistant: the east bed gets morning sun"
    flat = "User: move the greenhouse tomatoes to the east bed\nAssistant: the east bed gets morning sun"
    tie = collapse_cross_source([_cand("sessions", flat, 0.5), _cand("memory", convo, 0.5)])
    assert [c.source for c in tie] == ["memory"]
    better = collapse_cross_source([_cand("memory", convo, 0.4), _cand("sessions", flat, 0.6)])
    assert [c.source for c in better] == ["sessions"]
    # Same source (overlapping chunks of one file) and short or merely related texts are all kept.
    same = collapse_cross_source([_cand("sessions", flat, 0.6, "a"), _cand("sessions", flat, 0.5, "b")])
    assert len(same) == 2
    short = collapse_cross_source(
        [_cand("memory", "east bed", 0.5), _cand("sessions", "User: east bed", 0.5)]
    )
    assert len(short) == 2
    related = "- Tomatoes in the east bed did poorly in 2025; try the greenhouse next spring instead."
    assert len(collapse_cross_source([_cand("memory", related, 0.5), _cand("sessions", flat, 0.5)])) == 2


def test_a_torn_last_line_waits_and_flush_turns_are_left_out(
    open_index: Callable[..., MemoryIndex], state: Path, workspace: Path
) -> None:
    index = open_index(make_config())
    transcript = new_transcript(state, workspace)
    transcript.append_message(Message.user("the canoe is green"))
    transcript.append_message(
        Message.user("Pre-compaction memory flush. Store durable memories now."),
        provenance={"kind": "memory_flush"},
    )
    line = json.dumps(
        {"type": "message", "id": "abcd1234", "message": {"role": "user", "content": "paddles"}}
    )
    with transcript.path.open("ab") as handle:  # a writer mid-append: no newline yet
        handle.write(line[:30].encode())
    index.sync()
    assert [r[4] for r in chunk_rows(index, "sessions/s1.jsonl")] == ["User: the canoe is green"]
    with transcript.path.open("ab") as handle:
        handle.write(line[30:].encode() + b"\n")
    index.sync()
    rows = chunk_rows(index, "sessions/s1.jsonl")
    assert [r[4] for r in rows] == ["User: the canoe is green\nUser: paddles"]
    assert rows[0][3] == 4  # header, canoe, flush prompt, paddles


class _Counting:
    """Counts the texts a real embedder is asked to embed (everything else passes through)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.texts: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def embed_documents(self, texts: Sequence[str], progress: Any = None) -> Any:
        self.texts.extend(texts)
        return self._inner.embed_documents(texts)


@pytest.mark.local_model
def test_real_embeddings_find_a_delta_indexed_session_hit_by_meaning(
    state: Path, workspace: Path, gguf_model: Path
) -> None:
    from sessionmem.memory.embed.local_gguf import LocalEmbedder

    embedder = _Counting(LocalEmbedder(str(gguf_model)))
    index = MemoryIndex.open(
        "main",
        workspace,
        make_config(tokens=120, overlap=20).for_agent("main").memory_search,
        state_dir=state,
        selection=EmbedderSelection(embedder, "local"),
    )
    try:
        transcript = new_transcript(state, workspace)
        transcript.append_message(Message.user("Our flight to Lisbon leaves at 7:40 on Friday morning."))
        index.notify_transcript_appended(transcript.path)
        chat(transcript, index, 55, topic="sourdough baking")  # crosses deltaMessages
        assert index.wait_idle(60)
        first = len(embedder.texts)
        assert first > 0
        response = index.search(SearchRequest(query="when does the plane to Portugal depart", explain=True))
        top = response.results[0]
        assert top.path == "sessions/s1.jsonl" and "Lisbon" in top.snippet
        assert top.explanation is not None and top.explanation.vector_score
        chat(transcript, index, 55, start=55, topic="bicycle repair")
        assert index.wait_idle(60)
        rows = chunk_rows(index, "sessions/s1.jsonl")
        new_texts = embedder.texts[first:]
        assert new_texts and all("bicycle" in t or "sourdough" in t for t in new_texts)
        assert len(new_texts) < len(rows)  # the earlier chunks were not embedded again
    finally:
        index.close()


class _HeldOnTranscripts(HashEmbedder):
    """Holds any batch of transcript text until released (``hold``)."""

    def _holds(self, texts: Sequence[str]) -> bool:
        return any(t.startswith(("User:", "Assistant:")) for t in texts)


def test_the_first_search_of_an_empty_index_does_not_wait_for_transcripts(
    open_index: Callable[..., MemoryIndex], state: Path, workspace: Path
) -> None:
    (workspace / "MEMORY.md").write_text("- The spare key is under the blue pot.\n")
    transcript = new_transcript(state, workspace)
    transcript.append_message(Message.user("where did we put the spare key again?"))
    embedder = _HeldOnTranscripts()
    embedder.hold = threading.Event()
    index = open_index(make_config(), embedder)
    found = index.search(SearchRequest(query="spare key blue pot"))
    embedder.hold.set()
    assert not embedder.held_too_long  # the search came back while the transcript was held
    assert [r.path for r in found.results] == ["MEMORY.md"]
    assert index.wait_idle(10)  # the transcript was indexed in the background
    assert chunk_rows(index, "sessions/s1.jsonl")
