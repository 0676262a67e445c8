"""SQLite's keyword search ranks a query holding common words in two steps (``sqlite_keywords``: the
rare words by FTS5, the common words' share added where it can still matter); what it returns is what
one FTS5 query ranking every matching row by its full BM25 returns: the same chunks, order and scores."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sessionmem.config import MemorySearchConfig
from sessionmem.memory.index import MemoryIndex
from sessionmem.memory.search.query_terms import fts_phrases
from sessionmem.memory.store.fts_view import bm25_idf, fts_totals
from sessionmem.memory.store.seam import IndexStore, KeywordFilters
from sessionmem.memory.store.sqlite_keywords import common_split, match_expression

from .keyword_corpus import note_words
from .stores import SQLITE, open_store


def _workspace(root: Path) -> Path:
    """3,000 one-line notes of varied lengths, joined into ~1,800 chunks: "one" in 93% of them,
    "notes" in 42%, "maple" in 20%, "harbor", "cedar", "zinnia" fewer, "quokka" in 3, "vellum fjord"
    together in 4, "会议" in 1/50."""
    lines = []
    for i in range(3000):
        words = note_words(i)
        lines.append(f"- n{i} " + " ".join(words))
    mem = root / "memory"
    mem.mkdir(parents=True)
    (mem / "log.md").write_text("\n".join(lines) + "\n")
    return root


def _short_common_workspace(root: Path) -> Path:
    """300 notes, one chunk each: "kettle" four times in 100 short ones (a third of the chunks: a common
    word), "quince" once in 60 long ones, plain words in the rest. A short chunk saying "kettle" four
    times outscores a long one saying "quince" once, though "quince" is the rarer word."""
    mem = root / "memory"
    mem.mkdir(parents=True)
    for i in range(300):
        if i % 5 in (0, 3) and i < 250:
            text = "kettle " * 4
        elif i % 5 == 1:
            text = f"quince {' '.join(f'w{(i + j) % 40}' for j in range(45))}"
        else:
            text = " ".join(f"w{(i + j) % 40}" for j in range(20))
        (mem / f"note{i:03d}.md").write_text(f"- {text.strip()}\n")
    return root


def _open(
    tmp_path_factory: pytest.TempPathFactory, name: str, write: Callable[[Path], Path]
) -> Iterator[IndexStore]:
    root = tmp_path_factory.mktemp(name)
    ws = write(root / "ws")
    settings = MemorySearchConfig.model_validate({"chunking": {"tokens": 64, "overlap": 0}})
    index = MemoryIndex.open("main", ws, SQLITE.settings(settings), state_dir=root / "state")
    try:
        index.sync()
        opened = open_store(index)
        try:
            yield opened
        finally:
            opened.close()
    finally:
        index.close()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IndexStore]:
    yield from _open(tmp_path_factory, "two_steps", _workspace)


@pytest.fixture(scope="module")
def short_common(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IndexStore]:
    yield from _open(tmp_path_factory, "short_common", _short_common_workspace)


def _reference(store: IndexStore, phrases: list[str], limit: int) -> list[tuple[int, float]]:
    """Every chunk matching any phrase ranked by FTS5's full BM25, best first (ties: lower rowid)."""
    rows = store.execute(
        "SELECT rowid, bm25(chunks_fts) FROM chunks_fts WHERE chunks_fts MATCH ?",
        (match_expression(phrases),),
    ).fetchall()
    return sorted(((int(r), float(s)) for r, s in rows), key=lambda x: (x[1], x[0]))[:limit]


def _two_steps(store: IndexStore, phrases: list[str]) -> bool:
    """Whether the store ranks ``phrases`` in two steps (else the test of a query proves nothing new)."""
    keywords = store.keywords()
    hits = [keywords.hits(p) for p in phrases]
    singles = [i for i, p in enumerate(phrases) if " " not in p.strip('"')]
    rows, _ = fts_totals(store)
    return bool(common_split(len(phrases), singles, hits, rows)[1])


@pytest.mark.parametrize(
    ("query", "limit", "split"),
    [
        ("one notes", 6, True),  # only common words, one far more common than the other
        ("one notes", 900, True),
        ("quokka zinnia", 6, False),  # only rare words
        ("cedar zinnia quokka", 50, False),
        ("one zinnia", 6, True),  # mixed: the rare word's chunks are enough
        ("one zinnia", 200, True),  # too few: chunks holding only "one" are ranked too
        ("one notes quokka", 3, True),
        ("one notes quokka", 40, True),
        ("harbor one cedar", 10, True),
        ("harbor one cedar", 1000, True),
        ("maple notes", 6, True),  # "notes" bounds at 0.9: more than some chunks holding "maple" score
        ("maple notes", 200, True),  # chunks holding only "notes" outrank some holding "maple"
        ("maple notes", 340, True),
        ("maple notes", 400, True),
        ("maple one", 300, True),
        ('"vellum fjord" one', 6, True),  # a phrase of two words with a common word
        ("会议 one", 6, True),  # CJK: a phrase of characters with a common word
        ("会议 one", 100, True),
    ],
)
def test_two_steps_return_what_full_bm25_ranks(
    store: IndexStore, query: str, limit: int, split: bool
) -> None:
    phrases = fts_phrases(query)
    assert _two_steps(store, phrases) is split
    found = list(store.keywords().search(phrases, KeywordFilters(), limit).items())
    expected = _reference(store, phrases, limit)
    assert [rowid for rowid, _ in found] == [rowid for rowid, _ in expected]
    assert [rank for _, rank in found] == pytest.approx([rank for _, rank in expected], abs=1e-9)


def test_idfs_are_fts5s(store: IndexStore) -> None:
    """The row count and average length read from FTS5's record give its own IDFs and document lengths:
    a chunk holding "one" alone scores what FTS5 gives it."""
    rows, avg = fts_totals(store)
    assert rows == store.execute("SELECT count(*) FROM chunks").fetchone()[0]
    assert avg > 0
    hits = store.keywords().hits('"one"')
    assert bm25_idf(rows, hits) == pytest.approx(1e-6)  # held by 2/3: FTS5 floors the IDF


@pytest.mark.parametrize("limit", [10, 59])
def test_chunks_holding_only_the_common_word_outrank_the_rare_words_weak_chunks(
    short_common: IndexStore, limit: int
) -> None:
    """Enough chunks hold the rare word to fill the ``limit``, yet chunks holding only the common word
    score higher than most of them: those are ranked too, as full BM25 ranks them."""
    phrases = fts_phrases("quince kettle")
    assert _two_steps(short_common, phrases)
    assert short_common.keywords().hits('"quince"') > limit  # the rare word's chunks alone fill the limit
    found = list(short_common.keywords().search(phrases, KeywordFilters(), limit).items())
    expected = _reference(short_common, phrases, limit)
    assert [rowid for rowid, _ in found] == [rowid for rowid, _ in expected]
    assert [rank for _, rank in found] == pytest.approx([rank for _, rank in expected], abs=1e-9)
    texts = short_common.keywords().texts([found[0][0]])
    assert "kettle" in texts[found[0][0]] and "quince" not in texts[found[0][0]]
