"""PostgreSQL's keyword ranks are SQLite's FTS5 ranks, also when a query mixes a common word with rare
ones (the PostgreSQL store then ranks the chunks holding the rare ones first, ``pg_keywords._loose``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sessionmem.config import MemorySearchConfig
from sessionmem.memory.index import MemoryIndex
from sessionmem.memory.search.query_terms import fts_phrases
from sessionmem.memory.store.seam import KeywordFilters

from .stores import SQLITE, open_store, store_under_test


def _workspace(root: Path) -> Path:
    """2,400 one-line notes of several lengths: "harbor" in 2,000 (once or twice), "alder" and "birch" in
    900 each, "cedar" in 480, "zinnia" in 343, "quokka" in 2, "vellum fjord" together in 3. Enough that
    a query of common words ranks in two steps (``sqlite_keywords.SPLIT_HITS``)."""
    lines = []
    for i in range(2400):
        words = [f"filler{i % 7}"] * (9 + i % 5)  # over 64 characters: one note, one chunk
        words += ["harbor"] * (1 + i % 2) if i % 6 else []
        words += ["alder"] * (1 + (i % 3 == 0)) if i % 8 < 3 else []
        words += ["birch"] if (i // 8) % 8 < 3 else []
        words += ["cedar"] if i % 5 == 3 else []
        words += ["zinnia"] if i % 7 == 0 else []
        words += ["quokka"] if i in (3, 40) else []
        words += ["vellum", "fjord"] if i in (5, 6, 50) else []
        lines.append(f"- n{i} " + " ".join(words))
    mem = root / "memory"
    mem.mkdir(parents=True)
    (mem / "notes.md").write_text("\n".join(lines) + "\n")
    return root


def _ranks(index: MemoryIndex, query: str, limit: int) -> list[tuple[str, int, float]]:
    store = open_store(index)
    try:
        ranks = store.keywords().search(fts_phrases(query), KeywordFilters(), limit)
        lines = dict(
            store.execute(
                f"SELECT rowid, start_line FROM chunks WHERE rowid IN ({','.join('?' * len(ranks))})",
                list(ranks),
            ).fetchall()
        ) if ranks else {}  # fmt: skip
        return [(query, int(lines[rowid]), round(rank, 9)) for rowid, rank in ranks.items()]
    finally:
        store.close()


@pytest.fixture(scope="module")
def both_indexes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, MemoryIndex]]:
    """The same workspace indexed in SQLite and in PostgreSQL."""
    root = tmp_path_factory.mktemp("bm25")
    ws = _workspace(root / "ws")
    settings = MemorySearchConfig.model_validate({"chunking": {"tokens": 32, "overlap": 0}})
    with store_under_test("postgresql") as pg:
        indexes = {
            kind: MemoryIndex.open("main", ws, store.settings(settings), state_dir=root / kind)
            for kind, store in (("sqlite", SQLITE), ("postgresql", pg))
        }
        try:
            for index in indexes.values():
                index.sync()
            yield indexes
        finally:
            for index in indexes.values():
                index.close()


@pytest.mark.parametrize(
    ("query", "limit"),
    [
        ("harbor zinnia", 3),  # enough chunks hold the rare word: only those are ranked
        ("harbor zinnia", 400),  # too few: every chunk holding "harbor" is ranked too
        ("harbor quokka", 2),
        ("harbor quokka zinnia", 6),
        ("harbor vellum-fjord", 2),  # a phrase of several tokens beside the common word
        ("harbor vellum-fjord zinnia", 5),
        ("harbor", 4),
        ("alder birch cedar", 5),
        ("alder birch cedar", 400),  # chunks holding "birch" (not "alder" alone) are ranked second
        ("alder birch cedar vellum-fjord", 400),
        ("alder birch", 30),
    ],
)
def test_postgresql_keyword_ranks_equal_sqlite_fts5(
    both_indexes: dict[str, MemoryIndex], query: str, limit: int
) -> None:
    found = {kind: _ranks(index, query, limit) for kind, index in both_indexes.items()}
    assert len(found["sqlite"]) == limit
    assert found["postgresql"] == found["sqlite"]


def test_ranks_stay_equal_after_notes_change_and_on_an_index_made_before_token_counts(
    tmp_path: Path,
) -> None:
    """Token counts follow edits and deletions, and an index made without the counts table gets one."""
    ws = _workspace(tmp_path / "ws")
    settings = MemorySearchConfig.model_validate({"chunking": {"tokens": 32, "overlap": 0}})
    queries = [("harbor zinnia", 3), ("harbor zinnia", 400), ("alder birch cedar", 400), ("harbor quokka", 2)]
    with store_under_test("postgresql") as pg:
        pg_index = MemoryIndex.open("main", ws, pg.settings(settings), state_dir=tmp_path / "pg")
        sqlite_index = MemoryIndex.open("main", ws, settings, state_dir=tmp_path / "sqlite")
        try:
            pg_index.sync()
            notes = ws / "memory" / "notes.md"
            lines = notes.read_text().splitlines()
            notes.write_text("\n".join(line.replace("harbor", "") for line in lines[:1800]) + "\n")
            (ws / "memory" / "more.md").write_text("- zinnia harbor harbor quokka\n- harbor again\n")
            for index in (pg_index, sqlite_index):
                index.sync()
            for query, limit in queries:
                assert _ranks(pg_index, query, limit) == _ranks(sqlite_index, query, limit)

            store = open_store(pg_index)
            try:
                with store.atomic():
                    store.execute("DROP TABLE chunks_fts_df")
            finally:
                store.close()
            pg_index.close()
            pg_index = MemoryIndex.open("main", ws, pg.settings(settings), state_dir=tmp_path / "pg")
            pg_index.sync()
            for query, limit in queries:
                assert _ranks(pg_index, query, limit) == _ranks(sqlite_index, query, limit)
        finally:
            pg_index.close()
            sqlite_index.close()


def test_each_phrases_holders_are_the_chunks_its_search_finds_in_both_stores(
    both_indexes: dict[str, MemoryIndex],
) -> None:
    """``holders`` (what the answer check reads, every term at once) names, for each phrase, the chunks a
    search of that phrase alone finds as deep as its count; the same lines in both stores."""
    phrases = fts_phrases("quokka zinnia vellum-fjord nowhereword cedar")
    found = {}
    for kind, index in both_indexes.items():
        store = open_store(index)
        try:
            keywords = store.keywords()
            held = keywords.holders(phrases)
            for phrase in phrases:
                count = keywords.hits(phrase)
                alone = keywords.search([phrase], KeywordFilters(), count) if count else {}
                assert sorted(held[phrase]) == sorted(alone), (kind, phrase)
            lines = dict(store.execute("SELECT rowid, start_line FROM chunks").fetchall())
            found[kind] = {p: sorted(lines[r] for r in held[p]) for p in phrases}
        finally:
            store.close()
    assert found["postgresql"] == found["sqlite"]
    assert [bool(found["sqlite"][p]) for p in phrases] == [p != '"nowhereword"' for p in phrases]
