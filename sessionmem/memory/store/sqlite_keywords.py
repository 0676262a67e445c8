"""Keyword search over the FTS5 table: BM25 ranks, the query's ideal BM25, and exact-word coverage.

The query's terms (``keywords.fts_phrases``: stop words out; numbers, identifiers, dates, names in)
are matched with OR and ranked by FTS5's ``bm25()`` (k1 1.2, b 0.75: other values moved LoCoMo's R@6
by 0.003 at most, measured with a stdlib BM25 on the same chunks). A chunk holding every term ranks
first by nature, and a query whose terms are not all in one note still finds the notes holding some:
never empty when any term matches. OpenClaw's builtin search ANDs the terms, and qmd too, so "when is
the billing cutover" finds nothing there while "billing cutover" finds the note.

Everything a calibrated keyword score needs (``ranking.keyword_score``) is read here: the ranks,
the number of chunks holding each phrase (FTS5's own IDF inputs, cached until the next write), and
the indexed text of chunks, whose context and lines the exact-word coverage reads.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sessionmem.errors import MemoryIndexError
from sessionmem.memory.store.fts_view import bm25_idf
from sessionmem.memory.store.seam import KeywordFilters


def fts_sql(*, with_model: bool, n_sources: int, dated: bool, n_audiences: int = 0) -> str:
    """The keyword query (pure). Parameters: match, [model], *sources, [after, before], *audiences, limit.

    Only the rowid (a chunk's FTS row has the chunk's rowid) and the BM25 rank are selected: reading
    FTS5's UNINDEXED columns for every match costs more than ranking them (30 ms for 33k matches at
    100k chunks; the id alone 0.6-1 ms for 4-23k), so the model and source filters are added only when
    the index holds rows they would remove (``n_sources`` 0 = none).
    """
    sql = "SELECT f.rowid, bm25(chunks_fts) AS rank FROM chunks_fts f"
    if dated or n_audiences:
        sql += " JOIN chunks c ON c.rowid = f.rowid"  # the indexer gives both one rowid
    sql += " WHERE chunks_fts MATCH ?"
    if with_model:
        sql += " AND f.model = ?"
    if n_sources:
        sql += f" AND f.source IN ({','.join('?' * n_sources)})"
    if dated:
        sql += " AND c.date IS NOT NULL AND c.date >= ? AND c.date <= ?"
    if n_audiences:
        sql += f" AND c.audience IN ({','.join('?' * n_audiences)})"
    return sql + " ORDER BY rank LIMIT ?"


def match_expression(phrases: Sequence[str]) -> str:
    return " OR ".join(phrases)


class KeywordIndex:
    """Reads of ``chunks_fts`` for one query at a time; ``forget()`` after every index write."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        self._hits: dict[str, int] = {}  # phrase -> chunks holding it, until the next write

    def forget(self) -> None:
        self._hits.clear()

    def search(self, phrases: Sequence[str], filters: KeywordFilters, limit: int) -> dict[int, float]:
        """{rowid: bm25 rank} of the best ``limit`` chunks holding any phrase, best first."""
        match = match_expression(phrases)
        n_audiences = len(filters.audiences) if filters.audiences is not None else 0
        sql = fts_sql(
            with_model=filters.model is not None,
            n_sources=len(filters.sources),
            dated=filters.dates is not None,
            n_audiences=n_audiences,
        )
        params: list[Any] = [filters.model] if filters.model is not None else []
        params += filters.sources
        params += filters.dates or ()
        params += filters.audiences or ()
        try:
            rows = self._conn.execute(sql, (match, *params, limit)).fetchall()
        except Exception as exc:  # quoting makes this unreachable; a message beats a crash
            raise MemoryIndexError(f"keyword search failed for {match!r}: {exc}") from exc
        return {int(r[0]): float(r[1]) for r in rows}

    def texts(self, rowids: Iterable[int]) -> dict[int, str]:
        """The indexed text (``fts_text`` of context and lines) of each row."""
        wanted = list(rowids)
        if not wanted:
            return {}
        marks = ",".join("?" * len(wanted))
        return {int(r[0]): str(r[1]) for r in self._conn.execute(
            f"SELECT rowid, text FROM chunks_fts WHERE rowid IN ({marks})", wanted
        )}  # fmt: skip

    def ideal(self, phrases: Sequence[str], total_rows: int) -> float:
        """The BM25 of an average-length chunk holding each phrase once: the sum of their IDFs as FTS5
        computes them (``bm25_idf``)."""
        return sum(bm25_idf(total_rows, self.hits(phrase)) for phrase in phrases)

    def hits(self, phrase: str) -> int:
        """How many chunks hold ``phrase`` (cached until ``forget``)."""
        hits = self._hits.get(phrase)
        if hits is None:
            self._hits[phrase] = hits = self.count_hits(phrase)
        return hits

    def cached(self, phrase: str) -> bool:
        """Whether ``hits`` knows ``phrase``'s count without asking the database."""
        return phrase in self._hits

    def remember(self, phrase: str, hits: int) -> None:
        """``phrase``'s count, read by a subclass together with others (until ``forget``)."""
        self._hits[phrase] = hits

    def count_hits(self, phrase: str) -> int:
        (count,) = self._conn.execute(
            "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?", (phrase,)
        ).fetchone()
        return int(count)
