"""The memory index: incremental sync, rebuilds, recovery, concurrency.

Tests taking ``open_index`` run on each store (real SQLite with sqlite-vec, real PostgreSQL:
``tests/memory/stores.py``); those taking ``open_sqlite_index`` are about the SQLite file itself."""

from __future__ import annotations

import json
import multiprocessing
import os
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from freezegun import freeze_time

from sessionmem.config import MemorySearchConfig
from sessionmem.errors import EmbeddingError
from sessionmem.memory.embed.embedder import EmbedderSelection
from sessionmem.memory.index import MemoryIndex
from sessionmem.memory.search.query_terms import build_fts_query
from sessionmem.memory.search.records import SearchRequest
from sessionmem.memory.store.database import connect
from sessionmem.memory.store.fts_view import FTS_TEXT_VERSION
from sessionmem.memory.store.schema import META_KEY
from sessionmem.memory.sync.index_meta import meta_mismatch
from tests.memory.stores import StoreUnderTest, keyword_paths, keyword_rows, rows, run
from tests.memory.support import FTS_ONLY, HashEmbedder


def settings(**values: Any) -> MemorySearchConfig:
    return MemorySearchConfig.model_validate(values)


def selection_for(embedder: HashEmbedder | None) -> EmbedderSelection:
    return FTS_ONLY if embedder is None else EmbedderSelection(embedder, "test")


def _opener(workspace: Path, state: Path, store: StoreUnderTest) -> Iterator[Any]:
    opened: list[MemoryIndex] = []

    def _open(embedder: HashEmbedder | None = None, config: MemorySearchConfig | None = None) -> MemoryIndex:
        index = MemoryIndex.open(
            "main",
            workspace,
            store.settings(config or settings()),
            state_dir=state,
            selection=selection_for(embedder),
        )
        opened.append(index)
        return index

    yield _open
    for index in opened:
        index.close()


@pytest.fixture
def open_index(workspace: Path, state: Path, index_store: StoreUnderTest) -> Iterator[Any]:
    """Opens the main agent's index on each store in turn."""
    yield from _opener(workspace, state, index_store)


@pytest.fixture
def open_sqlite_index(workspace: Path, state: Path) -> Iterator[Any]:
    """Opens the main agent's index in its SQLite file."""
    yield from _opener(workspace, state, StoreUnderTest("sqlite"))


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def db(index: MemoryIndex) -> Any:
    conn, _ = connect(index.path)
    return conn


def table_counts(index: MemoryIndex, path: str) -> dict[str, int]:
    """Rows of ``path`` in files, chunks, the keyword index and the vectors (sqlite-vec's table in SQLite,
    the chunks' own embeddings in PostgreSQL)."""
    ids = [r[0] for r in rows(index, "SELECT id FROM chunks WHERE path = ?", path)]
    if isinstance(index.path, Path):
        vec = sum(rows(index, "SELECT COUNT(*) FROM chunks_vec WHERE id = ?", i)[0][0] for i in ids)
    else:
        vec = rows(index, "SELECT COUNT(*) FROM chunks WHERE path = ? AND embedding IS NOT NULL", path)[0][0]
    return {
        "files": rows(index, "SELECT COUNT(*) FROM files WHERE path = ?", path)[0][0],
        "chunks": len(ids),
        "fts": keyword_rows(index, path),
        "vec": vec,
    }


def long_note(topic: str, lines: int = 120) -> str:
    return "\n".join(f"{topic} detail {i}: the team agreed on item {i} for {topic}." for i in range(lines))


# ---------------------------------------------------------------------------- FTS-only mode


def test_fts_only_indexes_and_finds_everything(workspace: Path, open_index: Any) -> None:
    write(workspace / "MEMORY.md", "# Long-term\nAlice prefers tea.\n")
    write(workspace / "memory" / "2026-01-05.md", "The billing cutover is on Friday.\n")
    write(workspace / "memory" / "cn.md", "我们决定下周完成数据库迁移。\n")
    index = open_index()
    report = index.sync()
    assert (report.files_scanned, report.files_indexed, report.embedded) == (3, 3, 0)
    assert rows(index, "SELECT DISTINCT model FROM chunks") == [("fts-only",)]
    assert rows(index, "SELECT COUNT(*) FROM chunks WHERE embedding IS NOT NULL") == [(0,)]
    assert keyword_paths(index, '"billing"') == [("memory/2026-01-05.md", 1, 1)]
    assert [p for p, _, _ in keyword_paths(index, '"迁 移"')] == ["memory/cn.md"]
    assert rows(index, "SELECT date FROM files WHERE path = 'memory/2026-01-05.md'") == [("2026-01-05",)]
    response = index.search(SearchRequest("billing cutover"))
    assert response.mode == "fts-only"
    assert response.results and response.results[0].path == "memory/2026-01-05.md"


def test_store_path_honours_agent_token(workspace: Path, tmp_path: Path, open_sqlite_index: Any) -> None:
    target = tmp_path / "custom" / "{agentId}-index.sqlite"
    index = open_sqlite_index(config=settings(store={"path": str(target)}))
    assert index.path == tmp_path / "custom" / "main-index.sqlite"
    assert index.path.exists()


def test_first_search_on_empty_index_syncs_first(workspace: Path, open_index: Any) -> None:
    write(workspace / "memory" / "note.md", "Remember the sourdough starter feeding schedule.\n")
    index = open_index()
    response = index.search(SearchRequest("sourdough starter"))
    assert [r.path for r in response.results] == ["memory/note.md"]
    assert not index.dirty


def test_dirty_index_search_answers_at_once_and_syncs_in_background(workspace: Path, open_index: Any) -> None:
    write(workspace / "memory" / "a.md", "alpha topic\n")
    slow = HashEmbedder()
    index = open_index(slow)
    index.sync()
    write(workspace / "memory" / "b.md", "bravo topic\n")
    slow.hold = threading.Event()  # the background sync's embedding waits until the search is back
    index.mark_dirty()
    index.search(SearchRequest("bravo"))
    slow.hold.set()
    assert not slow.held_too_long  # the search did not wait for the sync
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and rows(index, "SELECT COUNT(*) FROM files")[0][0] < 2:
        time.sleep(0.05)
    assert rows(index, "SELECT COUNT(*) FROM files") == [(2,)]


# ---------------------------------------------------------------------------- incremental sync


def test_unchanged_file_costs_a_stat_only(workspace: Path, open_index: Any) -> None:
    note = write(workspace / "memory" / "a.md", "original words here\n")
    write(workspace / "memory" / "b.md", "other words\n")
    embedder = HashEmbedder()
    index = open_index(embedder)
    first = index.sync()
    assert first.files_indexed == 2 and first.embedded == 2
    calls = len(embedder.calls)
    # Same size and mtime but new bytes: a sync that only stats cannot notice, which proves no read.
    st = note.stat()
    note.write_text("replaced words here\n", encoding="utf-8")
    os.utime(note, ns=(st.st_atime_ns, st.st_mtime_ns))
    second = index.sync()
    assert (second.files_unchanged, second.files_indexed, second.chunks_written) == (2, 0, 0)
    assert len(embedder.calls) == calls
    assert rows(index, "SELECT text FROM chunks WHERE path = 'memory/a.md'") == [("original words here",)]


def test_changed_file_is_rechunked_and_unchanged_chunks_reuse_vectors(
    workspace: Path, open_index: Any
) -> None:
    note = write(workspace / "memory" / "long.md", long_note("roadmap"))
    write(workspace / "memory" / "other.md", "untouched\n")
    embedder = HashEmbedder()
    index = open_index(embedder)
    first = index.sync()
    chunks_before = rows(index, "SELECT COUNT(*) FROM chunks WHERE path = 'memory/long.md'")[0][0]
    assert chunks_before > 2 and first.embedded == chunks_before + 1
    embedder.calls.clear()
    note.write_text(long_note("roadmap") + "\nA new final decision about pricing.\n", encoding="utf-8")
    second = index.sync()
    assert (second.files_indexed, second.files_unchanged) == (1, 1)
    assert second.cache_hits >= chunks_before - 1  # only the tail chunk is new text
    assert second.embedded == len(embedder.embedded_texts) <= 2
    assert any("pricing" in t for t in embedder.embedded_texts)
    assert [p for p, _, _ in keyword_paths(index, '"pricing"')] == ["memory/long.md"]
    counts = table_counts(index, "memory/long.md")
    assert counts["chunks"] == counts["fts"] == counts["vec"] > 0


def test_same_content_with_new_mtime_is_read_but_not_rewritten(workspace: Path, open_index: Any) -> None:
    note = write(workspace / "memory" / "a.md", "steady\n")
    embedder = HashEmbedder()
    index = open_index(embedder)
    index.sync()
    os.utime(note, (time.time() + 5, time.time() + 5))
    report = index.sync()
    assert (report.files_unchanged, report.files_indexed, report.embedded) == (1, 0, 0)
    assert index.sync().files_unchanged == 1


def test_deleted_file_leaves_no_rows_in_any_table(workspace: Path, open_index: Any) -> None:
    gone = write(workspace / "memory" / "gone.md", long_note("obsolete", 60))
    write(workspace / "memory" / "stays.md", "keep me\n")
    index = open_index(HashEmbedder())
    index.sync()
    before = table_counts(index, "memory/gone.md")
    assert before["files"] == 1 and before["chunks"] == before["fts"] == before["vec"] > 0
    gone.unlink()
    report = index.sync()
    assert report.files_deleted == 1
    assert table_counts(index, "memory/gone.md") == {"files": 0, "chunks": 0, "fts": 0, "vec": 0}
    assert table_counts(index, "memory/stays.md")["vec"] == 1
    assert rows(index, "SELECT COUNT(*) FROM chunks") == [(1,)]
    assert keyword_paths(index, '"obsolete"') == []


def test_vectors_are_float32_blobs_in_chunks_and_vec_table(workspace: Path, open_index: Any) -> None:
    write(workspace / "memory" / "a.md", "vector words\n")
    embedder = HashEmbedder(dims=32)
    index = open_index(embedder)
    index.sync()
    ((blob,),) = rows(index, "SELECT embedding FROM chunks")
    vec = np.frombuffer(blob, dtype="<f4")
    assert vec.shape == (32,) and np.allclose(vec, embedder.embed_query("vector words\n"))
    assert table_counts(index, "memory/a.md")["vec"] == 1
    assert index.status().vector_dims == 32


def test_embeddings_are_batched(workspace: Path, open_index: Any) -> None:
    for i in range(30):
        write(workspace / "memory" / f"n{i}.md", f"note number {i} about topic {i}\n")
    embedder = HashEmbedder()
    open_index(embedder).sync()
    assert len(embedder.calls) == 1 and len(embedder.calls[0]) == 30


def test_cache_is_pruned_to_max_entries_oldest_first(workspace: Path, open_index: Any) -> None:
    """Two syncs a day apart: the cap keeps the newer round's vectors and drops the older round's."""
    index = open_index(HashEmbedder(), settings(cache={"maxEntries": 2}))
    for i in range(3):
        write(workspace / "memory" / f"old{i}.md", f"older cached note {i}\n")
    with freeze_time("2026-03-01 09:00:00"):
        index.sync()
    for i in range(2):
        write(workspace / "memory" / f"new{i}.md", f"newer cached note {i}\n")
    with freeze_time("2026-03-02 09:00:00"):
        report = index.sync()
    assert report.embedded == 2

    newer = {h for (h,) in rows(index, "SELECT hash FROM chunks WHERE path LIKE 'memory/new%'")}
    assert len(newer) == 2
    cached = rows(index, "SELECT hash, updated_at FROM embedding_cache")
    day_two_ms = int(datetime(2026, 3, 2, 9, tzinfo=UTC).timestamp() * 1000)
    assert {h for h, _ in cached} == newer
    assert {t for _, t in cached} == {day_two_ms}
    status = index.status()
    assert (status.cache_entries, status.cache_max_entries) == (2, 2)


# ---------------------------------------------------------------------------- rebuilds


def test_forced_rebuild_reuses_cached_embeddings(workspace: Path, open_index: Any) -> None:
    write(workspace / "memory" / "a.md", long_note("alpha", 80))
    embedder = HashEmbedder()
    index = open_index(embedder)
    first = index.sync()
    embedder.calls.clear()
    report = index.sync(force=True)
    assert report.full and report.files_indexed == 1
    assert report.embedded == 0 and embedder.calls == []
    assert report.cache_hits == first.chunks_written
    assert not isinstance(index.path, Path) or not list(index.path.parent.glob("*.tmp-*"))


def test_config_change_rebuilds(workspace: Path, state: Path, open_index: Any) -> None:
    write(workspace / "memory" / "a.md", long_note("alpha", 80))
    write(workspace / "notes" / "extra.md", "extra note\n")
    open_index(HashEmbedder()).sync()
    index = open_index(HashEmbedder(), settings(chunking={"tokens": 100, "overlap": 10}))
    report = index.sync()
    assert report.full
    index2 = open_index(
        HashEmbedder(), settings(chunking={"tokens": 100, "overlap": 10}, extraPaths=["notes"])
    )
    report2 = index2.sync()
    assert report2.full and "notes/extra.md" in [r[0] for r in rows(index2, "SELECT path FROM files")]
    assert not index2.sync().full  # settled


def test_meta_without_the_fts_text_form_means_a_rebuild() -> None:
    desired = {"model": "m", "ftsText": FTS_TEXT_VERSION}
    assert meta_mismatch({"model": "m"}, desired) == ["ftsText"]  # written before the key existed
    assert meta_mismatch({"model": "m", "ftsText": 1}, desired) == ["ftsText"]
    assert meta_mismatch(dict(desired), desired) == []


def test_index_with_old_fts_text_is_rebuilt_once_from_the_cache(
    workspace: Path, open_sqlite_index: Any
) -> None:
    open_index = open_sqlite_index
    # An index written before Thai support: the FTS column holds Thai unspaced, the meta has no ftsText.
    write(workspace / "memory" / "th.md", "# การตัดสินใจ\n\nเราตัดสินใจย้ายฐานข้อมูลไปยังเซิร์ฟเวอร์ใหม่\n")
    write(workspace / "memory" / "a.md", long_note("alpha", 80))
    old = open_index(HashEmbedder())
    first = old.sync()
    conn = db(old)
    try:
        with conn:
            conn.execute(
                "UPDATE chunks_fts SET text = (SELECT c.text FROM chunks c WHERE c.id = chunks_fts.id)"
            )
            meta = json.loads(conn.execute(f"SELECT value FROM meta WHERE key = '{META_KEY}'").fetchone()[0])
            del meta["ftsText"]
            conn.execute("UPDATE meta SET value = ? WHERE key = ?", (json.dumps(meta), META_KEY))
    finally:
        conn.close()
    match = f"SELECT path FROM chunks_fts WHERE chunks_fts MATCH '{build_fts_query('ฐานข้อมูล')}'"
    assert rows(old, match) == []  # the old form: the Thai word is not found by keyword

    embedder = HashEmbedder()  # same model: the cache seeded from the old file serves every chunk
    index = open_index(embedder)
    assert index.status().dirty
    report = index.sync()
    assert report.full and report.embedded == 0 and embedder.texts == []
    assert report.cache_hits == first.chunks_written
    assert rows(index, match) == [("memory/th.md",)]
    hit = index.search(SearchRequest("ฐานข้อมูล", explain=True)).results[0]
    assert hit.path == "memory/th.md" and hit.explanation is not None
    assert hit.explanation.text_score is not None  # found by keyword, not only by its vector
    stored = json.loads(rows(index, f"SELECT value FROM meta WHERE key = '{META_KEY}'")[0][0])
    assert stored["ftsText"] == FTS_TEXT_VERSION
    again = index.sync()
    assert not again.full and not index.status().dirty  # once
    assert embedder.texts == []


def test_provider_change_rebuilds_and_fts_only_to_vectors(workspace: Path, open_index: Any) -> None:
    write(workspace / "memory" / "a.md", "switch providers\n")
    open_index().sync()
    index = open_index(HashEmbedder(model="other-model"))
    report = index.sync()
    assert report.full and report.embedded == 1
    assert rows(index, "SELECT DISTINCT model FROM chunks") == [("other-model",)]
    assert table_counts(index, "memory/a.md")["vec"] == 1


def test_failed_rebuild_keeps_the_old_index(workspace: Path, open_index: Any) -> None:
    write(workspace / "memory" / "a.md", "the billing cutover is on friday\n")
    write(workspace / "memory" / "b.md", long_note("budget", 50))
    good = open_index(HashEmbedder())
    good.sync()
    before = rows(good, "SELECT id, text FROM chunks ORDER BY id")
    failing = HashEmbedder(model="new-model", fail=True)
    index = open_index(failing)
    with pytest.raises(EmbeddingError, match="embedding service exploded"):
        index.sync()
    assert failing.calls, "the rebuild reached the embedder"
    assert rows(index, "SELECT id, text FROM chunks ORDER BY id") == before
    meta = json.loads(rows(index, "SELECT value FROM meta WHERE key = 'memory_index_meta_v1'")[0][0])
    assert meta["model"] == "hash-bow"
    assert not isinstance(index.path, Path) or not list(index.path.parent.glob("*.tmp-*"))
    assert index.dirty and any("failed" in issue for issue in index.status().issues)
    # The old index still answers searches.
    response = good.search(SearchRequest("billing cutover"))
    assert response.results and response.results[0].path == "memory/a.md"


# ---------------------------------------------------------------------------- damaged input and stores


def test_corrupt_database_is_moved_aside_and_rebuilt(
    workspace: Path, state: Path, open_sqlite_index: Any
) -> None:
    open_index = open_sqlite_index
    write(workspace / "memory" / "a.md", "survives corruption\n")
    path = state / "memory" / "main.sqlite"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"this is not a sqlite database at all" * 100)
    index = open_index()
    aside = list(path.parent.glob("main.sqlite.corrupt-*"))
    assert len(aside) == 1
    assert any("corrupt" in issue and "moved aside" in issue for issue in index.status().issues)
    assert index.sync().files_indexed == 1
    assert rows(index, "SELECT path FROM files") == [("memory/a.md",)]


def test_corruption_found_during_sync_is_recovered(
    workspace: Path, state: Path, open_sqlite_index: Any
) -> None:
    open_index = open_sqlite_index
    for i in range(40):
        write(workspace / "memory" / f"n{i:02d}.md", long_note(f"topic{i}", 10))
    first = open_index()
    first.sync()
    first.close()
    conn, _ = connect(first.path)
    ((root,),) = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'files'").fetchall()
    (page_size,) = conn.execute("PRAGMA page_size").fetchone()
    conn.close()
    with open(first.path, "r+b") as handle:  # scribble over the files table's root page
        handle.seek((root - 1) * page_size)
        handle.write(b"\xde\xad\xbe\xef" * (page_size // 4))
    index = open_index()  # the header and meta are intact, so opening succeeds
    assert any("unreadable" in issue for issue in index.status().issues)
    report = index.sync()
    assert report.files_indexed == 40
    assert len(list(first.path.parent.glob("main.sqlite.corrupt-*"))) == 1
    assert any("corrupt" in issue for issue in index.status().issues)
    assert rows(index, "PRAGMA integrity_check") == [("ok",)]


def test_search_on_a_damaged_index_rebuilds_and_answers(workspace: Path, open_sqlite_index: Any) -> None:
    open_index = open_sqlite_index
    for i in range(40):
        write(workspace / "memory" / f"n{i:02d}.md", long_note(f"topic{i}", 10))
    write(workspace / "memory" / "target.md", "The spare key is under the blue flowerpot.\n")
    first = open_index()
    first.sync()
    first.close()
    conn, _ = connect(first.path)
    roots = [
        r[0]
        for r in conn.execute(
            "SELECT rootpage FROM sqlite_master WHERE name LIKE 'chunks_fts%' AND rootpage > 0"
        )
    ]
    conn.close()
    with open(first.path, "r+b") as handle:
        for root in roots:
            handle.seek((root - 1) * 4096)
            handle.write(b"\x00\xff" * 2048)
    index = open_index()
    response = index.search(SearchRequest("flowerpot spare key"))
    assert [r.path for r in response.results][:1] == ["memory/target.md"]
    assert any("damaged" in issue and "rebuilt" in issue for issue in index.status().issues)
    assert rows(index, "PRAGMA integrity_check") == [("ok",)]


def test_other_schema_version_is_moved_aside(workspace: Path, state: Path, open_index: Any) -> None:
    write(workspace / "memory" / "a.md", "schema words\n")
    first = open_index()
    first.sync()
    first.close()
    run(first, "UPDATE meta SET value = '0' WHERE key = 'schema_version'")
    index = open_index()
    assert any("schema version 0" in issue for issue in index.status().issues)
    assert index.sync().files_indexed == 1


def test_invalid_utf8_binary_empty_and_huge_files(workspace: Path, open_index: Any) -> None:
    (workspace / "memory" / "bad.md").write_bytes(b"valid start \xff\xfe broken bytes\n")
    (workspace / "memory" / "bin.md").write_bytes(b"\x00\x01\x02PNG")
    (workspace / "memory" / "empty.md").write_bytes(b"")
    huge_text = " ".join(str(i) for i in range(1_600_000))  # ~11 MB on one line
    (workspace / "memory" / "huge.md").write_text(huge_text, encoding="utf-8")
    index = open_index()
    report = index.sync()
    assert report.files_indexed == 4
    assert any("invalid UTF-8 in memory/bad.md" in i for i in report.issues)
    assert any("memory/bin.md" in i and "binary" in i for i in report.issues)
    assert rows(index, "SELECT COUNT(*) FROM chunks WHERE path = 'memory/bad.md'") == [(1,)]
    assert rows(index, "SELECT COUNT(*) FROM chunks WHERE path IN ('memory/bin.md', 'memory/empty.md')") == [
        (0,)
    ]
    huge = rows(
        index, "SELECT COUNT(*), MIN(start_line), MAX(end_line) FROM chunks WHERE path = 'memory/huge.md'"
    )
    assert huge[0][0] > 6000 and huge[0][1:] == (1, 1)
    for word in ("1599999", "800000"):  # its end and middle are found, not cut off
        hits = index.search(SearchRequest(word, min_score=0.0)).results
        assert [(h.path, h.start_line) for h in hits[:1]] == [("memory/huge.md", 1)]
    issues = index.status().issues
    assert any("memory/bad.md" in i for i in issues) and any("memory/bin.md" in i for i in issues)
    # Unchanged problem files are not re-read (issues persist), and fixing one clears its issue.
    assert index.sync().files_unchanged == 4
    (workspace / "memory" / "bin.md").write_text("now text\n", encoding="utf-8")
    index.sync()
    assert not any("memory/bin.md" in i for i in index.status().issues)
    assert rows(index, "SELECT COUNT(*) FROM chunks WHERE path = 'memory/bin.md'") == [(1,)]


def test_status_reports_missing_memory(tmp_path: Path, state: Path) -> None:
    ws = tmp_path / "empty-ws"
    ws.mkdir()
    with MemoryIndex.open("main", ws, settings(), state_dir=state, selection=FTS_ONLY) as index:
        status = index.status()
        assert status.mode == "fts-only" and status.provider == "none" and status.model == "fts-only"
        assert status.fallback_reason == "no provider in tests"
        assert status.vector_loaded and status.fts_available
        assert any("memory directory missing" in i for i in status.issues)
        assert any("no memory files found" in i for i in status.issues)


def test_status_counts_by_source(workspace: Path, open_index: Any) -> None:
    write(workspace / "memory" / "a.md", "one\n")
    write(workspace / "MEMORY.md", "two\n")
    index = open_index(HashEmbedder())
    index.sync()
    status = index.status()
    assert (status.files, status.chunks) == (2, 2)
    assert status.files_by_source == {"memory": 2} and status.chunks_by_source == {"memory": 2}
    assert (status.mode, status.provider, status.model, status.vector_dims) == (
        "hybrid",
        "test",
        "hash-bow",
        64,
    )
    assert status.issues == () and not status.dirty


def test_session_transcripts_are_indexed_with_jsonl_line_numbers(
    workspace: Path, state: Path, open_index: Any
) -> None:
    sessions = state / "agents" / "main" / "sessions"
    lines = [
        {"type": "session", "version": 3, "id": "s1"},
        {
            "type": "message",
            "timestamp": "2025-11-03T09:00:00Z",
            "message": {"role": "user", "content": "Where is the spare key?"},
        },
        {"type": "custom", "data": 1},
        {
            "type": "message",
            "message": {"role": "assistant", "content": [{"type": "text", "text": "Under the mat."}]},
        },
    ]
    write(sessions / "s1.jsonl", "\n".join(json.dumps(x) for x in lines) + "\n")
    config = settings(sources=["memory", "sessions"], experimental={"sessionMemory": True})
    index = open_index(config=config)
    index.sync()
    got = rows(index, "SELECT path, source, start_line, end_line, text FROM chunks WHERE source = 'sessions'")
    assert got == [
        ("sessions/s1.jsonl", "sessions", 2, 4, "User: Where is the spare key?\nAssistant: Under the mat.")
    ]
    assert rows(index, "SELECT date FROM chunks WHERE source = 'sessions'") == [("2025-11-03",)]
    assert index.status().files_by_source == {"sessions": 1}
    # Listing "sessions" is the opt-in (experimental.sessionMemory is accepted, not required).
    assert open_index(config=settings(sources=["memory", "sessions"])).source_names() == [
        "memory",
        "sessions",
    ]
    # Without "sessions" in sources, the transcript rows go.
    plain = open_index(config=settings(sources=["memory"]))
    assert plain.source_names() == ["memory"]
    assert plain.sync().full
    assert rows(plain, "SELECT COUNT(*) FROM chunks WHERE source = 'sessions'") == [(0,)]


# ---------------------------------------------------------------------------- concurrency and speed


def test_concurrent_syncs_share_one_run(workspace: Path, open_index: Any) -> None:
    write(workspace / "memory" / "a.md", "shared run\n")
    embedder = HashEmbedder(delay=0.4)
    index = open_index(embedder)
    results: list[Any] = []
    threads = [threading.Thread(target=lambda: results.append(index.sync())) for _ in range(3)]
    for t in threads:
        t.start()
        time.sleep(0.05)
    for t in threads:
        t.join()
    assert len(embedder.calls) == 1
    assert results[0] is results[1] is results[2]


def _process_sync(workspace: str, state: str, rounds: int) -> None:
    config = MemorySearchConfig()
    with MemoryIndex.open(
        "main", Path(workspace), config, state_dir=Path(state), selection=FTS_ONLY
    ) as index:
        for i in range(rounds):
            index.sync(force=(i == 1))


def test_two_processes_syncing_the_same_database(workspace: Path, state: Path) -> None:
    for i in range(150):
        write(workspace / "memory" / f"n{i:03d}.md", long_note(f"topic{i}", 15))
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_process_sync, args=(str(workspace), str(state), 3)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0, 0]
    with MemoryIndex.open("main", workspace, settings(), state_dir=state, selection=FTS_ONLY) as index:
        assert rows(index, "PRAGMA integrity_check") == [("ok",)]
        assert rows(index, "SELECT COUNT(*) FROM files") == [(150,)]
        (n_chunks,), (n_fts,) = (
            rows(index, "SELECT COUNT(*) FROM chunks")[0],
            rows(index, "SELECT COUNT(*) FROM chunks_fts")[0],
        )
        assert n_chunks == n_fts >= 150
        assert rows(index, "SELECT COUNT(*) FROM files WHERE path NOT IN (SELECT path FROM chunks)") == [(0,)]
        assert index.sync().files_unchanged == 150


def test_a_no_op_sync_only_stats_unchanged_files(
    tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DESIGN decision 10 (its speed is measured in bench/bench_index.py, not here)."""
    from sessionmem.memory.sync import sources as files

    ws = tmp_path / "big"
    for d in range(4):
        folder = ws / "memory" / f"d{d}"
        folder.mkdir(parents=True)
        for i in range(500):
            (folder / f"n{i}.md").write_text(f"note {d} {i}\n", encoding="utf-8")
    with MemoryIndex.open("main", ws, settings(), state_dir=state, selection=FTS_ONLY) as index:
        assert index.sync().files_indexed == 2_000
        reads: list[Path] = []
        real_read = files.read_markdown

        def read_and_note(path: Path, *args: Any) -> Any:
            reads.append(path)
            return real_read(path, *args)

        monkeypatch.setattr(files, "read_markdown", read_and_note)
        report = index.sync()
        assert report.files_unchanged == 2_000 and report.files_indexed == 0
        assert reads == []
        (ws / "memory" / "d1" / "n7.md").write_text("note 1 7, edited\n", encoding="utf-8")
        assert index.sync().files_indexed == 1
        assert reads == [ws / "memory" / "d1" / "n7.md"]


def test_interval_sync_picks_up_new_files(workspace: Path, open_index: Any) -> None:
    index = open_index(config=settings(sync={"intervalMinutes": 0.002}))  # every 0.12 s
    write(workspace / "memory" / "later.md", "arrived later\n")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and rows(index, "SELECT COUNT(*) FROM files")[0][0] == 0:
        time.sleep(0.05)
    assert rows(index, "SELECT path FROM files") == [("memory/later.md",)]


def test_closed_index_refuses_work(workspace: Path, state: Path) -> None:
    index = MemoryIndex.open("main", workspace, settings(), state_dir=state, selection=FTS_ONLY)
    index.close()
    index.close()  # idempotent
    with pytest.raises(Exception, match="closed"):
        index.sync()


@pytest.mark.local_model
def test_real_gguf_model_indexes_and_finds(workspace: Path, state: Path, gguf_model: Path) -> None:
    embed_local = pytest.importorskip("sessionmem.memory.embed.local_gguf")
    embedder = embed_local.LocalEmbedder(str(gguf_model))
    write(workspace / "memory" / "pets.md", "Our dog Rex loves long walks in the park.\n")
    write(workspace / "memory" / "work.md", "The quarterly budget review is scheduled for March.\n")
    selection = EmbedderSelection(embedder, "local")
    with MemoryIndex.open("main", workspace, settings(), state_dir=state, selection=selection) as index:
        report = index.sync()
        assert report.embedded == 2
        assert index.status().vector_dims == 384
        assert rows(index, "SELECT COUNT(*) FROM chunks_vec") == [(2,)]
        response = index.search(SearchRequest("puppy exercise outdoors", min_score=0.0))
        assert response.results[0].path == "memory/pets.md"


def test_progress_reports_files_to_index(workspace: Path, open_index: Any) -> None:
    for i in range(4):
        write(workspace / "memory" / f"n{i}.md", f"progress note {i}\n")
    seen: list[tuple[int, int]] = []
    open_index().sync(progress=lambda done, total: seen.append((done, total)))
    assert seen == [(0, 4), (1, 4), (2, 4), (3, 4), (4, 4)]


def test_provider_is_chosen_from_config_when_no_selection_is_given(workspace: Path, state: Path) -> None:
    write(workspace / "memory" / "a.md", "chosen lazily\n")
    config = settings(provider="none")
    with MemoryIndex.open("main", workspace, config, state_dir=state) as index:
        status = index.status()
        assert (status.provider_requested, status.provider, status.mode) == ("none", "none", "fts-only")
        assert status.fallback_reason
        assert index.sync().files_indexed == 1


def test_status_in_a_new_process_says_dirty_only_when_files_changed(workspace: Path, open_index: Any) -> None:
    note = write(workspace / "memory" / "a.md", "the billing cutover is on tuesday\n")
    unwatched = settings(sync={"watch": False})  # as the CLI opens it: only status() judges dirtiness
    open_index(config=unwatched).sync()
    reopened = open_index(config=unwatched)  # a later CLI call: nothing synced in this process yet
    assert not reopened.status().dirty
    write(workspace / "memory" / "b.md", "new note\n")
    assert reopened.status().dirty
    reopened.sync()
    assert not reopened.status().dirty
    note.unlink()
    assert reopened.status().dirty


def test_search_says_when_the_fallback_provider_answers(workspace: Path, state: Path) -> None:
    write(workspace / "memory" / "a.md", "the billing cutover is on tuesday\n")
    selection = EmbedderSelection(HashEmbedder(), "openai", fallback_from="openai", reason="quota exhausted")
    with MemoryIndex.open("main", workspace, settings(), state_dir=state, selection=selection) as index:
        response = index.search(SearchRequest("billing cutover"))
    assert response.results and response.fallback == {"from": "openai", "reason": "quota exhausted"}
