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

A query whose words are held by many chunks is ranked in two steps (MaxScore). FTS5's ``bm25()``
scores every row its MATCH finds and, for each phrase, counts the rows holding it (its IDF) on every
query: "one", in two thirds of 1M chunks, took 971 ms alone. So a query whose one-token phrases hold
many chunks (``common_split``) is ranked as follows, with the same result as FTS5 ranking all of it
(the same rows, scores equal to 1e-9):

1. FTS5 ranks the chunks holding a rare phrase (or one of several tokens) by those phrases alone: its
   IDFs are the whole table's, so that is exactly their share of the full BM25.
2. In that order, the common phrases' share is added to each chunk holding one (their counts in its
   indexed text, read by the table's tokenizer, ``TermCounts``; its length as FTS5 recorded it;
   ``bm25_part``), until the next chunk's rare share plus the common phrases' bound (``bound``) falls
   under the ``limit``-th score.
3. The chunks holding only common phrases are ranked (FTS5, ``NOT`` the rare ones) only when the
   common phrases' bound reaches that score, or fewer than ``limit`` chunks were found.
"""

from __future__ import annotations

import heapq
import itertools
import re
import threading
from collections.abc import Callable, Generator, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

from sessionmem.errors import MemoryIndexError
from sessionmem.memory.store.database import sqlite_module, write_token
from sessionmem.memory.store.fts_tokens import Tokenizer, phrase_text
from sessionmem.memory.store.fts_view import BM25_B, BM25_K1, bm25_idf, fts_totals, varints
from sessionmem.memory.store.seam import KeywordFilters

if TYPE_CHECKING:
    from sessionmem.memory.store.keyword_postings import KeywordMatrix, PostingsState


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


Ranks: TypeAlias = Generator[tuple[int, float], None, None]


def match_expression(phrases: Sequence[str]) -> str:
    return " OR ".join(phrases)


class KeywordIndex:
    """Reads of ``chunks_fts`` for one query at a time; ``forget()`` after every index write.

    ``opener`` (a second connection to the same database): a large index ranks its common words from
    postings held in memory (``keyword_postings``), loaded through it in the background; without it,
    or below ``matrix_min_rows`` (None: ``MATRIX_MIN_ROWS``), FTS5 ranks everything."""

    def __init__(
        self, conn: Any, *, opener: Callable[[], Any] | None = None, matrix_min_rows: int | None = None
    ) -> None:
        self._conn = conn
        self._opener = opener
        self._matrix_min_rows = matrix_min_rows
        self._matrix: KeywordMatrix | None = None
        self._hits: dict[str, int] = {}  # phrase -> chunks holding it, until the next write
        self._phrase_tokens_read: dict[str, list[str]] = {}  # phrase -> its FTS5 tokens
        self._fts_tokenizer: Tokenizer | None = None
        self._fts_spec: str | None = None
        self._term_counts: TermCounts | None = None
        self._totals_read: tuple[int, float] | None = None  # FTS5's rows and average length, until a write

    def forget(self) -> None:
        self._hits.clear()
        self._totals_read = None
        if self._matrix is not None:
            self._matrix.forget()

    def matrix(self) -> KeywordMatrix | None:
        """The keyword matrix of this connection (None: no second connection to load it through)."""
        if self._matrix is None and self._opener is not None:
            self._matrix = self._new_matrix(self._opener)
        return self._matrix

    def _new_matrix(self, opener: Callable[[], Any]) -> KeywordMatrix:
        """A keyword matrix for this connection, loaded through ``opener``'s connections."""
        from sessionmem.memory.store.keyword_postings import KeywordMatrix

        conn = self._conn
        return KeywordMatrix(lambda: write_token(conn), opener)

    def _min_rows(self) -> int:
        """The rows from which the keyword matrix serves."""
        return MATRIX_MIN_ROWS if self._matrix_min_rows is None else self._matrix_min_rows

    def warm(self) -> None:
        """Load the keyword matrix of a large index now, rather than in the background after a search."""
        if self._large():
            matrix = self.matrix()
            if matrix is not None and matrix.current() is None:
                matrix.wait()

    def _large(self) -> bool:
        return self._opener is not None and self._totals()[0] >= self._min_rows()

    def _postings(self) -> PostingsState | None:
        """The keyword matrix's state when the index is large, and it is loaded and current (else a
        load may start)."""
        if not self._large():
            return None
        matrix = self.matrix()
        return matrix.current() if matrix is not None else None

    def search(self, phrases: Sequence[str], filters: KeywordFilters, limit: int) -> dict[int, float]:
        """{rowid: bm25 rank} of the best ``limit`` chunks holding any phrase, best first; from the
        keyword matrix when it holds a phrase's word, else in two steps when its words are held by many
        chunks (module docstring), with the same result."""
        if limit > 0 and phrases and (state := self._postings()) is not None:
            found = self._search_postings(state, phrases, filters, limit)
            if found is not None:
                return found
        if limit > 0 and len(phrases) > 1:
            hits = [self.hits(p) for p in phrases]
            singles = [i for i, p in enumerate(phrases) if len(self._phrase_tokens(p)) == 1]
            rows_total, avg = self._totals()
            rare, common = common_split(len(phrases), singles, hits, rows_total)
            if common:
                idfs = [bm25_idf(rows_total, n) for n in hits]
                return ranked_in_two_steps(
                    self._conn,
                    lambda match, n: self._ranks(match, filters, n),
                    self._counter(),
                    phrases,
                    (rare, common),
                    [self._phrase_tokens(phrases[i])[0] for i in common],
                    idfs,
                    avg,
                    limit,
                )
        return dict(self._ranks(match_expression(phrases), filters, limit))

    def _search_postings(
        self, state: PostingsState, phrases: Sequence[str], filters: KeywordFilters, limit: int
    ) -> dict[int, float] | None:
        """The held words' phrases scored from their postings, FTS5 ranking every row of the others
        (their bm25() is their share of the full BM25); None when no phrase's word is held."""
        tokens = [self._phrase_tokens(p) for p in phrases]
        held = [i for i, t in enumerate(tokens) if len(t) == 1 and state.holds(t[0])]
        if not held:
            return None
        others = [p for i, p in enumerate(phrases) if i not in held]
        found = list(self._ranks(match_expression(others), filters, -1)) if others else []
        return state.top([tokens[i][0] for i in held], found, filters, limit)

    def _counter(self) -> TermCounts:
        if self._term_counts is None:
            self._term_counts = TermCounts(self._spec())
        return self._term_counts

    def _spec(self) -> str:
        if self._fts_spec is None:
            self._fts_spec = table_tokenizer(self._conn)
        return self._fts_spec

    def tokenizer(self) -> Tokenizer:
        """The index's own tokenizer (its FTS5 table's, in a private in-memory database)."""
        if self._fts_tokenizer is None:
            self._fts_tokenizer = Tokenizer(self._spec())
        return self._fts_tokenizer

    def _phrase_tokens(self, phrase: str) -> list[str]:
        return self.phrase_tokens([phrase])[0]

    def phrase_tokens(self, phrases: Sequence[str]) -> list[list[str]]:
        """Each phrase's FTS5 tokens, those not yet known read in one call (cached, up to
        ``_PHRASES_KEPT`` phrases: a search asks for them several times, ~0.5 ms a call)."""
        known = self._phrase_tokens_read
        missing = [p for p in dict.fromkeys(phrases) if p not in known]
        if missing:
            if len(known) > _PHRASES_KEPT:
                known.clear()
            read = self.tokenizer().tokens([phrase_text(p) for p in missing])
            known.update(zip(missing, read, strict=True))
        return [known[p] for p in phrases]

    def _totals(self) -> tuple[int, float]:
        if self._totals_read is None:
            self._totals_read = fts_totals(self._conn)
        return self._totals_read

    def _ranks(
        self, match: str, filters: KeywordFilters, limit: int
    ) -> Generator[tuple[int, float], None, None]:
        """(rowid, bm25 rank) of the rows matching ``match`` under ``filters``, best first (read as
        they are taken: the two-step search stops early)."""
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
            rows = self._conn.execute(sql, (match, *params, limit))
        except Exception as exc:  # quoting makes this unreachable; a message beats a crash
            raise MemoryIndexError(f"keyword search failed for {match!r}: {exc}") from exc
        return ((int(r[0]), float(r[1])) for r in rows)

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

    def holders(self, phrases: Sequence[str]) -> dict[str, list[int]]:
        """The rowids of every chunk holding each phrase: its search, as deep as its count of chunks."""
        out: dict[str, list[int]] = {}
        for phrase in dict.fromkeys(phrases):
            count = self.hits(phrase)
            out[phrase] = list(self.search([phrase], KeywordFilters(), count)) if count else []
        return out

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
        state = self._postings()
        if state is not None:  # a held word's count is its postings' (count(*) reads ~100k rows at 1M)
            tokens = self._phrase_tokens(phrase)
            if len(tokens) == 1 and state.holds(tokens[0]):
                return state.held_by(tokens[0])
        (count,) = self._conn.execute(
            "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?", (phrase,)
        ).fetchone()
        return int(count)


# FTS5 rows from which the common words' postings are held in memory (``keyword_postings``): below,
# FTS5 ranks a query of common words in ~15 ms.
MATRIX_MIN_ROWS = 200_000
_PHRASES_KEPT = 10_000  # phrases whose tokens a keyword index keeps (then it starts again)
SPLIT_HITS = 2000  # chunks holding a query's one-token phrases, above which it ranks in two steps


def split_common(singles: Sequence[int], hits: Sequence[int]) -> tuple[list[int], list[int]]:
    """(rare, common) one-token phrases (indexes): the rarest while they hold at most half the chunks
    the phrases hold between them; nothing is common when they hold few (``SPLIT_HITS``)."""
    total = sum(hits[i] for i in singles)
    if len(singles) < 2 or total <= SPLIT_HITS:
        return list(singles), []
    order = sorted(singles, key=lambda i: (hits[i], i))
    rare, held = [order[0]], hits[order[0]]
    for i in order[1:-1]:
        if held + hits[i] > total / 2:
            break
        rare.append(i)
        held += hits[i]
    return rare, order[len(rare) :]  # rare is a prefix of order


def bound(phrases: Sequence[int], idfs: Sequence[float]) -> float:
    """More than any chunk scores from ``phrases``: tf / (tf + k1 * (...)) stays under 1."""
    return sum(idfs[i] for i in phrases) * (BM25_K1 + 1)


def bm25_part(idf: float, tf: int, length: int, avg: float) -> float:
    """One phrase's share of a chunk's BM25 (FTS5's formula; 0 when the chunk lacks it)."""
    if not tf:
        return 0.0
    norm = BM25_K1 * (1 - BM25_B + BM25_B * (length / avg if avg else 1.0))
    return idf * tf * (BM25_K1 + 1) / (tf + norm)


BATCH = 64  # chunks whose texts are read and tokenized at a time in step 2
# The share of the rows a phrase is held by, from which it is ranked in the second step: its BM25 bound is
# then at most (k1 + 1) * ln(0.7 / 0.3) = 1.9, and ~2e-6 from half the rows (FTS5 floors the IDF).
# Rarer words bound higher than the scores of most chunks: every chunk would be read in step 2.
COMMON_SHARE = 0.3
# Or held by this many times the rows the other phrases hold (``common_split``): "staging", in 11% of 1M
# chunks (IDF 2.1, bound 4.7), with a word in 0.1% (IDF 6.9).
COMMON_RATIO = 4

_TOKENIZE = re.compile(r"tokenize\s*=\s*'((?:[^']|'')*)'", re.IGNORECASE)


def table_tokenizer(conn: Any) -> str:
    """The FTS5 tokenizer spec ``chunks_fts`` was created with."""
    (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'chunks_fts'").fetchone()
    found = _TOKENIZE.search(str(sql))
    return found.group(1).replace("''", "'") if found else "unicode61"


class TermCounts:
    """How often given tokens occur in texts, as FTS5's tokenizer ``spec`` reads them (a private
    in-memory FTS5 table: the counting stays in SQLite)."""

    def __init__(self, spec: str) -> None:
        module, _ = sqlite_module()
        self._conn = module.connect(":memory:", check_same_thread=False, isolation_level=None)
        quoted = spec.replace("'", "''")
        self._conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(text, tokenize = '{quoted}')")
        self._conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
        self._lock = threading.Lock()

    def counts(self, texts: Sequence[str], terms: Sequence[str]) -> list[dict[str, int]]:
        """{term: occurrences} of ``terms`` in each text."""
        out: list[dict[str, int]] = [{} for _ in texts]
        marks = ",".join("?" * len(terms))
        with self._lock:
            self._conn.execute("BEGIN")
            try:
                self._conn.executemany("INSERT INTO t(rowid, text) VALUES (?, ?)", enumerate(texts))
                sql = f"SELECT doc, term, count(*) FROM v WHERE term IN ({marks}) GROUP BY doc, term"
                for doc, term, n in self._conn.execute(sql, list(terms)):
                    out[int(doc)][str(term)] = int(n)
            finally:
                self._conn.execute("ROLLBACK")
        return out


def common_split(
    n_phrases: int, singles: Sequence[int], hits: Sequence[int], rows: int
) -> tuple[list[int], list[int]]:
    """(first, common) phrase indexes. Common, most held first: the one-token phrases held by at least
    ``COMMON_SHARE`` of the rows, then those held by ``COMMON_RATIO`` times the rows the others hold
    whose bound with the common ones stays under the others' IDFs (a chunk holding one of those
    once, at the average length, scores its IDF: the second step then rarely runs). None (rank in one
    step) when the others would hold as many rows, or when every phrase is common."""
    idfs = [bm25_idf(rows, n) for n in hits]
    common: list[int] = []
    for i in sorted(singles, key=lambda i: (-hits[i], i)):
        others = [j for j in range(n_phrases) if j != i and j not in common]
        if not others:
            break
        if hits[i] >= COMMON_SHARE * rows or (
            hits[i] >= COMMON_RATIO * sum(hits[j] for j in others)
            and bound([*common, i], idfs) < min(idfs[j] for j in others)
        ):
            common.append(i)
    first = [i for i in range(n_phrases) if i not in common]
    if not common or not first or sum(hits[i] for i in first) >= sum(hits[i] for i in common):
        return list(range(n_phrases)), []
    return first, common


def ranked_in_two_steps(
    conn: Any,
    ranks: Callable[[str, int], Generator[tuple[int, float], None, None]],
    counter: TermCounts,
    phrases: Sequence[str],
    split: tuple[Sequence[int], Sequence[int]],
    common_tokens: Sequence[str],
    idfs: Sequence[float],
    avg: float,
    limit: int,
) -> dict[int, float]:
    """{rowid: FTS5 bm25 rank} of the best ``limit`` chunks holding any phrase (module docstring).

    ``ranks(match, limit)``: (rowid, bm25 rank) of the rows matching ``match`` under the query's
    filters, best first (limit -1: all); ``split``: the indexes of the phrases FTS5 ranks first (the
    rare one-token phrases and those of several tokens), and of the common ones, whose tokens are
    ``common_tokens``."""
    rare, common = split
    rare_match = " OR ".join(phrases[i] for i in rare)
    common_match = " OR ".join(phrases[i] for i in common)
    common_bound = bound(common, idfs)
    found = ranks(rare_match, -1)
    both = {int(r[0]) for r in conn.execute(
        "SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?", (f"({rare_match}) AND ({common_match})",)
    )}  # fmt: skip
    best: list[tuple[float, int]] = []  # heap of (score, -rowid): the worst kept first
    while batch := list(itertools.islice(found, BATCH)):
        if len(best) == limit and -batch[0][1] + common_bound < best[0][0]:
            break
        held = [rowid for rowid, _ in batch if rowid in both]
        extra = _common_share(conn, counter, held, common, common_tokens, idfs, avg)
        for rowid, rank in batch:
            _keep(best, -rank + extra.get(rowid, 0.0), rowid, limit)
    found.close()  # the rest unread: its statement is reset now
    if len(best) < limit or common_bound >= best[0][0]:
        for rowid, rank in ranks(f"({common_match}) NOT ({rare_match})", limit):
            _keep(best, -rank, rowid, limit)
    ordered = sorted(best, key=lambda item: (-item[0], -item[1]))
    return {-neg: -score for score, neg in ordered}


def _common_share(
    conn: Any,
    counter: TermCounts,
    rowids: list[int],
    common: Sequence[int],
    tokens: Sequence[str],
    idfs: Sequence[float],
    avg: float,
) -> dict[int, float]:
    """{rowid: the common phrases' BM25 share}: their counts in the row's indexed text, its length as
    FTS5 recorded it (``chunks_fts_docsize``)."""
    if not rowids:
        return {}
    marks = ",".join("?" * len(rowids))
    rows = conn.execute(
        f"SELECT f.rowid, f.text, d.sz FROM chunks_fts f JOIN chunks_fts_docsize d ON d.id = f.rowid"
        f" WHERE f.rowid IN ({marks})",
        rowids,
    ).fetchall()
    counts = counter.counts([str(r[1]) for r in rows], tokens)
    out = {}
    for (rowid, _, size), held in zip(rows, counts, strict=True):
        length = sum(varints(bytes(size)))
        out[int(rowid)] = sum(
            bm25_part(idfs[i], held.get(token, 0), length, avg)
            for i, token in zip(common, tokens, strict=True)
        )
    return out


def _keep(best: list[tuple[float, int]], score: float, rowid: int, limit: int) -> None:
    """Keep (score, rowid) among the best ``limit`` (ties: the lower rowid first)."""
    item = (score, -rowid)
    if len(best) < limit:
        heapq.heappush(best, item)
    elif item > best[0]:
        heapq.heapreplace(best, item)
