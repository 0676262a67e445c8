"""PostgreSQL's keyword ranks are SQLite's FTS5 ranks, also when a query mixes a common word with rare
ones (the PostgreSQL store then ranks the chunks holding the rare ones first, ``pg_keywords._loose``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sessionmem.config import MemorySearchConfig
from sessionmem.memory.index import MemoryIndex
from sessionmem.memory.keywords import fts_phrases
from sessionmem.memory.store import KeywordFilters

from .stores import open_store, store_under_test


def _workspace(root: Path) -> Path:
    """60 notes, each a line of its own: "harbor" in 50 (once or twice, lines of several lengths), "zinnia"
    in 8, "quokka" in 2, "vellum fjord" together in 3."""
    lines = []
    for i in range(60):
        words = [f"filler{i % 7}"] * (3 + i % 5)
        if i < 50:
            words += ["harbor"] * (1 + i % 2)
        if i % 7 == 0:
            words.append("zinnia")
        if i in (3, 40):
            words.append("quokka")
        if i in (5, 6, 50):
            words += ["vellum", "fjord"]
        lines.append(f"- note {i}: " + " ".join(words))
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


@pytest.mark.parametrize(
    ("query", "limit"),
    [
        ("harbor zinnia", 3),  # enough chunks hold the rare word: only those are ranked
        ("harbor zinnia", 20),  # too few: every chunk holding "harbor" is ranked
        ("harbor quokka", 2),
        ("harbor quokka zinnia", 6),
        ("harbor vellum-fjord", 2),  # a phrase of several tokens beside the common word
        ("harbor vellum-fjord zinnia", 5),
        ("harbor", 4),
    ],
)
def test_postgresql_keyword_ranks_equal_sqlite_fts5(tmp_path: Path, query: str, limit: int) -> None:
    ws = _workspace(tmp_path / "ws")
    settings = MemorySearchConfig.model_validate({"chunking": {"tokens": 32, "overlap": 0}})
    found = {}
    for kind in ("sqlite", "postgresql"):
        with store_under_test(kind) as store:
            index = MemoryIndex.open("main", ws, store.settings(settings), state_dir=tmp_path / kind)
            try:
                index.sync()
                found[kind] = _ranks(index, query, limit)
            finally:
                index.close()
    assert len(found["sqlite"]) == min(limit, len(found["sqlite"])) and found["sqlite"]
    assert found["postgresql"] == found["sqlite"]


def test_ranks_stay_equal_after_notes_change_and_on_an_index_made_before_token_counts(
    tmp_path: Path,
) -> None:
    """Token counts follow edits and deletions, and an index made without the counts table gets one."""
    ws = _workspace(tmp_path / "ws")
    settings = MemorySearchConfig.model_validate({"chunking": {"tokens": 32, "overlap": 0}})
    queries = [("harbor zinnia", 3), ("harbor quokka", 2), ("harbor vellum-fjord zinnia", 5)]
    with store_under_test("postgresql") as pg:
        pg_index = MemoryIndex.open("main", ws, pg.settings(settings), state_dir=tmp_path / "pg")
        sqlite_index = MemoryIndex.open("main", ws, settings, state_dir=tmp_path / "sqlite")
        try:
            pg_index.sync()
            notes = ws / "memory" / "notes.md"
            lines = notes.read_text().splitlines()
            notes.write_text("\n".join(line.replace("harbor", "") for line in lines[:30]) + "\n")
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
