"""``MemoryIndex.erase``: a person's rows leave the index, on both stores, and nothing of them stays
readable in the database, as SQL sees it and (SQLite) as a byte scan of its files sees it."""

from __future__ import annotations

from pathlib import Path

from sessionmem.memory.search.records import SearchRequest
from tests.memory.stores import StoreUnderTest, rows
from tests.memory.support import HashEmbedder, index_opener, make_config

ANA = "memory/peers/telegram~direct~42"
BEN = "memory/peers/telegram~direct~43"
ANA_LABEL = "peer:telegram~direct~42"
WORD = "zanzibarquokka"


def write(workspace: Path, rel: str, text: str) -> None:
    path = workspace / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def database_bytes(index_path: object) -> bytes:
    assert isinstance(index_path, Path)
    return b"".join(p.read_bytes() for p in (index_path, Path(f"{index_path}-wal")) if p.exists())


def test_erase_takes_their_rows_and_cached_vectors_and_keeps_a_vector_someone_else_shares(
    workspace: Path, state: Path, index_store: StoreUnderTest
) -> None:
    shared = "- likes rooibos tea\n"  # the same text in both folders: one cache entry, two chunks
    write(workspace, f"{ANA}/tea.md", shared)
    write(workspace, f"{BEN}/tea.md", shared)
    write(workspace, f"{ANA}/MEMORY.md", f"- {WORD} moved to Porto\n")
    write(workspace, f"{BEN}/MEMORY.md", "- bellwetherotter moved to Lisbon\n")
    with index_opener(workspace, state, index_store) as open_index:
        index = open_index(make_config(), HashEmbedder())
        index.sync()
        assert rows(index, "SELECT COUNT(*) FROM embedding_cache") == [(3,)]
        (shared_hash,) = {r[0] for r in rows(index, "SELECT hash FROM chunks WHERE path LIKE ?", "%/tea.md")}

        planned = index.erase([ANA_LABEL], dry_run=True)
        assert rows(index, "SELECT COUNT(*) FROM chunks") == [(4,)]  # a dry run changes nothing
        erased = index.erase([ANA_LABEL])

        assert planned.paths == erased.paths == (f"{ANA}/MEMORY.md", f"{ANA}/tea.md")
        assert (planned.chunks, planned.cache_entries) == (erased.chunks, erased.cache_entries) == (2, 1)
        assert erased.issues == () and erased.done
        assert rows(index, "SELECT path FROM files WHERE path LIKE ?", f"{ANA}/%") == []
        assert rows(index, "SELECT path FROM chunks WHERE audience = ?", ANA_LABEL) == []
        # Ben's chunk still has the shared text, so its cached vector stays; Ana's own one is gone.
        assert rows(index, "SELECT COUNT(*) FROM embedding_cache WHERE hash = ?", shared_hash) == [(1,)]
        assert rows(index, "SELECT COUNT(*) FROM embedding_cache") == [(2,)]
        found = index.search(SearchRequest(f"{WORD} rooibos", max_results=10, min_score=0.0)).results
        assert {hit.path for hit in found} <= {f"{BEN}/tea.md", f"{BEN}/MEMORY.md"}
        # The files are still there (erase only takes rows): a sync would index them again.
        assert index.erase([ANA_LABEL]).chunks == 0


def test_erase_drops_a_path_named_without_its_label_and_the_notes_kept_about_it(
    workspace: Path, state: Path, index_store: StoreUnderTest
) -> None:
    write(workspace, "memory/loose.md", f"- {WORD} note\n")
    (workspace / ANA).mkdir(parents=True)
    (workspace / ANA / "bad.md").write_bytes(b"- " + WORD.encode() + b" \xff\xfe broken utf-8\n")
    with index_opener(workspace, state, index_store) as open_index:
        index = open_index(make_config())
        index.sync()
        assert rows(index, "SELECT COUNT(*) FROM meta WHERE value LIKE ?", f"%{ANA}/bad.md%") == [(1,)]
        erased = index.erase([ANA_LABEL], ["memory/loose.md"])
        assert set(erased.paths) == {"memory/loose.md", f"{ANA}/bad.md"}
        assert rows(index, "SELECT COUNT(*) FROM meta WHERE value LIKE ?", f"%{ANA}%") == [(0,)]
        assert rows(index, "SELECT COUNT(*) FROM chunks WHERE text LIKE ?", f"%{WORD}%") == [(0,)]


def test_an_ordinary_delete_leaves_the_words_in_the_sqlite_file_and_erase_leaves_none(
    workspace: Path, state: Path
) -> None:
    # Why erase scrubs: a deleted row stays readable in the file's bytes (old page images in the WAL,
    # tokens in FTS5's older segments, cells of rows rewritten before). Many syncs of a growing note
    # leave older copies of it behind, as a real daily log does.
    with index_opener(workspace, state) as open_index:
        index = open_index(make_config(), HashEmbedder())
        for day in range(12):
            write(
                workspace,
                f"{ANA}/log.md",
                "".join(f"- day {d}: {WORD} walked {d} km\n" for d in range(day + 1)),
            )
            write(workspace, f"{BEN}/log.md", f"- day {day}: bellwetherotter rested\n")
            index.sync()
        (workspace / ANA / "log.md").unlink()
        index.sync()  # the ordinary way a note leaves the index
        assert rows(index, "SELECT COUNT(*) FROM chunks WHERE text LIKE ?", f"%{WORD}%") == [(0,)]
        assert WORD.encode() in database_bytes(index.path)  # ...and yet the file still holds it

        write(workspace, f"{ANA}/log.md", f"- {WORD} is back\n")
        index.sync()
        erased = index.erase([ANA_LABEL])
        assert erased.issues == ()
        assert erased.done == (
            "deleted rows overwritten with zeros (secure_delete)",
            "FTS5 index merged, its deleted tokens dropped (optimize)",
            "database rewritten without free pages or stale bytes (VACUUM)",
            "WAL checkpointed and truncated",
        )
        data = database_bytes(index.path)
        assert WORD.encode() not in data and ANA.encode() not in data
        assert b"bellwetherotter" in data  # Ben's rows are all there
        assert rows(index, "SELECT COUNT(*) FROM chunks_fts WHERE chunks_fts MATCH ?", "bellwetherotter") == [
            (1,)
        ]
        assert rows(index, "PRAGMA integrity_check") == [("ok",)]


def test_a_deleted_notes_words_leave_the_postgresql_keyword_counts(workspace: Path, state: Path) -> None:
    # chunks_fts_df counts, per token, the chunks holding it; a token no chunk holds any more kept a row
    # with count 0, so a deleted note's words stayed readable with SQL (and a person's after forget).
    from tests.memory.stores import store_under_test

    with store_under_test("postgresql") as pg, index_opener(workspace, state, pg) as open_index:
        index = open_index(make_config())
        write(workspace, "memory/a.md", f"- {WORD} likes Porto\n")
        write(workspace, "memory/b.md", "- bellwetherotter likes Porto\n")
        index.sync()
        assert rows(index, "SELECT df FROM chunks_fts_df WHERE lexeme = ?", WORD) == [(1,)]
        (workspace / "memory" / "a.md").unlink()
        index.sync()
        assert rows(index, "SELECT lexeme FROM chunks_fts_df WHERE lexeme LIKE ?", f"%{WORD[:8]}%") == []
        assert rows(index, "SELECT df FROM chunks_fts_df WHERE lexeme = ?", "porto") == [(1,)]
        hits = index.search(SearchRequest("Porto", max_results=5)).results
        assert [hit.path for hit in hits] == ["memory/b.md"]


def test_a_dry_run_writes_nothing_and_a_real_erase_of_nobody_still_scrubs(
    workspace: Path, state: Path
) -> None:
    write(workspace, f"{BEN}/MEMORY.md", "- bellwetherotter\n")
    with index_opener(workspace, state) as open_index:
        index = open_index(make_config())
        index.sync()
        assert isinstance(index.path, Path)
        before = index.path.stat().st_mtime_ns, database_bytes(index.path)
        planned = index.erase([ANA_LABEL], ["sessions/none.jsonl"], dry_run=True)
        assert (planned.paths, planned.chunks, planned.cache_entries, planned.done) == ((), 0, 0, ())
        assert (index.path.stat().st_mtime_ns, database_bytes(index.path)) == before
        # A real run finds nothing of them, and still scrubs: a killed run may have left their rows'
        # bytes in the file after deleting the rows.
        erased = index.erase([ANA_LABEL], ["sessions/none.jsonl"])
        assert (erased.paths, erased.chunks, erased.cache_entries) == ((), 0, 0)
        assert "WAL checkpointed and truncated" in erased.done
        assert rows(index, "SELECT path FROM files") == [(f"{BEN}/MEMORY.md",)]
