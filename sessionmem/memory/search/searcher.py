"""Memory search over the index: keyword (FTS5), vector, and their hybrid merge (reference §9).

The flow of one query:

1. The query is read up to its bounds (``query_bounds``: ``MAX_QUERY_CHARS`` characters, then
   ``MAX_QUERY_TERMS`` distinct keywords; ``SearchResponse.query_cut`` says what was left out).
   Empty -> no results.
2. ``candidates = min(200, max(120, maxResults * candidateMultiplier))``: one pool for every request of
   up to 30 results (at the default multiplier 4), so asking for more never loses what fewer found.
   A vector hit outside the keyword side's list has no keyword evidence (step 5), so with a pool that
   grew with ``maxResults`` a hit's score, and the order, changed with the number asked for: on
   LoCoMo the 6-result list was not the first six of the 30-result one for 7 of 47 questions.
3. Keyword search (``fts_search``): the query's terms ORed, ranked by ``bm25(chunks_fts)``, limited to
   ``candidates`` rows.
4. Hybrid: the query is embedded and the nearest ``candidates`` chunks fetched from the fastest
   valid vector path (skipped for an all-zero vector).
5. A keyword hit gets its cosine from its stored vector even when the vector side did not list it
   (LoCoMo R@6 +0.008); a vector hit outside the keyword side's list gets no keyword evidence (asking
   FTS5 for those rows' BM25 cost 2 ms at 100k chunks and changed no figure). Each figure is
   calibrated into evidence in [0, 1] (``ranking.keyword_score``; ``calibration.py`` for vectors) and
   the two are merged (``ranking.combine``).
6. Date range (else the weight of the time the query names: ``date_boost``), decay, sort, the
   ``minScore`` floor (on the calibrated, undecayed score; what falls under it is counted in
   ``SearchResponse.held_back``), MMR (greedy for the first N picks), top N.
7. Whether the top N hold the query's distinctive words (``answer_check``): when they hold only its
   topic, ``SearchResponse.not_found`` says so (the results are kept).

A date range is applied inside each search (keyword SQL, the matrix mask, the vector SQL), so
the candidates are the best ones within the range; sqlite-vec can only look 4096 neighbours deep.
So is the reader's visibility (``SearchRequest.visibility``, DESIGN decision 14): rows the reader may
not see are never candidates, so a group's results are not crowded out by private hits.

FTS-only mode (no embedder) finds every indexed chunk by keyword, whatever model indexed it
(OpenClaw #26792). ``minScore`` is not applied there unless the request sets it: a keyword score
alone says how much of the query a note holds, and a note answering in other words holds little of
it; with no vectors to find such notes, the best partial matches are the answer. Only matches under
a third of the best one are held back (``ranking.keyword_floor``): a note sharing one common word or
one CJK character pair with the query is noise beside one that holds the query.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sessionmem.clock import date_stamp, user_zone
from sessionmem.config import MemorySearchConfig
from sessionmem.errors import EmbeddingError
from sessionmem.memory.embed.embedder import Embedder
from sessionmem.memory.search import answer_check, ranking, second_stage
from sessionmem.memory.search.calibration import Calibration
from sessionmem.memory.search.calibration import load as load_calibration
from sessionmem.memory.search.date_boost import weigh_by_span
from sessionmem.memory.search.query_bounds import MAX_QUERY_TERMS, bound_query
from sessionmem.memory.search.query_dates import query_span
from sessionmem.memory.search.query_terms import fts_terms, quoted_phrases
from sessionmem.memory.search.ranking import Candidate
from sessionmem.memory.search.records import (
    HeldBack,
    NotFound,
    QueryCut,
    ScoreExplanation,
    SearchRequest,
    SearchResponse,
    SearchResult,
    VectorPath,
)
from sessionmem.memory.store.database import VectorSupport
from sessionmem.memory.store.fts_view import fts_text
from sessionmem.memory.store.index_sqlite import as_store
from sessionmem.memory.store.meta import read_meta, stored_width
from sessionmem.memory.store.seam import KeywordFilters

if TYPE_CHECKING:  # numpy and the vector paths load only when an embedder exists (FTS-only starts fast)
    import numpy as np

    from sessionmem.memory.search.vectors import VectorRouter

log = logging.getLogger(__name__)

MAX_CANDIDATES = 200
MIN_CANDIDATES = 120  # the pool of every request up to 30 results: their lists start alike
FTS_ONLY_MODEL = "fts-only"
_UNWEIGHED = second_stage.Weight()  # a keyword hit the second stage did not read


def candidate_count(max_results: int, multiplier: int) -> int:
    """The candidates each side fetches: a fixed pool up to ``MIN_CANDIDATES`` (module docstring)."""
    return min(MAX_CANDIDATES, max(MIN_CANDIDATES, int(max_results * multiplier)))


@dataclass(frozen=True, slots=True)
class _IndexShape:
    """What the keyword filters and scores need to know, valid until the next write (``token``)."""

    token: object  # the store's write token (``IndexStore.write_token``)
    total_rows: int
    sources: frozenset[str]
    audiences: frozenset[str]
    width: int | None  # of the vectors the index holds (None: none yet)
    calibration: Calibration | None


@dataclass(frozen=True, slots=True)
class _Query:
    """One query as both sides search it."""

    text: str
    terms: list[str]  # the keywords searched (at most MAX_QUERY_TERMS), [] when keyword search is off
    terms_found: int  # distinct keywords in ``text``, before the bound
    phrases: list[str]  # the terms as FTS5 phrases
    vector: Any  # the query embedding (numpy), None when vector search is off
    vector_weight: float
    text_weight: float


class Searcher:
    """Answers ``SearchRequest``s from one agent's index. ``invalidate()`` after every index write."""

    def __init__(
        self,
        conn: Any,
        embedder: Embedder | None,
        settings: MemorySearchConfig,
        vector_support: VectorSupport,
        *,
        workspace: Path | None = None,
        preload_matrix: bool = True,
    ) -> None:
        self._conn = conn = as_store(conn)
        self._embedder = embedder
        self._settings = settings
        self._workspace = workspace
        self._vectors: VectorRouter | None = None
        if embedder is not None:
            from sessionmem.memory.search.vectors import VectorRouter

            self._vectors = VectorRouter(conn, vector_support, preload=preload_matrix)
        self._keywords = conn.keywords()
        self._mtime_days: dict[str, date | None] = {}
        self._shape: _IndexShape | None = None
        self._has_fts = False
        self._scan_pool: ThreadPoolExecutor | None = None
        # (index width, query width) once a query embedding did not match the index's vectors
        self.stale_width: tuple[int, int] | None = None

    # ------------------------------------------------------------------ public

    @property
    def mode(self) -> str:
        return "hybrid" if self._embedder is not None else "fts-only"

    @property
    def model(self) -> str:
        return self._embedder.model if self._embedder is not None else FTS_ONLY_MODEL

    @property
    def vector_path(self) -> VectorPath:
        """The path the next vector query would take, and why."""
        if self._vectors is None:
            return VectorPath("none", "FTS-only mode: no embedding provider")
        return self._vectors.current_path(self.model)

    @property
    def calibration(self) -> Calibration | None:
        """How this index's vector scores are calibrated for the model in use (None: raw cosines)."""
        if self._embedder is None:
            return None
        cal = self._index_shape().calibration
        return cal if cal is not None and cal.fits(self._embedder, None) else None

    def invalidate(self) -> None:
        """The index wrote: the in-memory matrix must reload before it serves again."""
        if self._vectors is not None:
            self._vectors.invalidate()
        self._keywords.forget()
        self._mtime_days.clear()
        self._shape = None
        self.stale_width = None

    def close(self) -> None:
        """Stop the vector scan worker (idle between queries); the connection is the caller's."""
        if self._scan_pool is not None:
            self._scan_pool.shutdown(wait=True)
            self._scan_pool = None

    def _scan_worker(self) -> ThreadPoolExecutor:
        if self._scan_pool is None:
            self._scan_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memory-vector-scan")
        return self._scan_pool

    def warm(self) -> None:
        """Load the in-memory matrix now rather than on the first query."""
        if self._vectors is not None:
            self._vectors.warm(self.model)

    def warm_keywords(self) -> None:
        """Load a large index's keyword matrix now rather than in the background after a query."""
        self._keywords.warm()

    def search(self, request: SearchRequest) -> SearchResponse:
        sent = request.query.strip()
        query = bound_query(sent)  # linear: what a search reads of a query is bounded (query_bounds)
        warnings: list[str] = []
        results: list[SearchResult] = []
        held_back = not_found = None
        cut = None
        with self._conn.snapshot():  # keyword ranks and the rows they name from one state of the index
            if query:
                q = self._plan(query, warnings)
                results, held_back, not_found = self._run(request, q)
                if len(query) < len(sent) or len(q.terms) < q.terms_found:
                    cut = QueryCut(len(sent), len(query), q.terms_found, len(q.terms))
            cal = self.calibration if request.explain else None
        return SearchResponse(
            results=tuple(results),
            provider=self._embedder.provider if self._embedder is not None else "none",
            model=self.model,
            # say what answered: with stale vectors the vector half was left out
            mode="fts-only" if self.stale_width is not None else self.mode,
            warnings=tuple(warnings),
            held_back=held_back,
            calibration=cal.to_json() if cal is not None else None,
            query_cut=cut,
            not_found=not_found,
        )

    # ------------------------------------------------------------------ flow

    def _run(
        self, request: SearchRequest, q: _Query
    ) -> tuple[list[SearchResult], HeldBack | None, NotFound | None]:
        qcfg = self._settings.query
        hybrid = qcfg.hybrid
        max_results = request.max_results if request.max_results is not None else qcfg.max_results
        max_results = max(1, int(max_results))
        sources = tuple(request.sources) if request.sources else tuple(self._settings.sources)
        audiences = self._audience_filter(request)
        limit = candidate_count(max_results, hybrid.candidate_multiplier)

        vector_hits: dict[str, float] = {}
        ranks: dict[int, float] | None = None  # keyword hits: rowid -> bm25
        path_name: str | None = None
        if q.vector is not None and self._vectors is not None:  # first: it (re)loads the matrix
            path = self._vectors.prepare(self.model)
            path_name = path.name
            scan = functools.partial(
                self._vectors.serve, path, q.vector, limit, model=self.model, sources=sources,
                dates=_date_bounds(request), audiences=audiences,
            )  # fmt: skip
            if path.name == "matrix" and q.phrases:
                # Trigger: a hybrid query on the in-memory matrix. Why: the scan (numpy) and FTS5 both
                # release the GIL and the scan touches no connection; one after the other they took
                # 16 ms at 100k chunks on 2 cores, side by side 10. Outcome: the scan runs in a worker.
                pending = self._scan_worker().submit(scan)
                try:
                    ranks = self._keyword_search(q.phrases, limit, sources, request, audiences)
                finally:
                    vector_hits = dict(pending.result())
            else:
                vector_hits = dict(scan())
        if ranks is None:
            ranks = self._keyword_search(q.phrases, limit, sources, request, audiences) if q.phrases else {}
        cands = scored = self._score(q, ranks, vector_hits, from_matrix=path_name == "matrix")
        if request.after is not None or request.before is not None:
            cands = [c for c in cands if ranking.in_date_range(c.date, request.after, request.before)]
        else:
            span = query_span(q.text, request.today or _local_today())
            if span is not None:
                cands = weigh_by_span(cands, span)
        if hybrid.temporal_decay.enabled:
            cands = self._decay(cands, hybrid.temporal_decay.half_life_days)
        ranked = ranking.collapse_cross_source(ranking.sort_by_score(cands))  # /new archive vs transcript

        if q.vector is not None or request.min_score is not None:
            floor = request.min_score if request.min_score is not None else qcfg.min_score
        else:
            floor = ranking.keyword_floor(ranked)
        ranked, held = ranking.apply_floor(ranked, min_score=floor)
        held_back = HeldBack(len(held), max(c.merged for c in held), floor) if held else None
        if hybrid.mmr.enabled:
            ranked = ranking.mmr_rerank(ranked, lambda_=hybrid.mmr.lambda_, limit=max_results)
        top = ranked[:max_results]
        # step 7: do the results hold what was asked, or only its topic? (answer_check)
        not_found = answer_check.check(
            self._keywords, self._conn, q.terms, self._index_shape().total_rows, top, scored
        )
        return [self._result(c, request.explain, path_name) for c in top], held_back, not_found

    def _plan(self, query: str, warnings: list[str]) -> _Query:
        """Which sides search, with what weights (reference §9 step 6: vectors alone when the hybrid
        merge is off or FTS5 is missing; keywords alone without an embedding)."""
        vector = self._embed_query(query, warnings) if self._embedder is not None else None
        if vector is not None and self._stale(vector, warnings):
            vector = None
        keywords = self._fts_available() and (vector is None or self._settings.query.hybrid.enabled)
        if vector is None:
            vw, tw = 0.0, 1.0
        elif not keywords:
            vw, tw = 1.0, 0.0
        else:
            vw, tw = self._settings.query.hybrid.normalized_weights()
        found = fts_terms(query) if keywords else []
        terms = found[:MAX_QUERY_TERMS]
        return _Query(query, terms, len(found), quoted_phrases(terms), vector, vw, tw)

    # ------------------------------------------------------------------ scores

    def _score(
        self, q: _Query, ranks: dict[int, float], vector_hits: dict[str, float], *, from_matrix: bool = False
    ) -> list[Candidate]:
        """Every candidate of either side with both figures, raw and calibrated, and their merge.

        A keyword hit's embedding (for its cosine) comes from the in-memory matrix when that served the
        vector side (``from_matrix``): the same bytes as the index's, without reading them (in
        PostgreSQL each is a TOAST row: 120 of them cost 2.5 ms)."""
        stored = None
        if from_matrix and q.vector is not None and self._vectors is not None:
            stored = self._vectors.matrix  # its current state; None-checked below
        matrix_rows = stored is not None and stored.rows > 0
        rows = self._chunk_rows(
            list(ranks), list(vector_hits), with_vectors=q.vector is not None and not matrix_rows
        )
        vectors: dict[str, bytes] | None = None
        if matrix_rows and stored is not None:
            vectors = stored.stored_vectors([r[0] for r in rows if r[0] not in vector_hits])
            if vectors is None:  # dropped meanwhile (a write of this process): read them after all
                rows = self._chunk_rows(list(ranks), list(vector_hits), with_vectors=True)
        coverage = self._coverage(q.terms, [r[1] for r in rows if r[1] in ranks])
        ideal = self._keywords.ideal(q.phrases, self._index_shape().total_rows) if q.phrases else 0.0
        second = self._second_stage(q, ranks, rows)  # how the best keyword hits are weighed again
        cal = self.calibration
        query_norm = _norm(q.vector) if q.vector is not None else 0.0
        out = []
        for r in rows:
            cid, rowid = r[0], r[1]
            rank = ranks.get(rowid)
            cosine = vector_hits.get(cid)
            if cosine is None and q.vector is not None:
                cosine = _cosine(q.vector, query_norm, vectors.get(cid) if vectors is not None else r[8])
            text = None
            w = second.get(rowid, _UNWEIGHED)
            if rank is not None:
                text = ranking.keyword_score(rank * w.rank, ideal, coverage.get(rowid, 0.0)) * w.evidence
            vector = None if cosine is None else (cal.score(cosine) if cal is not None else max(0.0, cosine))
            out.append(
                Candidate(
                    id=cid,
                    path=r[2],
                    source=r[3],
                    start_line=int(r[4]),
                    end_line=int(r[5]),
                    text=r[6],
                    date=r[7],
                    rowid=rowid,
                    text_score=text,
                    vector_score=vector,
                    bm25=rank,
                    cosine=cosine,
                    proximity=w.rank,
                    trailing=w.evidence,
                    merged=ranking.combine(
                        text, vector, vector_weight=q.vector_weight, text_weight=q.text_weight
                    ),
                )
            )
        return out

    def _second_stage(
        self, q: _Query, ranks: dict[int, float], rows: list[tuple[Any, ...]]
    ) -> dict[int, second_stage.Weight]:
        """The best ``second_stage.HITS`` keyword hits' weights by where they hold the query's words
        (``second_stage``), read with the index's tokenizer in two short passes."""
        if not ranks or not q.phrases or not self._settings.query.hybrid.second_stage.enabled:
            return {}
        reader = self._keywords.tokenizer()  # the tokens the keyword side matched: phrases' and lines'
        total = self._index_shape().total_rows
        terms = [
            second_stage.Term(tuple(tokens), self._keywords.ideal([p], total))
            for p, tokens in zip(q.phrases, self._keywords.phrase_tokens(q.phrases), strict=True)
            if tokens
        ]
        found = [r for r in rows if r[1] in ranks]  # keyword hits come first, in rank order
        best = found[: second_stage.HITS]
        lines = [fts_text(str(r[6])).split("\n") for r in best]  # fts_text keeps line breaks as they are
        places = reader.places(
            [line for hit_lines in lines for line in hit_lines], {t for m in terms for t in m.tokens}
        )
        hits, at = [], 0
        for r, hit_lines in zip(best, lines, strict=True):
            hits.append(second_stage.Hit(r[1], r[2], int(r[4]), int(r[5]), places[at : at + len(hit_lines)]))
            at += len(hit_lines)
        spans = [second_stage.Place(r[1], r[2], int(r[4]), int(r[5])) for r in found]
        return second_stage.weights(hits, spans, terms)

    def _chunk_rows(self, rowids: list[int], ids: list[str], *, with_vectors: bool) -> list[tuple[Any, ...]]:
        """(id, rowid, path, source, start, end, text, date, embedding) of the keyword hits (by rowid)
        then the vector hits (by id), each once; chunks removed since they were found are left out.
        A vector hit's embedding is not read (None): its cosine came with it."""
        columns = "SELECT id, rowid, path, source, start_line, end_line, text, date,"
        select = f"{columns} {'embedding' if with_vectors else 'NULL'} FROM chunks WHERE"
        # Two lookups, not one "rowid IN (...) OR id IN (...)": with either list empty SQLite scans
        # the whole table (145 ms at 100k chunks).
        by_rowid: dict[int, tuple[Any, ...]] = {}
        if rowids:
            where, params = self._conn.one_of("rowid", rowids)
            by_rowid = {r[1]: r for r in self._conn.execute(f"{select} {where}", params)}
        ordered = [by_rowid[i] for i in rowids if i in by_rowid]
        seen = {r[0] for r in ordered}
        wanted = [i for i in ids if i not in seen]
        if wanted:
            where, params = self._conn.one_of("id", wanted)
            by_id = {r[0]: r for r in self._conn.execute(f"{columns} NULL FROM chunks WHERE {where}", params)}
            ordered += [by_id[i] for i in wanted if i in by_id]
        return ordered

    def _coverage(self, terms: list[str], rowids: list[int]) -> dict[int, float]:
        """The share of the query's terms each chunk holds as written (``ranking.term_coverage``)."""
        if not rowids:
            return {}
        wanted = ranking.coverage_terms([fts_text(t).strip() for t in terms])
        texts = self._keywords.texts(rowids)
        return {rowid: ranking.term_coverage(wanted, text) for rowid, text in texts.items()}

    # ------------------------------------------------------------------ keyword

    def _fts_available(self) -> bool:
        if not self._has_fts:  # cached once true: the index never drops the table
            self._has_fts = self._conn.has_keyword_index()
        return self._has_fts

    def _index_shape(self) -> _IndexShape:
        token = self._conn.write_token()
        if self._shape is None or self._shape.token != token:
            total, present, seen_by = self._conn.chunk_summary()
            width = stored_width(self._conn, read_meta(self._conn)) if self._embedder is not None else None
            cal = load_calibration(self._conn) if self._embedder is not None else None
            if self._shape is not None:
                self._keywords.forget()  # another process wrote: document counts changed
            self._shape = _IndexShape(token, int(total), present, seen_by, width, cal)
        return self._shape

    def _audience_filter(self, request: SearchRequest) -> tuple[str, ...] | None:
        """The audiences the reader may see, when the index holds rows of others (else no filter)."""
        visibility = request.visibility
        if visibility is None or visibility.labels is None:
            return None
        if self._index_shape().audiences <= visibility.labels:
            return None
        return tuple(sorted(visibility.labels)) or ("",)  # sees nothing: a label no row has

    def _keyword_filters(self, sources: Sequence[str]) -> tuple[bool, list[str]]:
        """(filter by model?, sources to filter by): only what would actually remove rows."""
        shape = self._index_shape()
        wanted = list(sources) if not shape.sources <= set(sources) else []
        with_model = self._vectors is not None
        if self._vectors is not None:
            matrix = self._vectors.matrix
            # the matrix holds every row of the model that has a vector: all rows, if counts agree
            with_model = not (matrix.is_valid(self.model) and matrix.rows == shape.total_rows)
        return with_model, wanted

    def _keyword_search(
        self,
        phrases: list[str],
        limit: int,
        sources: Sequence[str],
        request: SearchRequest,
        audiences: Sequence[str] | None = None,
    ) -> dict[int, float]:
        with_model, source_filter = self._keyword_filters(sources)
        filters = KeywordFilters(
            model=self.model if with_model else None,
            sources=tuple(source_filter),
            dates=_date_bounds(request),
            audiences=audiences,
        )
        return self._keywords.search(phrases, filters, limit)

    # ------------------------------------------------------------------ vector

    def _stale(self, query_vec: np.ndarray, warnings: list[str]) -> bool:
        """True (and a warning) when the query vector has another width than the index's vectors: the
        provider now serves another model, so every stored vector is stale until the index rebuilds."""
        width = self._index_shape().width
        if width is None or int(query_vec.shape[0]) == width:
            return False
        self.stale_width = (width, int(query_vec.shape[0]))
        warnings.append(
            f"the index's vectors are stale: {self.model} now returns {query_vec.shape[0]}-dimensional "
            f"vectors but the index holds {width}-dimensional ones; keyword results only until the "
            "index is rebuilt (a rebuild has been started)"
        )
        return True

    def _embed_query(self, query: str, warnings: list[str]) -> np.ndarray | None:
        import numpy as np

        assert self._embedder is not None
        try:
            vec = np.asarray(self._embedder.embed_query(query), dtype=np.float32).reshape(-1)
        except EmbeddingError as exc:
            warnings.append(f"query embedding failed, keyword results only: {exc}")
            return None
        if vec.size == 0 or not np.isfinite(vec).all() or not vec.any():
            warnings.append("query embedding is empty or all zeros; vector search skipped")
            return None
        return vec

    # ------------------------------------------------------------------ rows and results

    def _decay(self, cands: list[Candidate], half_life_days: float) -> list[Candidate]:
        now = datetime.now(UTC)
        out = []
        for c in cands:
            day = ranking.decay_date(c.path, c.source, c.date)
            if day is None and c.date is None and not ranking.is_evergreen(c.path, c.source):
                day = self._mtime_day(c.path)
            out.append(replace(c, decay=ranking.decay_multiplier(day, now, half_life_days)))
        return out

    def _mtime_day(self, rel_path: str) -> date | None:
        """Undated non-memory results age from their file's mtime, resolved against the workspace."""
        if self._workspace is None:
            return None
        if rel_path not in self._mtime_days:
            try:
                mtime = (self._workspace / rel_path).stat().st_mtime
                self._mtime_days[rel_path] = datetime.fromtimestamp(mtime, UTC).date()
            except OSError:
                self._mtime_days[rel_path] = None
        return self._mtime_days[rel_path]

    @staticmethod
    def _result(c: Candidate, explain: bool, vector_path: str | None) -> SearchResult:
        explanation = None
        if explain:
            explanation = ScoreExplanation(
                text_score=c.text_score,
                vector_score=c.vector_score,
                merged=c.merged,
                decay_multiplier=c.decay,
                final=c.final,
                mmr_rank=c.mmr_rank,
                vector_path=vector_path if c.vector_score is not None else None,
                bm25=c.bm25,
                cosine=c.cosine,
                date_weight=c.date_weight,
                proximity=c.proximity,
                trailing=c.trailing,
            )
        return SearchResult(
            path=c.path,
            start_line=c.start_line,
            end_line=c.end_line,
            score=c.final,
            snippet=ranking.snippet(c.text),
            source=c.source,
            date=c.date,
            explanation=explanation,
        )


def _local_today() -> date:
    """Today on the machine's clock, in its local zone (as daily logs are named without userTimezone)."""
    return date.fromisoformat(date_stamp(datetime.now(UTC), user_zone(None)))


def _date_bounds(request: SearchRequest) -> tuple[str, str] | None:
    """(after, before) as inclusive ISO days, or None without a range."""
    if request.after is None and request.before is None:
        return None
    return (request.after or date.min).isoformat(), (request.before or date.max).isoformat()


def _norm(query: np.ndarray) -> float:
    import numpy as np

    return float(np.linalg.norm(query))


def _cosine(query: np.ndarray, norm: float, blob: bytes | None) -> float | None:
    """The cosine of a stored (L2-normalised) vector and the query of L2 norm ``norm``; None without
    one of its width."""
    import numpy as np

    if blob is None or len(blob) != query.size * 4 or norm <= 0:
        return None
    return float(np.frombuffer(blob, dtype="<f4") @ query) / norm
