"""A large PostgreSQL index ranks its common words from postings held in memory (the keyword matrix,
``keyword_postings``), and keeps them current from the change log when another host writes: what host B
returns is what the keyword statement alone returns (the same chunks, order and scores), with filters,
after another host inserts, edits, relabels and deletes notes, without loading the matrix again. The
thresholds are lowered so a small index holds its common words."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sessionmem.config import MemorySearchConfig
from sessionmem.memory.index import MemoryIndex
from sessionmem.memory.search.query_terms import fts_phrases
from sessionmem.memory.store import postgres_keywords
from sessionmem.memory.store.index_postgres import PgStore
from sessionmem.memory.store.postgres_keywords import PgKeywordIndex
from sessionmem.memory.store.seam import KeywordFilters

from .keyword_corpus import QUERIES, note, write_dated_notes
from .stores import StoreUnderTest, open_store, store_under_test

FILTERS = [
    KeywordFilters(),
    KeywordFilters(audiences=["shared"]),
    KeywordFilters(audiences=[""]),  # sees nothing: a label no row has
    KeywordFilters(dates=("2026-01-02", "2026-01-04")),
    KeywordFilters(sources=["memory"], audiences=["owner", "shared"]),
    KeywordFilters(model="another-model"),
]
HELD = {"one": True, "notes": True, "maple": True, "harbor": True, "zinnia": False, "quokka": False}


@pytest.fixture
def pg(monkeypatch: pytest.MonkeyPatch) -> Iterator[StoreUnderTest]:
    monkeypatch.setattr(postgres_keywords, "MATRIX_MIN_ROWS", 100)
    monkeypatch.setattr(postgres_keywords, "HELD_SHARE", 0.05)
    with store_under_test("postgresql") as store:
        yield store


@pytest.fixture
def host_a(tmp_path: Path, pg: StoreUnderTest) -> Iterator[MemoryIndex]:
    """The writing host: ~1,800 chunks in six dated notes (words in 5% of the chunks or more are held)."""
    write_dated_notes(tmp_path / "ws" / "memory")
    base = {"sync": {"watch": False, "onSearch": False}, "chunking": {"tokens": 64, "overlap": 0}}
    settings = pg.settings(MemorySearchConfig.model_validate(base))
    opened = MemoryIndex.open("main", tmp_path / "ws", settings, state_dir=tmp_path / "a", watch=False)
    opened.sync()
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def host_b(host_a: MemoryIndex) -> Iterator[PgStore]:
    """The searching host's store (its own connections)."""
    store = open_store(host_a)
    assert isinstance(store, PgStore)
    try:
        yield store
    finally:
        store.close()


def _statement(index: MemoryIndex, phrases: list[str], filters: KeywordFilters, limit: int) -> list[Any]:
    """The keyword statement's answer alone: a fresh connection's keyword index, without a matrix."""
    store = open_store(index)
    assert isinstance(store, PgStore)
    try:
        return list(PgKeywordIndex(store.conn, store.tokenizer).search(phrases, filters, limit).items())
    finally:
        store.close()


def _assert_same(b: PgStore, a: MemoryIndex, limits: list[int], filters: list[KeywordFilters]) -> None:
    keywords = b.keywords()
    for query in QUERIES:
        phrases = fts_phrases(query)
        for kept in filters:
            for limit in limits:
                with b.snapshot():  # as a search runs
                    found = list(keywords.search(phrases, kept, limit).items())
                expected = _statement(a, phrases, kept, limit)
                assert [r for r, _ in found] == [r for r, _ in expected], (query, kept, limit)
                scores = [s for _, s in expected]
                assert [s for _, s in found] == pytest.approx(scores, abs=1e-9), (query, limit)


def _matrix(b: PgStore) -> Any:
    keywords = b.keywords()
    assert isinstance(keywords, PgKeywordIndex)
    matrix = keywords.matrix()
    assert matrix is not None
    return matrix


def _loaded(b: PgStore) -> Any:
    """Search once (a load starts), wait for it; the matrix then serves and holds the common words."""
    b.keywords().search(fts_phrases("one notes"), KeywordFilters(), 5)
    matrix = _matrix(b)
    assert matrix.wait(60)
    state = matrix.current()
    assert state is not None
    assert {w: state.holds(b.tokenizer.tokens([w])[0][0]) for w in HELD} == HELD
    return matrix


def test_the_matrix_ranks_as_the_keyword_statement(host_a: MemoryIndex, host_b: PgStore) -> None:
    assert _matrix(host_b).current() is None  # not loaded: the statement answers meanwhile
    _assert_same(host_b, host_a, [6, 50], FILTERS[:1])
    _loaded(host_b)
    _assert_same(host_b, host_a, [1, 6, 50, 400, 5000], FILTERS[:1])
    _assert_same(host_b, host_a, [6, 300], FILTERS[1:])


def test_another_hosts_writes_are_applied_not_loaded_again(host_a: MemoryIndex, host_b: PgStore) -> None:
    """Host A inserts a note, edits one, relabels chunks and deletes a note; host B's next searches read
    only those chunks' keyword rows and answer what the statement answers."""
    matrix = _loaded(host_b)
    mem = Path(host_a.workspace) / "memory"
    relabel = "UPDATE chunks SET audience = 'shared' WHERE rowid % 3 = 0"
    writes = [
        lambda: (mem / "2026-01-09-more.md").write_text(note(9, range(3000, 3400))),  # insert
        lambda: (mem / "2026-01-03-log.md").write_text(note(2, range(1000, 1300)) + "- one quokka harbor\n"),
        lambda: (mem / "2026-01-02-log.md").unlink(),  # delete
    ]
    for step, write in enumerate(writes):
        write()
        host_a.sync()
        if step == 1:  # an update of rows in place: same rowids, another audience
            store = open_store(host_a)
            try:
                with store.atomic():
                    store.execute(relabel)
            finally:
                store.close()
        host_b.keywords().forget()  # as the searcher does when the write token moves
        updates = matrix.updates
        _assert_same(host_b, host_a, [6, 300, 5000], FILTERS[:2])
        assert matrix.updates == updates + 1  # applied once, at the first search after the write
        assert matrix.loads == 1  # never loaded again
        _assert_same(host_b, host_a, [6], FILTERS[2:])
    state = matrix.current()
    assert state is not None
    for word, held in HELD.items():  # the postings of a held word: as many rows as hold it now
        lexeme = host_b.tokenizer.tokens([word])[0][0]
        (count,) = host_b.execute(
            "SELECT count(*) FROM chunks_fts WHERE fts @@ ?::tsquery", (f"'{lexeme}'",)
        ).fetchone()
        assert count and host_b.keywords().hits(f'"{word}"') == count
        if held:
            assert state.held_by(lexeme) == count
