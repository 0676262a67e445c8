"""A large SQLite index ranks its common words from postings held in memory (``keyword_postings``, the
keyword matrix): what it returns is what one FTS5 query ranking every matching row by its full BM25
returns (the same chunks, order and scores), with filters, and after notes are written and deleted.
The threshold is lowered so a small index loads it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sessionmem.config import MemorySearchConfig
from sessionmem.memory.index import MemoryIndex
from sessionmem.memory.search.query_terms import fts_phrases
from sessionmem.memory.search.records import SearchRequest
from sessionmem.memory.store import keyword_postings, sqlite_keywords
from sessionmem.memory.store.database import connect
from sessionmem.memory.store.fts_tokens import Tokenizer, phrase_text
from sessionmem.memory.store.index_sqlite import SqliteStore
from sessionmem.memory.store.seam import KeywordFilters
from sessionmem.memory.store.sqlite_keywords import KeywordIndex, match_expression, table_tokenizer

from .keyword_corpus import QUERIES, note, write_dated_notes


@pytest.fixture
def index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MemoryIndex]:
    """~1,800 chunks in six dated notes; words in 5% of the chunks or more are held."""
    monkeypatch.setattr(sqlite_keywords, "MATRIX_MIN_ROWS", 100)
    monkeypatch.setattr(keyword_postings, "HELD_SHARE", 0.05)
    write_dated_notes(tmp_path / "ws" / "memory")
    settings = MemorySearchConfig.model_validate({"chunking": {"tokens": 64, "overlap": 0}})
    opened = MemoryIndex.open("main", tmp_path / "ws", settings, state_dir=tmp_path / "state")
    opened.sync()
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def store(index: MemoryIndex) -> Iterator[SqliteStore]:
    path = Path(index.path)
    opened = SqliteStore(connect(path, load_vector=False)[0], path=path)
    try:
        yield opened
    finally:
        opened.close()


def _reference(store: SqliteStore, phrases: list[str], filters: KeywordFilters, limit: int) -> list[Any]:
    """Every chunk matching any phrase and the filters ranked by FTS5's full BM25 (ties: lower rowid)."""
    rows = store.execute(
        "SELECT f.rowid, bm25(chunks_fts), c.model, c.source, c.date, c.audience FROM chunks_fts f"
        " JOIN chunks c ON c.rowid = f.rowid WHERE chunks_fts MATCH ?",
        (match_expression(phrases),),
    ).fetchall()
    kept = [
        (int(r[0]), float(r[1]))
        for r in rows
        if (filters.model is None or r[2] == filters.model)
        and (not filters.sources or r[3] in filters.sources)
        and (filters.dates is None or (r[4] is not None and filters.dates[0] <= r[4] <= filters.dates[1]))
        and (not filters.audiences or r[5] in filters.audiences)
    ]
    return sorted(kept, key=lambda x: (x[1], x[0]))[:limit]


# the query words, and whether they are held by 5% of the chunks or more
WORDS = {"one": True, "notes": True, "maple": True, "harbor": True, "zinnia": False, "quokka": False}


def _loaded(keywords: KeywordIndex, store: SqliteStore) -> None:
    """Search once (a load starts), wait for it, and check the matrix is current."""
    keywords.search(fts_phrases("one notes"), KeywordFilters(), 5)
    matrix = keywords.matrix()
    assert matrix is not None and matrix.wait(60)
    state = matrix.current()
    assert state is not None
    tokenizer = Tokenizer(table_tokenizer(store))
    held = {w: state.holds(tokenizer.tokens([phrase_text(f'"{w}"')])[0][0]) for w in WORDS}
    assert held == WORDS


def _assert_same(
    keywords: KeywordIndex, store: SqliteStore, filters: KeywordFilters, limits: list[int]
) -> None:
    for query in QUERIES:
        phrases = fts_phrases(query)
        for limit in limits:
            found = list(keywords.search(phrases, filters, limit).items())
            expected = _reference(store, phrases, filters, limit)
            assert [r for r, _ in found] == [r for r, _ in expected], (query, limit)
            assert [s for _, s in found] == pytest.approx([s for _, s in expected], abs=1e-9), (query, limit)


def test_the_matrix_ranks_as_fts5_ranks_every_row(store: SqliteStore) -> None:
    keywords = store.keywords()
    matrix = keywords.matrix()
    assert matrix is not None and matrix.current() is None  # not loaded: FTS5 answers meanwhile
    _assert_same(keywords, store, KeywordFilters(), [6, 50])
    _loaded(keywords, store)
    _assert_same(keywords, store, KeywordFilters(), [1, 6, 50, 400, 5000])


def test_filters_are_masks_of_the_same_rows(store: SqliteStore) -> None:
    store.execute("UPDATE chunks SET audience = 'owner' WHERE rowid % 3 = 0")
    store.conn.commit()
    keywords = store.keywords()
    _loaded(keywords, store)
    (model,) = store.execute("SELECT model FROM chunks LIMIT 1").fetchone()
    for filters in [
        KeywordFilters(audiences=["shared"]),
        KeywordFilters(audiences=[""]),  # sees nothing: a label no row has
        KeywordFilters(dates=("2026-01-02", "2026-01-04")),
        KeywordFilters(model=model, sources=["memory"], audiences=["owner", "shared"]),
        KeywordFilters(model="another-model"),
        KeywordFilters(sources=["sessions"]),
    ]:
        _assert_same(keywords, store, filters, [6, 300])


def test_written_and_deleted_notes_are_ranked_after_a_reload(index: MemoryIndex, store: SqliteStore) -> None:
    """A write makes the matrix stale: FTS5 answers (the same) until the reload, which then serves."""
    keywords = store.keywords()
    _loaded(keywords, store)
    matrix = keywords.matrix()
    assert matrix is not None
    mem = Path(index.workspace) / "memory"
    (mem / "2026-01-09-more.md").write_text(note(9, range(3000, 3400)))
    index.sync()
    assert matrix.current() is None  # another connection wrote: stale
    keywords.forget()  # as the searcher does when the write token moves
    _assert_same(keywords, store, KeywordFilters(), [6, 300])  # FTS5 meanwhile
    _loaded(keywords, store)
    _assert_same(keywords, store, KeywordFilters(), [6, 300, 5000])
    (mem / "2026-01-02-log.md").unlink()
    index.sync()
    keywords.forget()
    _assert_same(keywords, store, KeywordFilters(), [6, 300])
    _loaded(keywords, store)
    assert matrix.loads == 3
    _assert_same(keywords, store, KeywordFilters(), [6, 300, 5000])
    for word in WORDS:  # counted from the postings when held, by FTS5 otherwise: the same
        phrase = f'"{word}"'
        (count,) = store.execute(
            "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?", (phrase,)
        ).fetchone()
        assert keywords.hits(phrase) == count


def test_a_warmed_index_searches_as_before(index: MemoryIndex) -> None:
    """``MemoryIndex.warm_keywords`` loads the keyword matrix; a search then returns what FTS5 alone
    returned."""
    requests = [SearchRequest(q, max_results=20) for q in QUERIES]
    before = [index.search(q).results for q in requests]
    index.warm_keywords()
    after = [index.search(q).results for q in requests]
    assert [[(r.path, r.start_line) for r in found] for found in after] == [
        [(r.path, r.start_line) for r in found] for found in before
    ]
    assert [r.score for found in after for r in found] == pytest.approx(
        [r.score for found in before for r in found], abs=1e-9
    )
    assert any(before)
