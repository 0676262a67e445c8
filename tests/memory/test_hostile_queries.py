"""Queries from outside are bounded and cost linear time (a 1 MB query took 92 s, one 40,000-character word
21 s, 1,700 distinct words failed on PostgreSQL). No clock here: the bounds apply, the response says what
was cut, the work handed on (the embedder's input, the keywords searched) is counted, and both index
stores answer alike."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sessionmem.memory.index import MemoryIndex
from sessionmem.memory.search.query_bounds import MAX_QUERY_CHARS, MAX_QUERY_TERMS
from sessionmem.memory.search.records import SearchRequest, SearchResponse
from sessionmem.memory.tools.reading import handle_memory_search
from tests.memory.stores import SQLITE, StoreUnderTest, store_under_test
from tests.memory.support import index_opener, make_config

BILLING = "memory/2026-01-05.md"
KEYS = "memory/2026-01-06.md"
LONG_WORD = "k" * 1500  # a word a note may hold, under every bound
WIDE_WORD = "ж" * 1100  # 2,200 bytes of UTF-8: over PostgreSQL's 2,047-byte lexeme


@pytest.fixture
def notes(workspace: Path) -> Path:
    (workspace / "memory" / "2026-01-05.md").write_text(
        "# Billing\n\n- The billing cutover moves to March 3.\n- Priya signs off on the ledger switch.\n"
    )
    (workspace / "memory" / "2026-01-06.md").write_text(
        f"# Keys\n\n- The long serial is {LONG_WORD} for the vault.\n- The wide one is {WIDE_WORD} too.\n"
    )
    return workspace


@contextlib.contextmanager
def opened(
    workspace: Path, state: Path, store: StoreUnderTest, embedder: Any = None
) -> Iterator[MemoryIndex]:
    with index_opener(workspace, state, store) as open_index:
        # chunks of 2,000 characters: a line holding LONG_WORD or WIDE_WORD stays in one chunk
        index = open_index(make_config(sources=("memory",), tokens=500, overlap=0), embedder)
        index.sync()
        yield index


def distinct_words(count: int) -> str:
    """``count`` distinct words no note holds (letters and digits: kept as keywords)."""
    return " ".join(f"zq{i:05d}" for i in range(count))


def megabyte_query() -> str:
    words = distinct_words(130_000)  # 1,039,999 characters
    return f"billing cutover {words}"[:1_000_000]


def found(response: SearchResponse) -> list[str]:
    return [r.path for r in response.results]


def test_a_megabyte_query_is_answered_and_says_what_was_cut(
    notes: Path, state: Path, index_store: StoreUnderTest
) -> None:
    query = megabyte_query()
    with opened(notes, state, index_store) as index:
        response = index.search(SearchRequest(query))
    assert found(response)[0] == BILLING
    cut = response.query_cut
    assert cut is not None
    assert cut.chars == 1_000_000
    assert cut.chars_searched <= MAX_QUERY_CHARS
    assert cut.terms > cut.terms_searched == MAX_QUERY_TERMS
    searched = f"its first {cut.chars_searched:,} of 1,000,000 characters"
    assert cut.note().startswith(f"The query was cut: {searched} and {MAX_QUERY_TERMS} of its")


def test_1700_distinct_words_answer_on_postgresql_as_on_sqlite(notes: Path, tmp_path: Path) -> None:
    # PostgreSQL failed with "target lists can have at most 1664 entries" (one column per keyword),
    # reported as an embedding-provider error; SQLite answered.
    query = "billing ledger " + distinct_words(1700)
    answers = {}
    for kind in ("sqlite", "postgresql"):
        with store_under_test(kind) as store, opened(notes, tmp_path / kind, store) as index:
            response = index.search(SearchRequest(query))
            tool = handle_memory_search(index, {"query": query}, citations="off")
        answers[kind] = [(r.path, r.start_line, r.end_line, round(r.score, 6)) for r in response.results]
        assert response.query_cut is not None and response.query_cut.terms_searched == MAX_QUERY_TERMS
        assert "error" not in tool and tool["queryCut"]["termsSearched"] == MAX_QUERY_TERMS
    assert answers["sqlite"] and answers["sqlite"][0][0] == BILLING
    assert answers["postgresql"] == answers["sqlite"]


def test_a_single_long_word_is_answered(notes: Path, state: Path, index_store: StoreUnderTest) -> None:
    with opened(notes, state, index_store) as index:
        held = index.search(SearchRequest(LONG_WORD))
        wide = index.search(SearchRequest(WIDE_WORD))  # PostgreSQL refused both its sync and its query
        huge = index.search(SearchRequest("k" * 40_000))  # 21 s of backtracking in the keyword parser
    assert found(held) == [KEYS] and held.query_cut is None
    assert found(wide) == [KEYS]
    assert huge.query_cut is not None
    assert (huge.query_cut.chars, huge.query_cut.chars_searched) == (40_000, MAX_QUERY_CHARS)
    assert huge.query_cut.terms == huge.query_cut.terms_searched == 1  # the cut says only what was cut
    assert "4,000 of 40,000 characters were searched" in huge.query_cut.note()


def test_a_cut_never_splits_a_word_when_the_query_has_spaces(notes: Path, state: Path) -> None:
    # The bound falls inside the long word: it is left out, and the words before it are searched.
    query = "billing cutover " + "x" * 40_000
    with opened(notes, state, SQLITE) as index:
        response = index.search(SearchRequest(query))
    assert found(response)[0] == BILLING
    assert response.query_cut is not None and response.query_cut.chars_searched == len("billing cutover")


def test_a_short_query_is_searched_whole_and_says_nothing(notes: Path, state: Path) -> None:
    with opened(notes, state, SQLITE) as index:
        response = index.search(SearchRequest("billing cutover " + distinct_words(MAX_QUERY_TERMS - 2)))
        payload = handle_memory_search(index, {"query": "billing cutover"}, citations="off")
    assert response.query_cut is None
    assert found(response)[0] == BILLING
    assert "queryCut" not in payload


def test_the_tool_result_says_what_was_cut_and_is_no_error(notes: Path, state: Path) -> None:
    with opened(notes, state, SQLITE) as index:
        payload = handle_memory_search(index, {"query": megabyte_query()}, citations="off")
    assert "error" not in payload and "disabled" not in payload
    assert payload["results"][0]["path"] == BILLING
    cut = payload["queryCut"]
    assert cut["chars"] == 1_000_000 and cut["charsSearched"] <= MAX_QUERY_CHARS
    assert cut["termsSearched"] == MAX_QUERY_TERMS < cut["terms"]
    assert cut["note"].startswith("The query was cut:")


class RecordingModel:
    """The real local model; what each query asked it to embed is kept."""

    def __init__(self, model: Path) -> None:
        from sessionmem.memory.embed.local_gguf import LocalEmbedder

        self.inner = LocalEmbedder(str(model))
        self.queries: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def embed_query(self, text: str) -> np.ndarray:
        self.queries.append(text)
        return self.inner.embed_query(text)


def test_the_embedding_model_reads_only_the_bounded_query(notes: Path, state: Path, gguf_model: Path) -> None:
    model = RecordingModel(gguf_model)
    with opened(notes, state, SQLITE, model) as index:
        response = index.search(SearchRequest(megabyte_query()))
    assert response.mode == "hybrid" and BILLING in found(response)
    assert len(model.queries) == 1 and len(model.queries[0]) <= MAX_QUERY_CHARS
    assert model.queries[0].startswith("billing cutover zq00000")
