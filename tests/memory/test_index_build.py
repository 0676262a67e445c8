"""Building a large index costs in proportion to its size: no statement of a sync reads every row, and a
long pass gets SQLite room for its writes, given back afterwards (bench/bench_search.py measures it)."""

from __future__ import annotations

from pathlib import Path

from sessionmem.memory.search.records import SearchRequest
from sessionmem.memory.store.database import connect
from sessionmem.memory.store.index_sqlite import (
    BULK_CACHE_KIB,
    BULK_CHECKPOINT_PAGES,
    BULK_FILES,
    SqliteStore,
)
from tests.memory.stores import rows
from tests.memory.support import HashEmbedder, index_opener, make_config

# The lookup of vectors already embedded for a text, as the sync pass asks it (sync_pass._lookup).
VECTOR_REUSE = (
    "SELECT hash, embedding FROM chunks WHERE model = ? AND embedding IS NOT NULL "
    "AND hash IN (?, ?) AND (? < 0 OR length(embedding) = ?)"
)


def write_notes(workspace: Path, files: int) -> None:
    folder = workspace / "memory"
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(files):
        folder.joinpath(f"2026-01-{i % 28 + 1:02d}-{i}.md").write_text(
            f"# Note {i}\n\nThe pump {i} was fixed.\n"
        )


def test_vectors_are_found_by_text_through_an_index_not_a_scan_of_every_chunk(
    workspace: Path, state: Path
) -> None:
    write_notes(workspace, 3)
    with index_opener(workspace, state) as open_index:
        index = open_index(make_config(sources=("memory",)), HashEmbedder())
        index.sync()
        plan = " ".join(
            str(r[-1]) for r in rows(index, "EXPLAIN QUERY PLAN " + VECTOR_REUSE, "m", "a", "b", -1, -1)
        )
    # Before: "SCAN chunks" once per 400 texts of every batch, so a build's cost grew with the square
    # of its size (60,000 chunks: 24 s, 5 s of them in this statement).
    assert "idx_chunks_hash" in plan, plan


def test_an_index_made_before_the_text_index_gains_it_when_opened(workspace: Path, state: Path) -> None:
    write_notes(workspace, 3)
    with index_opener(workspace, state) as open_index:
        index = open_index(make_config(sources=("memory",)), HashEmbedder())
        index.sync()
        path = index.path
        index.close()
    assert isinstance(path, Path)
    conn, _ = connect(path, load_vector=False)
    conn.execute("DROP INDEX idx_chunks_hash")
    conn.close()
    with index_opener(workspace, state) as open_index:
        index = open_index(make_config(sources=("memory",)), HashEmbedder())
        names = {r[0] for r in rows(index, "SELECT name FROM sqlite_master WHERE type = 'index'")}
        hits = index.search(SearchRequest("pump 2")).results
    assert "idx_chunks_hash" in names
    assert hits and hits[0].path.startswith("memory/")


def pragmas(store: SqliteStore) -> tuple[int, int]:
    ((cache,),) = store.execute("PRAGMA cache_size").fetchall()
    ((checkpoint,),) = store.execute("PRAGMA wal_autocheckpoint").fetchall()
    return int(cache), int(checkpoint)


def test_a_long_pass_gets_a_larger_cache_and_gives_it_back(tmp_path: Path) -> None:
    conn, vector = connect(tmp_path / "index.sqlite", load_vector=False)
    store = SqliteStore(conn, vector)
    before = pragmas(store)
    with store.bulk_writes(BULK_FILES):
        assert pragmas(store) == (-BULK_CACHE_KIB, BULK_CHECKPOINT_PAGES)
    assert pragmas(store) == before
    with store.bulk_writes(BULK_FILES - 1):  # a few files: nothing to gain
        assert pragmas(store) == before
    try:
        with store.bulk_writes(BULK_FILES):
            raise RuntimeError("the pass failed")
    except RuntimeError:
        pass
    assert pragmas(store) == before
    store.close()


def test_a_sync_of_many_files_indexes_every_one(workspace: Path, state: Path) -> None:
    write_notes(workspace, BULK_FILES + 10)
    with index_opener(workspace, state) as open_index:
        index = open_index(make_config(sources=("memory",)), HashEmbedder())
        report = index.sync()
        counted = rows(index, "SELECT COUNT(DISTINCT path), COUNT(*) FROM chunks WHERE embedding IS NOT NULL")
        hits = index.search(SearchRequest("pump 37 fixed")).results
    assert report.chunks_written == BULK_FILES + 10
    assert counted == [(BULK_FILES + 10, BULK_FILES + 10)]
    assert any(h.path.endswith("-37.md") for h in hits)
