"""Memory search over the index: keyword (FTS5), vector, and their hybrid merge (reference §9).

The flow of one query:

1. Empty or whitespace query -> no results.
2. ``candidates = min(200, max(1, maxResults * candidateMultiplier))``.
3. Keyword search: the AND of the meaningful keywords, then their OR when the AND finds nothing
   (``keywords.fts_queries``). BM25 via ``bm25(chunks_fts)``, limited to ``candidates`` rows.
4. Hybrid: the query is embedded and the nearest ``candidates`` chunks fetched from the fastest
   valid vector path (skipped for an all-zero vector); both lists merged by chunk id.
5. Date range, decay, sort, min-score (strict, then relaxed for keyword hits; compared with the
   undecayed score, see ``ranking``), MMR (greedy for the first N picks), top N.

A date range is applied inside each search (keyword SQL, the matrix mask, the vector SQL), so
the candidates are the best ones within the range; sqlite-vec can only look 4096 neighbours deep.
So is the reader's visibility (``SearchRequest.visibility``, DESIGN decision 14): rows the reader may
not see are never candidates, so a group's results are not crowded out by private hits.

FTS-only mode (no embedder) finds every indexed chunk by keyword, whatever model indexed it
(OpenClaw #26792). Its scores are BM25 alone, which depend on the size of the corpus and on how
common a word is, not on how well a note answers; so the min-score floor (tuned for cosine
similarity) is not applied there unless the request sets ``min_score`` explicitly.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sessionmem.config import MemorySearchConfig
from sessionmem.errors import EmbeddingError, MemoryIndexError
from sessionmem.memory import ranking
from sessionmem.memory.db import VectorSupport, write_token
from sessionmem.memory.embedding import Embedder
from sessionmem.memory.ftstext import fts_text
from sessionmem.memory.indexer import read_meta, stored_width
from sessionmem.memory.keywords import fts_queries, fts_terms
from sessionmem.memory.ranking import Candidate
from sessionmem.memory.types import ScoreExplanation, SearchRequest, SearchResponse, SearchResult, VectorPath

if TYPE_CHECKING:  # numpy and the vector paths load only when an embedder exists (FTS-only starts fast)
    import numpy as np

    from sessionmem.memory.vectors import VectorRouter

log = logging.getLogger(__name__)

MAX_CANDIDATES = 200
FTS_ONLY_MODEL = "fts-only"


def candidate_count(max_results: int, multiplier: int) -> int:
    return min(MAX_CANDIDATES, max(1, int(max_results * multiplier)))


def fts_sql(*, with_model: bool, n_sources: int, dated: bool, n_audiences: int = 0) -> str:
    """The keyword query (pure). Parameters: match, [model], *sources, [after, before], *audiences, limit.

    Only the id and the BM25 rank are selected: reading FTS5's UNINDEXED columns for every match
    costs more than ranking them (30 ms for 33k matches at 100k chunks), so the model and source
    filters are added only when the index holds rows they would remove (``n_sources`` 0 = none).
    """
    sql = "SELECT f.id, bm25(chunks_fts) AS rank FROM chunks_fts f"
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


@dataclass(frozen=True, slots=True)
class _IndexShape:
    """What the keyword filters need to know, valid until the next write (``token``)."""

    token: tuple[int, int]
    total_rows: int
    sources: frozenset[str]
    audiences: frozenset[str]
    width: int | None  # of the vectors the index holds (None: none yet)


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
        self._conn = conn
        self._embedder = embedder
        self._settings = settings
        self._workspace = workspace
        self._vectors: VectorRouter | None = None
        if embedder is not None:
            from sessionmem.memory.vectors import VectorRouter

            self._vectors = VectorRouter(conn, vector_support, preload=preload_matrix)
        self._mtime_days: dict[str, date | None] = {}
        self._shape: _IndexShape | None = None
        self._has_fts = False
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

    def invalidate(self) -> None:
        """The index wrote: the in-memory matrix must reload before it serves again."""
        if self._vectors is not None:
            self._vectors.invalidate()
        self._mtime_days.clear()
        self._shape = None
        self.stale_width = None

    def warm(self) -> None:
        """Load the in-memory matrix now rather than on the first query."""
        if self._vectors is not None:
            self._vectors.warm(self.model)

    def search(self, request: SearchRequest) -> SearchResponse:
        query = request.query.strip()
        warnings: list[str] = []
        results: list[SearchResult] = []
        mode = self.mode
        if query:
            results, used_vectors = self._run(request, query, warnings)
            if not used_vectors and self.stale_width is not None:
                mode = "fts-only"  # say what answered: the vector half was left out
        return SearchResponse(
            results=tuple(results),
            provider=self._embedder.provider if self._embedder is not None else "none",
            model=self.model,
            mode=mode,
            warnings=tuple(warnings),
        )

    # ------------------------------------------------------------------ flow

    def _run(
        self, request: SearchRequest, query: str, warnings: list[str]
    ) -> tuple[list[SearchResult], bool]:
        qcfg = self._settings.query
        hybrid = qcfg.hybrid
        max_results = request.max_results if request.max_results is not None else qcfg.max_results
        max_results = max(1, int(max_results))
        sources = tuple(request.sources) if request.sources else tuple(self._settings.sources)
        audiences = self._audience_filter(request)
        limit = candidate_count(max_results, hybrid.candidate_multiplier)
        dated = request.after is not None or request.before is not None

        query_vec = self._embed_query(query, warnings) if self._embedder is not None else None
        if query_vec is not None and self._stale(query_vec, warnings):
            query_vec = None
        vector_hits: list[Candidate] = []
        path_name: str | None = None
        if query_vec is not None and self._vectors is not None:  # first: it (re)loads the matrix
            dates = (
                ((request.after or date.min).isoformat(), (request.before or date.max).isoformat())
                if dated
                else None
            )
            path = self._vectors.prepare(self.model)
            path_name = path.name
            hits = self._vectors.serve(
                path, query_vec, limit, model=self.model, sources=sources, dates=dates, audiences=audiences
            )
            vector_hits = self._as_candidates(hits)
        use_vectors = query_vec is not None
        keyword_hits: list[Candidate] = []
        if not use_vectors:
            vw, tw = 0.0, 1.0
            keyword_hits = self._keyword_search(query, limit, sources, request, audiences)
        elif not hybrid.enabled or not self._fts_available():
            vw, tw = 1.0, 0.0  # vector results alone, filtered by minScore (reference §9 step 6)
        else:
            vw, tw = hybrid.normalized_weights()
            keyword_hits = self._keyword_search(query, limit, sources, request, audiences)
        merged = ranking.merge_hybrid(keyword_hits, vector_hits, vector_weight=vw, text_weight=tw)
        merged = self._hydrate(merged)
        merged = [c for c in merged if ranking.in_date_range(c.date, request.after, request.before)]
        if hybrid.temporal_decay.enabled:
            merged = self._decay(merged, hybrid.temporal_decay.half_life_days)
        ranked = ranking.collapse_cross_source(ranking.sort_by_score(merged))  # /new archive vs transcript

        if use_vectors or request.min_score is not None:
            min_score = request.min_score if request.min_score is not None else qcfg.min_score
            ranked = ranking.filter_min_score(ranked, min_score=min_score, text_weight=tw)
        if hybrid.mmr.enabled:
            ranked = ranking.mmr_rerank(ranked, lambda_=hybrid.mmr.lambda_, limit=max_results)
        return [self._result(c, request.explain, path_name) for c in ranked[:max_results]], use_vectors

    # ------------------------------------------------------------------ keyword

    def _fts_available(self) -> bool:
        if not self._has_fts:  # cached once true: the index never drops the table
            row = self._conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'chunks_fts'").fetchone()
            self._has_fts = row is not None
        return self._has_fts

    def _index_shape(self) -> _IndexShape:
        token = write_token(self._conn)
        if self._shape is None or self._shape.token != token:
            (total,) = self._conn.execute("SELECT count(*) FROM chunks").fetchone()
            present = frozenset(r[0] for r in self._conn.execute("SELECT DISTINCT source FROM chunks"))
            seen_by = frozenset(r[0] for r in self._conn.execute("SELECT DISTINCT audience FROM chunks"))
            width = stored_width(self._conn, read_meta(self._conn)) if self._embedder is not None else None
            self._shape = _IndexShape(token, int(total), present, seen_by, width)
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
        query: str,
        limit: int,
        sources: Sequence[str],
        request: SearchRequest,
        audiences: Sequence[str] | None = None,
    ) -> list[Candidate]:
        if not self._fts_available():
            return []
        dated = request.after is not None or request.before is not None
        with_model, source_filter = self._keyword_filters(sources)
        n_audiences = len(audiences) if audiences is not None else 0
        sql = fts_sql(
            with_model=with_model, n_sources=len(source_filter), dated=dated, n_audiences=n_audiences
        )
        params: list[Any] = []
        if with_model:
            params.append(self.model)
        params += source_filter
        if dated:
            params += [(request.after or date.min).isoformat(), (request.before or date.max).isoformat()]
        params += audiences or ()
        for strict, match in zip((True, False), fts_queries(query), strict=False):
            try:
                rows = self._conn.execute(sql, (match, *params, limit)).fetchall()
            except Exception as exc:  # quoting makes this unreachable; a message beats a crash
                raise MemoryIndexError(f"keyword search failed for {match!r}: {exc}") from exc
            if rows:
                coverage = None if strict else self._term_coverage(query, [r[0] for r in rows])
                scores = ranking.keyword_scores([float(r[1]) for r in rows], coverage)
                return [
                    Candidate(
                        id=r[0], path="", source="", start_line=0, end_line=0, text="", text_score=score
                    )
                    for r, score in zip(rows, scores, strict=True)
                ]
        return []

    def _term_coverage(self, query: str, ids: list[str]) -> list[float]:
        """For an OR match: the share of the query's terms each chunk holds."""
        terms = [fts_text(t).strip() for t in fts_terms(query)]
        placeholders = ",".join("?" * len(ids))
        texts = dict(self._conn.execute(f"SELECT id, text FROM chunks WHERE id IN ({placeholders})", ids))
        return [ranking.term_coverage(terms, fts_text(texts.get(i, ""))) for i in ids]

    # ------------------------------------------------------------------ vector

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

    @staticmethod
    def _as_candidates(hits: list[tuple[str, float]]) -> list[Candidate]:
        return [
            Candidate(id=cid, path="", source="", start_line=0, end_line=0, text="", vector_score=score)
            for cid, score in hits
        ]

    # ------------------------------------------------------------------ rows and results

    def _hydrate(self, cands: list[Candidate]) -> list[Candidate]:
        """Fill path, lines, text and date from ``chunks`` in one query."""
        if not cands:
            return []
        ids = [c.id for c in cands]
        rows = self._conn.execute(
            "SELECT id, path, source, start_line, end_line, text, date FROM chunks"
            f" WHERE id IN ({','.join('?' * len(ids))})",
            ids,
        ).fetchall()
        by_id = {r[0]: r for r in rows}
        out = []
        for c in cands:
            r = by_id.get(c.id)
            if r is None:  # removed between the two queries
                continue
            out.append(
                Candidate(
                    id=c.id,
                    path=r[1],
                    source=r[2],
                    start_line=int(r[3]),
                    end_line=int(r[4]),
                    text=r[5],
                    date=r[6],
                    text_score=c.text_score,
                    vector_score=c.vector_score,
                    merged=c.merged,
                    decay=c.decay,
                    mmr_rank=c.mmr_rank,
                )
            )
        return out

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


def timed_search(searcher: Searcher, request: SearchRequest) -> tuple[SearchResponse, float]:
    """One search and its wall time in milliseconds (for the CLI and the benchmark)."""
    start = time.perf_counter()
    response = searcher.search(request)
    return response, (time.perf_counter() - start) * 1000
