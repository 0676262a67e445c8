"""Keyword search in the PostgreSQL index store: FTS5's BM25 over tsvectors of FTS5's tokens.

``pg_store.PgStore`` keeps each chunk's tokens (``fts_tokens``) in ``chunks_fts``; this ranks the chunks
matching a query's phrases as FTS5's ``bm25()`` does (k1 1.2, b 0.75, the same IDF and document
lengths), so both stores return the same chunks in the same order (``bench/bench_recall.py --store``).

The keyword matrix (``keyword_postings``) serves a large index here too.
Trigger: ``chunks_fts`` holds at least :data:`MATRIX_MIN_ROWS` rows.
Why: the keyword statement scores every row holding a query's words; a word held by thousands of rows
cost 25-50 ms a search at 100k chunks on a loaded 2-core host.
Outcome: the postings of the words held by :data:`HELD_SHARE` of the rows (0.2%) are read once in
the background on a second connection (:func:`read_pg_postings`) and scored in numpy; the statement
ranks only the query's other phrases (rare words, phrases of several tokens), whose ranks are their
share of the full BM25: the result is the statement's (the same rows, order and scores). After a
write, by this host or another, the search reads the changed chunks' keyword rows from the change log
(``pg_changes``) and the matrix applies them (``PostingsState.changed``) rather than loading again: it
stays current.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from sessionmem.memory.store.fts_tokens import phrase_count, quote_lexeme, tsquery_literal
from sessionmem.memory.store.fts_view import BM25_B, BM25_K1, bm25_idf
from sessionmem.memory.store.keyword_postings import KeywordMatrix, PostingsState, RowIndex, row_norms
from sessionmem.memory.store.pg_changes import keyword_totals
from sessionmem.memory.store.seam import KeywordChanges, KeywordFilters
from sessionmem.memory.store.sqlite_keywords import KeywordIndex, bound, split_common

if TYPE_CHECKING:
    from sessionmem.memory.store.fts_tokens import Tokenizer

# Keyword rows from which the keyword matrix serves (``keyword_postings``): at 100k chunks the statement
# took 25-50 ms for a common word (bench_pg_hosts_search.py).
MATRIX_MIN_ROWS = 50_000
# Words held by this share of the rows keep their postings: the statement then ranks only words of fewer
# rows (200 at 100k: ~2 ms). The bench's 100k chunks: 3,571 words, 48 MB with the row index, loaded in
# 7 s (the statement answers meanwhile); about ten times that at 1M (not measured).
HELD_SHARE = 0.002
CHANGES_AT_LEAST = 1024  # changed chunks the matrix always applies; more than this and an eighth: a load
_LOAD_BATCH = 8192

# ts_rank(weights {1,1,1,1}, doc, one lexeme) is H2(tf) / (pi^2 / 6), H2(n) = sum of 1/k^2 for k <= n
# (PostgreSQL's calc_rank_or with equal weights; a tsvector keeps at most 256 positions per lexeme).
# ``width_bucket`` over the midpoints between those values turns a rank back into tf, in SQL.
_RANK_OF_TF = [sum(1.0 / (k * k) for k in range(1, n + 1)) / 1.64493406685 for n in range(257)]
_MAX_SUBSETS = 8  # common phrases at most whose sets ``_common_match`` weighs one by one
_TF_THRESHOLDS = [(a + b) / 2 for a, b in itertools.pairwise(_RANK_OF_TF)]
# A phrase's count in a chunk, in SQL (one %s: its lexeme). The thresholds are a constant of the
# statement, not a parameter: sent and converted as an array of 256 floats per phrase, they cost more
# than the ranking they feed (5 ms a search on a loaded host).
_TF_SQL = (
    "width_bucket(ts_rank('{1,1,1,1}', f.fts, %s::tsquery)::float8, '{"
    + ",".join(repr(t) for t in _TF_THRESHOLDS)
    + "}'::float8[])"
)


def _common_match(
    tokens: Sequence[Sequence[str]], common: Sequence[int], idfs: Sequence[float], floor: float | None
) -> str:
    """The tsquery of the chunks holding only common phrases that may score ``floor`` (None: any
    score): each holding a set of them whose bound, (k1 + 1) times their IDFs, reaches it ('' none)."""
    minimal: list[tuple[int, ...]] = []
    if floor is None or len(common) > _MAX_SUBSETS:
        if floor is None or bound(common, idfs) >= floor:
            minimal = [(i,) for i in common]  # single phrases: none holds another
    else:  # at most 2^_MAX_SUBSETS sets, compared pairwise: bounded whatever the query
        sets = [
            subset
            for n in range(1, len(common) + 1)
            for subset in itertools.combinations(common, n)
            if bound(subset, idfs) >= floor
        ]
        minimal = [s for s in sets if not any(set(o) < set(s) for o in sets)]
    return " | ".join("(" + " & ".join(quote_lexeme(tokens[i][0]) for i in s) + ")" for s in minimal)


def _best(ranked: dict[int, float], limit: int) -> dict[int, float]:
    """The best ``limit`` of {rowid: rank}, best (lowest rank, then lowest rowid) first."""
    best = sorted((rank, rowid) for rowid, rank in ranked.items())[:limit]
    return {rowid: rank for rank, rowid in best}


def _filter_sql(filters: KeywordFilters) -> tuple[str, list[Any]]:
    """The join, WHERE conditions (on ``chunks c``) and parameters of ``filters`` for a query on
    ``chunks_fts f`` (no join when nothing is filtered)."""
    sql = ""
    params: list[Any] = []
    if filters.model is not None:
        sql += " AND c.model = %s"
        params.append(filters.model)
    if filters.sources:
        sql += " AND c.source = ANY(%s)"
        params.append(list(filters.sources))
    if filters.dates is not None:
        sql += " AND c.date IS NOT NULL AND c.date >= %s AND c.date <= %s"
        params += list(filters.dates)
    if filters.audiences:  # empty or None: no filter (``KeywordFilters``)
        sql += " AND c.audience = ANY(%s)"
        params.append(list(filters.audiences))
    return (" JOIN chunks c ON c.rowid = f.rowid" + sql if sql else ""), params


class PgKeywordIndex(KeywordIndex):
    """Keyword search on the tsvector column, ranked with FTS5's BM25 (see the module docstring)."""

    def __init__(
        self,
        conn: Any,
        tokenizer: Tokenizer,
        *,
        token: Callable[[], object] | None = None,
        changes: Callable[[object, int], KeywordChanges | None] | None = None,
        opener: Callable[[], Any] | None = None,
    ) -> None:
        """``conn``: the store's psycopg connection (``%s`` parameters); ``tokenizer``: its FTS5 tokens;
        ``token``, ``changes`` and ``opener`` (the store's write token, keyword changes since a token,
        and a second store): the keyword matrix of a large index (none without them)."""
        super().__init__(conn, opener=opener if token is not None and changes is not None else None)
        self._tokenizer = tokenizer
        self._token = token
        self._changes = changes
        self._stats: tuple[int, float] | None = None  # rows, average length; until the next write

    def forget(self) -> None:
        super().forget()
        self._stats = None

    def _min_rows(self) -> int:
        return MATRIX_MIN_ROWS

    def _totals(self) -> tuple[int, float]:
        return self._rows_and_length()

    def _new_matrix(self, opener: Callable[[], Any]) -> KeywordMatrix:
        assert self._token is not None
        return KeywordMatrix(self._token, opener, read=read_pg_postings, update=self._updated)

    def _updated(self, state: PostingsState) -> PostingsState | None:
        """``state`` with the chunks changed since its token applied (None: too many, or the log does
        not reach back: a load reads every row)."""
        assert self._changes is not None
        changes = self._changes(state.token, max(CHANGES_AT_LEAST, state.rows // 8))
        return state.changed(changes) if changes is not None else None

    def _postings(self) -> PostingsState | None:
        """The keyword matrix's state, made current for this snapshot when it was loaded (else when the
        index is large, a load starts); its totals are then the statement's (no round trip for them)."""
        matrix = self.matrix()
        if matrix is None or not (matrix.loaded or self._large()):
            return None
        state = matrix.current()
        if state is not None and self._stats is None:
            self._stats = state.rows, state.avg
        return state

    def tokenizer(self) -> Tokenizer:
        return self._tokenizer  # the store's: the one its rows' tokens were made with

    def count_hits(self, phrase: str) -> int:
        query = tsquery_literal(self.phrase_tokens([phrase]))
        if not query:
            return 0
        (count,) = self._conn.execute(
            "SELECT count(*) FROM chunks_fts WHERE fts @@ %s::tsquery", (query,)
        ).fetchone()
        return int(count)

    def _rows_and_length(self) -> tuple[int, float]:
        if self._stats is None:
            rows, total = keyword_totals(self._conn)  # kept by triggers: no count of 100k rows per write
            self._stats = int(rows), (float(total) / int(rows)) if rows else 0.0
        return self._stats

    def search(self, phrases: Sequence[str], filters: KeywordFilters, limit: int) -> dict[int, float]:
        """FTS5's BM25 over the chunks matching any phrase, best ``limit`` first.

        The server ranks by the one-token phrases: a lexeme's count in a chunk is read from ``ts_rank``
        (``_TF_THRESHOLDS``; no lexeme list is expanded), the BM25 sum is computed in SQL and only the
        best ``limit`` rows come back. A phrase of several tokens (an identifier, CJK) is counted from
        its lexemes' positions, read only for the chunks holding such a phrase, and those chunks are
        ranked with both parts. The result is exact: a chunk holding no such phrase scores its
        one-token part, which no chunk outside the server's best ``limit`` exceeds.

        A query whose one-token phrases are held by many chunks is ranked in two steps (MaxScore):
        first the chunks holding its rarest ones (``split_common``), with every phrase scored; then, of the
        chunks holding only its common ones, those holding a set of them whose BM25 bound ((k1 + 1)
        times their IDFs: "on", in two thirds of the chunks, bounds at 2e-6) reaches the ``limit``-th
        score found first: none when it is above every such bound, all when fewer were found."""
        tokens = self.phrase_tokens(phrases)
        query = tsquery_literal(tokens)
        if not query or limit <= 0:
            return {}
        if (state := self._postings()) is not None:
            found = self._search_held(state, tokens, phrases, filters, limit)
            if found is not None:
                return found
        rows_total, avg = self._rows_and_length()
        self._count_missing(phrases)
        hits = [self.hits(p) for p in phrases]
        idfs = [bm25_idf(rows_total, n) for n in hits]
        singles = [i for i, t in enumerate(tokens) if len(t) == 1]
        multis = [i for i, t in enumerate(tokens) if len(t) > 1]
        rare, common = split_common(singles, hits)
        if not common:
            return _best(self._ranked(tokens, singles, multis, idfs, avg, query, filters, limit), limit)
        match = tsquery_literal([tokens[i] for i in rare])
        ranked = self._ranked(tokens, singles, multis, idfs, avg, match, filters, limit, always=True)
        best = _best(ranked, limit)
        floor = -list(best.values())[-1] if len(best) == limit else None
        wider = _common_match(tokens, common, idfs, floor)
        if wider:
            for rowid, rank in self._ranked(tokens, singles, [], idfs, avg, wider, filters, limit).items():
                ranked.setdefault(rowid, rank)  # a chunk ranked first has its longer phrases' part too
        return _best(ranked, limit)

    def _search_held(
        self,
        state: PostingsState,
        tokens: list[list[str]],
        phrases: Sequence[str],
        filters: KeywordFilters,
        limit: int,
    ) -> dict[int, float] | None:
        """The one-token phrases whose word the keyword matrix holds scored from its postings, the
        statement ranking every row of the other phrases (their share of the full BM25); None when no
        phrase's word is held."""
        held = [i for i, t in enumerate(tokens) if len(t) == 1 and state.holds(t[0])]
        if not held:
            return None
        for i in held:  # its count is its postings' (the ideal score asks for it next)
            if not self.cached(phrases[i]):
                self.remember(phrases[i], state.held_by(tokens[i][0]))
        others = [i for i, t in enumerate(tokens) if t and i not in held]
        found: dict[int, float] = {}
        if others:
            rows_total, avg = self._rows_and_length()
            self._count_missing([phrases[i] for i in others])
            idfs = [bm25_idf(rows_total, self.hits(p)) if i in others else 0.0 for i, p in enumerate(phrases)]
            singles = [i for i in others if len(tokens[i]) == 1]
            multis = [i for i in others if len(tokens[i]) > 1]
            match = tsquery_literal([tokens[i] for i in others])
            found = self._ranked(tokens, singles, multis, idfs, avg, match, filters, None)
        return state.top([tokens[i][0] for i in held], list(found.items()), filters, limit)

    def _count_missing(self, phrases: Sequence[str]) -> None:
        """Count the chunks holding each phrase not yet counted: a one-token phrase's count is read from
        ``chunks_fts_df`` (the store keeps it with every write), all in one statement; a longer
        phrase's is counted on its matches (``count_hits``)."""
        missing = [p for p in dict.fromkeys(phrases) if not self.cached(p)]
        singles = {p: t[0] for p, t in zip(missing, self.phrase_tokens(missing), strict=True) if len(t) == 1}
        if not singles:
            return
        rows = self._conn.execute(
            "SELECT lexeme, df FROM chunks_fts_df WHERE lexeme = ANY(%s)", (list(set(singles.values())),)
        )
        df = {str(lexeme): int(n) for lexeme, n in rows}
        for phrase, token in singles.items():
            self.remember(phrase, df.get(token, 0))

    def _ranked(
        self,
        tokens: list[list[str]],
        singles: list[int],
        multis: list[int],
        idfs: list[float],
        avg: float,
        match: str,
        filters: KeywordFilters,
        limit: int | None,
        *,
        always: bool = False,
    ) -> dict[int, float]:
        """{rowid: rank} of the best ``limit`` (None: every) chunks matching ``match`` by the one-token
        part of ``singles``, and of every chunk holding a phrase of ``multis`` (when ``always`` or any
        chunk matched) by both."""
        join, join_params = _filter_sql(filters)
        # -(sum over one-token phrases of idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avg)))
        norm = "%s * (1 - %s + %s * s.fts_len / %s)"
        terms = [f"%s * t{i} * %s / (t{i} + {norm})" for i in singles]
        part = f"-({' + '.join(terms)})" if terms else "0.0"
        tf_cols = "".join(f", {_TF_SQL} AS t{i}" for i in singles)
        tf_params: list[Any] = [quote_lexeme(tokens[i][0]) for i in singles]
        part_params: list[Any] = [
            v for i in singles for v in (idfs[i], BM25_K1 + 1, BM25_K1, BM25_B, BM25_B, avg or 1.0)
        ]
        ranked: dict[int, float] = {}
        if match:
            inner = f"SELECT f.rowid, f.fts_len{tf_cols} FROM chunks_fts f{join} WHERE f.fts @@ %s::tsquery"
            sql = f"SELECT s.rowid, {part} AS rank FROM ({inner}) s ORDER BY rank, s.rowid LIMIT %s"
            params = [*part_params, *tf_params, *join_params, match, limit]
            ranked = {int(r[0]): float(r[1]) for r in self._conn.execute(sql, params)}
        if multis and (ranked or always):
            ranked.update(
                self._with_phrases(
                    tokens, (singles, multis), idfs, avg, (part, part_params, tf_params), filters
                )
            )
        return ranked

    def _with_phrases(
        self,
        tokens: list[list[str]],
        split: tuple[list[int], list[int]],
        idfs: list[float],
        avg: float,
        one_token: tuple[str, list[Any], list[Any]],
        filters: KeywordFilters,
    ) -> dict[int, float]:
        """{rowid: whole rank} of the chunks holding a phrase of several tokens (``split``: the one-token
        and the longer phrases ranked): the one-token part from the server (``one_token``: its SQL, its
        parameters, the lexemes whose counts it reads), each such phrase's count from its lexemes'
        positions."""
        singles, multis = split
        part, part_params, tf_params = one_token
        join, join_params = _filter_sql(filters)
        lexemes = sorted({t for i in multis for t in tokens[i]})
        tf_cols = "".join(f", {_TF_SQL} AS t{i}" for i in singles)
        inner = (
            f"SELECT f.rowid, f.fts_len, f.fts{tf_cols} FROM chunks_fts f{join} WHERE f.fts @@ %s::tsquery"
        )
        sql = (
            f"SELECT s.rowid, s.fts_len, {part}, u.lexeme, u.positions FROM ({inner}) s"
            " CROSS JOIN LATERAL unnest(s.fts) u WHERE u.lexeme = ANY(%s)"
        )
        multi_query = tsquery_literal([tokens[i] for i in multis])
        params = [*part_params, *tf_params, *join_params, multi_query, lexemes]
        found: dict[int, tuple[int, float, dict[str, list[int]]]] = {}
        for rowid, length, rank, lexeme, positions in self._conn.execute(sql, params):
            found.setdefault(int(rowid), (int(length), float(rank), {}))[2][lexeme] = positions or []
        out = {}
        for rowid, (length, rank, positions) in found.items():
            norm = BM25_K1 * (1 - BM25_B + BM25_B * (length / avg if avg else 1.0))
            score = -rank
            for i in multis:
                tf = phrase_count(tokens[i], positions)
                if tf:
                    score += idfs[i] * tf * (BM25_K1 + 1) / (tf + norm)
            out[rowid] = -score
        return out

    def holders(self, phrases: Sequence[str]) -> dict[str, list[int]]:
        """Every chunk holding each phrase, in one statement: the chunks matching any of them, each with
        which it matches (what a search per phrase, as deep as its count, returned)."""
        wanted = list(dict.fromkeys(phrases))
        queries = [tsquery_literal([t]) if t else "" for t in self.phrase_tokens(wanted)]
        out: dict[str, list[int]] = {p: [] for p in wanted}
        asked = [(p, q) for p, q in zip(wanted, queries, strict=True) if q]
        if not asked:
            return out
        flags = "".join(", f.fts @@ %s::tsquery" for _ in asked)
        sql = f"SELECT f.rowid{flags} FROM chunks_fts f WHERE f.fts @@ %s::tsquery"
        params = [q for _, q in asked] + [" | ".join(f"({q})" for _, q in asked)]
        for row in self._conn.execute(sql, params):
            for (phrase, _), held in zip(asked, row[1:], strict=True):
                if held:
                    out[phrase].append(int(row[0]))
        return out

    def texts(self, rowids: Iterable[int]) -> dict[int, str]:
        wanted = list(rowids)
        if not wanted:
            return {}
        rows = self._conn.execute("SELECT rowid, indexed FROM chunks WHERE rowid = ANY(%s)", (wanted,))
        return {int(r[0]): str(r[1] or "") for r in rows}


def read_pg_postings(store: Any, token: object, *, share: float | None = None) -> PostingsState:
    """A ``PostingsState`` of every keyword row, read through ``store`` (a second ``PgStore``) in one
    snapshot, current for that snapshot's write token (``token``, asked before, may be older): the words
    held by ``share`` of the rows (None: :data:`HELD_SHARE`), each row's length, filter columns and
    chunk id."""
    with store.snapshot():
        token = store.write_token()
        conn = store.conn
        rows, total = keyword_totals(conn)
        avg = total / rows if rows else 0.0
        (top,) = conn.execute("SELECT coalesce(max(rowid), 0) FROM chunks_fts").fetchone()
        size = int(top) + 1
        length = np.zeros(size, dtype=np.float64)
        models, sources, audiences = (np.full(size, -1, dtype=np.int32) for _ in range(3))
        dates = np.full(size, b"", dtype="S10")
        names: dict[str, int] = {}
        ids: dict[str, int] = {}
        for batch in store.batches(
            "SELECT k.rowid, c.id, k.fts_len, c.model, c.source, c.audience, c.date"
            " FROM chunks_fts k JOIN chunks c ON c.rowid = k.rowid",
            (),
            _LOAD_BATCH,
        ):
            at = np.fromiter((r[0] for r in batch), dtype=np.int64, count=len(batch))
            ids.update((r[1], int(r[0])) for r in batch)
            length[at] = [r[2] for r in batch]
            models[at] = [names.setdefault(r[3], len(names)) for r in batch]
            sources[at] = [names.setdefault(r[4], len(names)) for r in batch]
            audiences[at] = [names.setdefault(r[5], len(names)) for r in batch]
            dates[at] = [(r[6] or "").encode() for r in batch]
        least = (HELD_SHARE if share is None else share) * rows
        held = [str(r[0]) for r in conn.execute("SELECT lexeme FROM chunks_fts_df WHERE df >= %s", (least,))]
        words = {}
        found = conn.execute(  # in scan order, sorted here: ORDER BY in the aggregates doubled the read
            "SELECT u.lexeme, string_agg(k.rowid::text, ' '), string_agg(cardinality(u.positions)::text, ' ')"
            " FROM chunks_fts k CROSS JOIN LATERAL unnest(k.fts) u"
            " WHERE u.lexeme = ANY(%s) GROUP BY u.lexeme",
            (held,),
        )
        row_type = np.int32 if size < 2**31 else np.int64
        for lexeme, joined_docs, joined_counts in found:
            docs = np.array(str(joined_docs).split(), dtype=np.int64).astype(row_type)
            counts = np.array(str(joined_counts).split(), dtype=np.uint16)
            if len(docs) > 1 and np.any(np.diff(docs) < 0):
                order = np.argsort(docs, kind="stable")
                docs, counts = docs[order], counts[order]
            words[str(lexeme)] = docs, counts
    return PostingsState(
        token, rows, avg, row_norms(length, avg), length, words, models, sources, audiences, dates, names,
        RowIndex(ids, words, size),
    )  # fmt: skip
